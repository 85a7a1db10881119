"""The Newton system of poisson.NewtonSystem as a block-tridiagonal system in x (array code).

With the unknown k = i NZ + j the Newton matrix A (poisson.NewtonSystem.matrix) couples node
(i, j) only to nodes (i, j') of its own column (the Laplacian in z, the z-boundary rows and the
dense Frechet block c_p dz F_i) and to (i -+ 1, j) (the x-Laplacian -aW/-aE of interior rows, the
-1 of the first-order Neumann rows i = 0 / NX-1 toward i = 1 / NX-2; Dirichlet rows are unit
rows).  So, per column i, with b_i, x_i in R^NZ,

    diag(lo_i) x_{i-1} + D_i x_i + diag(up_i) x_{i+1} = b_i,      D_i: (NZ, NZ), lo_i, up_i: (NZ,)

(lo_0 = up_{NX-1} = 0).  ``BlockSystem`` derives D/lo/up from NewtonSystem's static triplets
(and raises if any entry falls outside this pattern) and adds F; every row is divided by its
diagonal exactly as ``NewtonSystem.matrix`` does (row equilibration), so the scaled blocks are
the entries of the reference CSC matrix.

``solve`` is the block Thomas algorithm (block LU without block pivoting):

    S_0 = D_0,  S_i = D_i - diag(lo_i) G_{i-1},   r_i = b_i - lo_i * z_{i-1}
    [G_i | z_i] = S_i^{-1} [diag(up_i) | r_i]                      (LU with partial pivoting)
    x_{NX-1} = z_{NX-1},   x_i = z_i - G_i x_{i+1}

It needs every S_i non-singular.  They are: eliminating the Dirichlet unknowns and substituting
the Neumann rows (x_b = x_neighbour) leaves a symmetric matrix, the 5-point Laplacian (an
irreducibly diagonally dominant M-matrix: the gate rows are Dirichlet) plus c_p dz F_i with F
positive semidefinite (Fermi-Dirac / Boltzmann rho decreasing in eps), i.e. SPD; S_1..S_{NX-2}
are its block Schur complements (SPD) up to the unit boundary rows, and for Neumann
S_{NX-1} = I - S_{NX-2}^{-1} diag(aE/diag) has det = det(SPD)/det(SPD) > 0.  S_{NX-1} is not
symmetric, and POTENTIAL's rho (from the BTE) need not be monotone, so inside a block the
factorisation pivots (partial pivoting, here LAPACK's gesv; the CUDA kernel pivots too).

``solve_exchange`` is the same algorithm written the way kernels/cuda_blocktri.py runs it
(Gauss-Jordan exchange steps with implicit partial pivoting, the block inverse kept in place);
it exists so that the kernel's index bookkeeping is tested on the CPU.
"""
from __future__ import annotations

import numpy as np


class BlockSystem:
    """Static block form of one NewtonSystem (host arrays, unscaled):
    ``D0`` (NX, NZ, NZ), ``lo0``/``up0`` (NX, NZ), ``interior`` mask (NX, NZ)."""

    def __init__(self, sysm):
        NX, NZ = sysm.NX, sysm.NZ
        n, m = sysm.n, sysm.n_static
        self.NX, self.NZ, self.cp_dz = NX, NZ, sysm.cp_dz
        ucols = np.repeat(np.arange(n), np.diff(sysm.indptr))
        cols = ucols[sysm.inverse[:m]].astype(np.int64)
        rows = np.asarray(sysm.all_rows[:m], dtype=np.int64)
        vals = np.asarray(sysm.vals_static, dtype=float)
        bi, bj = rows // NZ, rows % NZ
        ci, cj = cols // NZ, cols % NZ
        same, west, east = ci == bi, ci == bi - 1, ci == bi + 1
        bad = ~(same | ((west | east) & (cj == bj)))
        if bad.any():
            k = int(np.flatnonzero(bad)[0])
            raise ValueError(f"Newton matrix entry ({rows[k]}, {cols[k]}) is not block tridiagonal "
                             "with diagonal off-diagonal blocks")
        D0 = np.zeros((NX, NZ, NZ))
        np.add.at(D0, (bi[same], bj[same], cj[same]), vals[same])
        lo0 = np.zeros((NX, NZ))
        up0 = np.zeros((NX, NZ))
        np.add.at(lo0, (bi[west], bj[west]), vals[west])
        np.add.at(up0, (bi[east], bj[east]), vals[east])
        self.D0, self.lo0, self.up0 = D0, lo0, up0
        interior = np.zeros((NX, NZ), dtype=bool)
        interior.ravel()[sysm.interior] = True
        self.interior = interior
        self.dirichlet = np.asarray(sysm.dirichlet, dtype=bool)


