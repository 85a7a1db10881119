"""Block cyclic reduction of the Newton system over batched dense block operations (any NZ).

The algorithm of blocktri.solve_cr (read its docstring first), with each level done as a few
array operations over ALL blocks of the level instead of one block at a time, so that the same
code runs on NumPy and on CuPy (``xp``) and on the GPU every level is a handful of batched
launches: one batched LU solve (``gesv``: ``xp.linalg.solve`` on a stack (m, n, n) with stacked
right-hand sides; CuPy runs cuBLAS getrfBatched / getrsBatched for n <= its batched-gesv limit)
and two strided-batched GEMMs (``xp.matmul`` on stacks).  No block-size limit (NZ = 129, 257 run
like NZ = 65), no host synchronisation inside the levels.

Active columns at stride h are kept compact: arrays (n_active, NZ, ...) whose entry k is column
k h; the eliminated columns are the odd entries ``[1::2]``, the kept ones the even ``[0::2]``.
Kept entry m has its left eliminated neighbour at eliminated entry m - 1 (m >= 1) and its right
one at entry m (m < n_elim).  The coupling A of entry 0 and C of the last entry are zero at every
level (column 0 has no left neighbour, the last column no right one).

Level 0 (h = 1) uses the structure: A = diag(lo), C = diag(up), so
    B^{-1} [A | C | r] = [W diag(lo) | W diag(up) | W r],   [W | W r] = B^{-1} [I | r],
one solve with NZ + 1 right-hand sides (not 2 NZ + 1), and the kept-block updates are row and
column scalings of W (no GEMM).  Levels h >= 2: X = B^{-1} [A | C | r] (2 NZ + 1 columns), then
    P = A_k @ X_left,  Q = C_k @ X_right          (two batched GEMMs, (n, n) @ (n, 2n + 1))
    B_k -= P[:, n:2n] + Q[:, :n],  A_k = -P[:, :n],  C_k = -Q[:, n:2n],  r_k -= P[:, 2n] + Q[:, 2n]
(the same products, in the same order, as solve_cr).  Back substitution level by level in
reverse: x_e = Xr - XA x_left - XC x_right as batched matrix-vector products (level 0:
x_e = W (r - lo x_left - up x_right)); Dirichlet entries are set to b as solve_cr does.

``cr_batched_counts`` gives the flops, bytes and launches of every level (docs/performance-iter-next.md).

Variant ``numerics.linsys: batched_cr``: ``construct_linsys`` / ``solve_linsys`` below are the
phases in array code (any backend; what numpy and numba run when the key is set), the cupy
backend builds the same block form with its construct kernel and solves it with
``solve_cr_batched`` through kernels/cuda/newton.py.
"""
from __future__ import annotations

from solver.bsp import blocktri
from solver.bsp.blocktri import cr_levels


def construct_linsys(model, backend, sysm, F, rhs_int, bflat):
    """Phase construct_linsys, variant batched_cr: ((D, lo, up), b) the row-equilibrated block form
    (blocktri.construct) as backend arrays."""
    D, lo, up, b = blocktri.construct(backend.xp, blocktri.block_system(model, sysm), F, rhs_int, bflat)
    return (D, lo, up), b


def solve_linsys(model, backend, sysm, A, b, reuse=False):
    """Phase solve_linsys, variant batched_cr: x (NX NZ,) by solve_cr_batched on backend.xp
    (LU with partial pivoting per block), Dirichlet entries equal b exactly (``reuse``: ignored)."""
    D, lo, up = A
    return solve_cr_batched(backend.xp, D, lo, up, b, blocktri.block_system(model, sysm).dirichlet).ravel()


def _matvec(matmul, M, v):
    return matmul(M, v[..., None])[..., 0]


