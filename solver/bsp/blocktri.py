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

``solve_cr`` is block cyclic reduction (the algorithm of the CUDA kernels of
kernels/cuda/cyclic_reduction.cu, which newton.solve_linsys_cr launches).  Every block it inverts
is a Schur complement of the row-scaled matrix and must be non-singular.  They are: eliminating
the Dirichlet unknowns and substituting the Neumann rows (x_b = x_neighbour) leaves a symmetric
matrix, the 5-point Laplacian (an irreducibly diagonally dominant M-matrix: the gate rows are
Dirichlet) plus c_p dz F_i with F positive semidefinite (Fermi-Dirac / Boltzmann rho decreasing in
eps), i.e. SPD, whose block Schur complements are SPD up to the unit boundary rows; the Neumann
boundary blocks are not symmetric, and POTENTIAL's rho (from the BTE) need not be monotone, so
inside a block the factorisation pivots (partial pivoting: LAPACK's gesv here; the CUDA kernel's
Gauss-Jordan exchange steps with implicit partial pivoting, ``exchange_inverse``).
"""
from __future__ import annotations

import numpy as np

MAX_NZ = 127  # the CUDA kernels' pivot key holds the row in 7 bits (kernels/cuda/cyclic_reduction.cu)
GJ_MAX_NZ = 204  # the largest block of gj_inverse in 227 KB of shared memory (kernels/cuda/newton.gj_fits)


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
    cache = model.device_cache
    if key not in cache or cache[key][0] is not sysm:
        cache[key] = (sysm, BlockSystem(sysm))
    return cache[key][1]


def construct(xp, bs: BlockSystem, F, rhs_int, bflat):
    """Row-equilibrated (D, lo, up, b): D (NX, NZ, NZ), lo/up/b (NX, NZ), on ``xp``.

    F: Frechet blocks (NX-2, NZ-2, NZ-2); rhs_int: interior right-hand side (NX-2, NZ-2);
    bflat: boundary values (NX NZ,).  Equals the reference CSC matrix and b of poisson.construct_linsys."""
    D = xp.asarray(bs.D0).copy()
    D[1:-1, 1:-1, 1:-1] += bs.cp_dz * xp.asarray(F)
    b = xp.asarray(bflat, dtype=float).reshape(bs.NX, bs.NZ).copy()
    b[1:-1, 1:-1] = xp.asarray(rhs_int)
    s = 1.0 / xp.diagonal(D, axis1=1, axis2=2)
    D *= s[:, :, None]
    return D, xp.asarray(bs.lo0) * s, xp.asarray(bs.up0) * s, b * s


def exchange_inverse(S, r, pivot=True):
    """Gauss-Jordan exchange steps with implicit partial pivoting on [S | r], the way the CUDA
    kernel cr_eliminate runs them on its block (no row swaps: the pivot of column k is the largest
    |entry| among the rows not used yet).  Returns (S^{-1}, S^{-1} r).  After the NZ exchanges the array M holds
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


# ---------------------------------------------------------------------- block cyclic reduction
def cr_levels(NX: int):
    """The levels of block cyclic reduction on NX block columns: a list of (h, first, step, n_elim,
    n_kept) with stride h = 1, 2, 4, ... < NX.  At stride h the active columns are the multiples of
    h; the odd multiples i = first + step m (first = h, step = 2 h, m < n_elim) are eliminated, the
    even multiples 2 h m (m < n_kept) are kept and updated.  After the last level only column 0 is
    left (eliminated alone, no neighbours).  Shared by solve_cr and the CUDA driver."""
    out = []
    h = 1
    while h < NX:
        n_elim = (NX - 1 - h) // (2 * h) + 1
        n_kept = (NX - 1) // (2 * h) + 1
        out.append((h, h, 2 * h, n_elim, n_kept))
        h *= 2
    return out


def solve_cr(D, lo, up, b, dirichlet=None):
    """x (NX, NZ) by block cyclic reduction (NumPy; the algorithm of the CUDA kernels cr_*).

    Equation of active column i at stride h:  A_i x_{i-h} + B_i x_i + C_i x_{i+h} = r_i
    (level 0: A = diag(lo), B = D, C = diag(up), r = b).  For every odd multiple i of h,
    [XA_i | XC_i | Xr_i] = B_i^{-1} [A_i | C_i | r_i] (LU with partial pivoting; A or C is zero when
    the neighbour is outside), so x_i = Xr_i - XA_i x_{i-h} - XC_i x_{i+h}; substituting into the
    even multiples i:  B_i -= A_i XC_{i-h} + C_i XA_{i+h},  A_i <- -A_i XA_{i-h},
    C_i <- -C_i XC_{i+h},  r_i -= A_i Xr_{i-h} + C_i Xr_{i+h}.  Column 0 is solved last; then the
    back substitution runs the levels in reverse.  Each B_i eliminated is a Schur complement of
    the (row-scaled) matrix, non-singular under blocktri's argument; pivoting inside the block as
    in exchange_inverse.  log2(NX) levels, each of independent blocks (parallel on the GPU)."""
    NX, NZ = b.shape
    B = np.array(D, dtype=float)
    A = np.zeros((NX, NZ, NZ))
    C = np.zeros((NX, NZ, NZ))
    ar = np.arange(NZ)
    A[:, ar, ar] = lo
    C[:, ar, ar] = up
    r = np.array(b, dtype=float)
    XA = np.zeros((NX, NZ, NZ))
    XC = np.zeros((NX, NZ, NZ))
    Xr = np.zeros((NX, NZ))
    levels = cr_levels(NX)

    def eliminate(i, h):
        Ai = A[i] if i - h >= 0 else np.zeros((NZ, NZ))
        Ci = C[i] if i + h < NX else np.zeros((NZ, NZ))
        X = np.linalg.solve(B[i], np.concatenate([Ai, Ci, r[i][:, None]], axis=1))
        XA[i], XC[i], Xr[i] = X[:, :NZ], X[:, NZ:2 * NZ], X[:, 2 * NZ]

    for h, first, step, n_elim, n_kept in levels:
        for m in range(n_elim):
            eliminate(first + step * m, h)
        for m in range(n_kept):
            i = 2 * h * m
            Bn, rn = B[i].copy(), r[i].copy()
            An = np.zeros((NZ, NZ))
            Cn = np.zeros((NZ, NZ))
            if i - h >= 0:
                Bn -= A[i] @ XC[i - h]
                An = -A[i] @ XA[i - h]
                rn -= A[i] @ Xr[i - h]
            if i + h < NX:
                Bn -= C[i] @ XA[i + h]
                Cn = -C[i] @ XC[i + h]
                rn -= C[i] @ Xr[i + h]
            B[i], A[i], C[i], r[i] = Bn, An, Cn, rn
    eliminate(0, NX)
    dm = np.zeros((NX, NZ), dtype=bool) if dirichlet is None else np.asarray(dirichlet, dtype=bool)
    x = np.empty((NX, NZ))
    x[0] = np.where(dm[0], b[0], Xr[0])
    for h, first, step, n_elim, n_kept in reversed(levels):
        for m in range(n_elim):
            i = first + step * m
            v = Xr[i] - XA[i] @ x[i - h]
            if i + h < NX:
                v = v - XC[i] @ x[i + h]
            x[i] = np.where(dm[i], b[i], v)
    return x