def block_system(model, sysm) -> BlockSystem:
    """The BlockSystem of ``sysm``, cached on the model beside it."""
    key = ("_iter_block_system", sysm.x_bc)
    cache = model._device_cache
    if key not in cache or cache[key][0] is not sysm:
        cache[key] = (sysm, BlockSystem(sysm))
    return cache[key][1]


def construct(xp, bs: BlockSystem, F, rhs_int, bflat):
    """Row-equilibrated (D, lo, up, b): D (NX, NZ, NZ), lo/up/b (NX, NZ), on ``xp``.

    F: Frechet blocks (NX-2, NZ-2, NZ-2); rhs_int: interior right-hand side (NX-2, NZ-2);
    bflat: boundary values (NX NZ,).  Equals the reference CSC matrix and b of poisson.construct."""
    D = xp.asarray(bs.D0).copy()
    D[1:-1, 1:-1, 1:-1] += bs.cp_dz * xp.asarray(F)
    b = xp.asarray(bflat, dtype=float).reshape(bs.NX, bs.NZ).copy()
    b[1:-1, 1:-1] = xp.asarray(rhs_int)
    s = 1.0 / xp.diagonal(D, axis1=1, axis2=2)
    D *= s[:, :, None]
    return D, xp.asarray(bs.lo0) * s, xp.asarray(bs.up0) * s, b * s


def solve(xp, D, lo, up, b, dirichlet=None):
    """x (NX, NZ) of the block-tridiagonal system by block Thomas (see the module docstring);
    ``dirichlet`` (NX, NZ) mask: those entries are set to b exactly (unit rows), as poisson.solve."""
    NX, NZ = b.shape
    G = xp.empty((NX, NZ, NZ))
    z = xp.empty((NX, NZ))
    eye = xp.eye(NZ)
    for i in range(NX):
        S = D[i] if i == 0 else D[i] - lo[i][:, None] * G[i - 1]
        r = b[i] if i == 0 else b[i] - lo[i] * z[i - 1]
        R = xp.concatenate([eye * up[i][None, :], r[:, None]], axis=1)
        X = xp.linalg.solve(S, R)
        G[i], z[i] = X[:, :NZ], X[:, NZ]
    x = xp.empty((NX, NZ))
    x[-1] = z[-1]
    for i in range(NX - 2, -1, -1):
        x[i] = z[i] - G[i] @ x[i + 1]
    if dirichlet is not None:
        m = xp.asarray(dirichlet)
        x[m] = b[m]
    return x


def exchange_inverse(S, r, pivot=True):
    """Gauss-Jordan exchange steps with implicit partial pivoting on [S | r], the way the CUDA
    kernel runs them (no row swaps: the pivot of column k is the largest |entry| among the rows
    not used yet).  Returns (S^{-1}, S^{-1} r).  After the NZ exchanges the array M holds
    M[p_k, k'] = S^{-1}[k, p_k'] in its first NZ columns and M[p_k, NZ] = (S^{-1} r)[k]."""
    NZ = S.shape[0]
    M = np.concatenate([S, r[:, None]], axis=1).astype(float)
    used = np.zeros(NZ, dtype=bool)
    p_of = np.empty(NZ, dtype=np.int64)
    for k in range(NZ):
        col = np.where(used, -1.0, np.abs(M[:, k]))
        p = int(np.argmax(col)) if pivot else k  # first of equal maxima, as the kernel's reduction
        used[p] = True
        p_of[k] = p
        piv = M[p, k]
        rowp = M[p].copy()
        colk = M[:, k].copy()
        f = colk / piv
        M -= f[:, None] * rowp[None, :]  # rows r != p, columns c != k
        M[p] = rowp / piv
        M[:, k] = -f
        M[p, k] = 1.0 / piv
    k_of = np.empty(NZ, dtype=np.int64)
    k_of[p_of] = np.arange(NZ)
    Sinv = np.empty((NZ, NZ))
    Sinv[k_of[:, None], p_of[None, :]] = M[:, :NZ]  # row rho -> k_of[rho], column kappa -> p_of[kappa]
    z = np.empty(NZ)
    z[k_of] = M[:, NZ]
    return Sinv, z


def solve_exchange(D, lo, up, b, pivot=True):
    """Block Thomas with exchange_inverse for the blocks (NumPy; the CUDA kernel's algorithm)."""
    NX, NZ = b.shape
    G = np.empty((NX, NZ, NZ))
    z = np.empty((NX, NZ))
    for i in range(NX):
        S = D[i] if i == 0 else D[i] - lo[i][:, None] * G[i - 1]
        r = b[i] if i == 0 else b[i] - lo[i] * z[i - 1]
        Sinv, z[i] = exchange_inverse(S, r, pivot)
        G[i] = Sinv * up[i][None, :]
    x = np.empty((NX, NZ))
    x[-1] = z[-1]
    for i in range(NX - 2, -1, -1):
        x[i] = z[i] - G[i] @ x[i + 1]
    return x