def solve_cr_batched(xp, D, lo, up, b, dirichlet=None, gesv=None, matmul=None):
    """x (NX, NZ) of the block-tridiagonal system by block cyclic reduction, each level batched.

    D (NX, NZ, NZ), lo/up/b (NX, NZ): the (row-equilibrated) blocks of blocktri.construct, on
    ``xp``; lo[0] and up[-1] are ignored (no neighbour).  ``dirichlet`` (NX, NZ) mask: those
    entries are set to b exactly.  ``gesv(a, rhs)``: the batched solver of a (m, n, n) with
    rhs (m, n, k), default ``xp.linalg.solve`` (LU with partial pivoting per block); ``matmul(a, b)``
    the product of stacks (m, p, q) @ (m, q, r), default ``xp.matmul``."""
    gesv = xp.linalg.solve if gesv is None else gesv
    matmul = xp.matmul if matmul is None else matmul
    NX, NZ = b.shape
    n = NZ
    dm = None if dirichlet is None else xp.asarray(dirichlet, dtype=bool)
    levels = cr_levels(NX)
    saved = []  # per level: the data of the back substitution
    B, r = D, b
    A = C = None  # dense couplings from level 1 on
    for h, _, _, n_elim, n_kept in levels:
        ne, nk = n_elim, n_kept
        Be, re = B[1::2], r[1::2]
        Bk, rk = B[0::2], r[0::2]
        if h == 1:
            lo_e, up_e = lo[1::2], up[1::2]
            lo_k, up_k = lo[0::2], up[0::2]
            if ne == nk:  # the last column is eliminated: no right neighbour
                up_e = xp.concatenate([up_e[:-1], xp.zeros((1, n))])
            eye = xp.broadcast_to(xp.eye(n), (ne, n, n))
            X = gesv(Be, xp.concatenate([eye, re[..., None]], axis=2))
            W, z = X[..., :n], X[..., n]
            saved.append((W, z, lo_e, up_e))
            Wl, zl = W[:nk - 1], z[:nk - 1]
            lk = lo_k[1:, :, None]
            uk = up_k[:ne, :, None]
            Bn = Bk.copy()
            Bn[1:] -= lk * Wl * up_e[:nk - 1, None, :]
            Bn[:ne] -= uk * W * lo_e[:, None, :]
            An = xp.zeros((nk, n, n))
            An[1:] = -(lk * Wl * lo_e[:nk - 1, None, :])
            Cn = xp.zeros((nk, n, n))
            Cn[:ne] = -(uk * W * up_e[:, None, :])
            rn = rk.copy()
            rn[1:] -= lo_k[1:] * zl
            rn[:ne] -= up_k[:ne] * z
        else:
            X = gesv(Be, xp.concatenate([A[1::2], C[1::2], re[..., None]], axis=2))
            saved.append((X[..., :n], X[..., n:2 * n], X[..., 2 * n]))
            Ak, Ck = A[0::2], C[0::2]
            P = matmul(Ak[1:], X[:nk - 1])
            Q = matmul(Ck[:ne], X)
            Bn = Bk.copy()
            Bn[1:] -= P[..., n:2 * n]
            Bn[:ne] -= Q[..., :n]
            An = xp.zeros((nk, n, n))
            An[1:] = -P[..., :n]
            Cn = xp.zeros((nk, n, n))
            Cn[:ne] = -Q[..., n:2 * n]
            rn = rk.copy()
            rn[1:] -= P[..., 2 * n]
            rn[:ne] -= Q[..., 2 * n]
        B, A, C, r = Bn, An, Cn, rn
    x = xp.empty((NX, NZ))
    x[0] = gesv(B[:1], r[:1, :, None])[0, :, 0]
    if dm is not None:
        x[0] = xp.where(dm[0], b[0], x[0])
    for (h, _, _, ne, _), data in zip(reversed(levels), reversed(saved)):
        xl = x[0:NX - h:2 * h][:ne]
        xr = x[2 * h::2 * h]
        nr = xr.shape[0]
        if h == 1:
            W, z, lo_e, up_e = data
            t = lo_e * xl
            t[:nr] += up_e[:nr] * xr
            v = z - _matvec(matmul, W, t)
        else:
            XA, XC, Xr = data
            v = Xr - _matvec(matmul, XA, xl)
            v[:nr] -= _matvec(matmul, XC[:nr], xr)
        if dm is not None:
            v = xp.where(dm[h::2 * h], b[h::2 * h], v)
        x[h::2 * h] = v
    return x


def cr_batched_counts(NX: int, NZ: int):
    """Work of solve_cr_batched per level: a list of dicts with h, n_elim, n_kept and
      getrf   LU flops (2/3 n^3 per eliminated block),
      getrs   triangular-solve flops (2 n^2 per right-hand side: n + 1 at level 0, 2 n + 1 later),
      gemm    update flops (two (n, n) @ (n, 2n + 1) products per kept block with neighbours;
              level 0: the scalings, 6 n^2 per kept block),
      back    back-substitution flops (batched matrix-vector products),
      bytes   the array bytes read and written once by each operation (8 bytes a double,
              including CuPy's transposed copies around getrf/getrs in batched_gesv; the LU
              itself counted as one read and one write of the block),
      launches the kernel launches (cupy.linalg.solve ~ 9, each slice update / elementwise ~ 1).
    Plus a last entry 'top' for column 0 (one solve of one block)."""
    n = NZ
    out = []
    for h, _, _, ne, nk in cr_levels(NX):
        nl, nr = nk - 1, ne  # kept blocks with a left / right eliminated neighbour
        k = n + 1 if h == 1 else 2 * n + 1
        getrf = ne * 2.0 / 3.0 * n**3
        getrs = ne * 2.0 * n**2 * k
        if h == 1:
            gemm = 6.0 * n**2 * (nl + nr)
            # B_e, rhs in; transposed copies (2 x), X out; kept B/A/C/r written, W read twice
            bytes_ = 8.0 * (ne * (n * n + n * k) * 3 + ne * n * k + nk * 3 * n * n + 2 * ne * n * n)
            launches = 9 + 1 + 12
        else:
            gemm = 2.0 * n**2 * (2 * n + 1) * (nl + nr)
            bytes_ = 8.0 * (ne * (n * n + n * k) * 3 + ne * n * k       # gesv with copies
                            + ne * 2 * n * n                            # concatenate reads A, C
                            + (nl + nr) * (n * n + 2 * n * k)           # GEMM: A/C, X in, P/Q out
                            + (nl + nr) * 2 * n * k                     # P, Q read by the updates
                            + nk * 3 * n * n * 2)                       # B copy, A, C zero + write
            launches = 9 + 1 + 2 + 12
        back = ne * 2.0 * n * n * (1 if h == 1 else 2)
        out.append(dict(h=h, n_elim=ne, n_kept=nk, getrf=getrf, getrs=getrs, gemm=gemm, back=back,
                        bytes=bytes_, launches=launches))
    out.append(dict(h="top", n_elim=1, n_kept=0, getrf=2.0 / 3.0 * n**3, getrs=2.0 * n**2, gemm=0.0,
                    back=0.0, bytes=8.0 * 4 * n * n, launches=12))
    return out
