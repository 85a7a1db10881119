"""Semi-infinite leads: Sancho-Rubio decimation on n x n blocks.

A lead is the periodic repetition of the wire's 4 layers.  Seen from its surface, the lead is a
sequence of layers s0, s1, s2, s3, s0, s1, ... (the right lead: 0,1,2,3; the left lead: 3,2,1,0).
The interior layers s1..s3 of every period are eliminated first (exactly, at the energy E), which
leaves a chain of s0 planes with energy-dependent n x n blocks; decimation then runs on that chain.
The surface plane has the eliminated group on one side only, which the decimation keeps apart
(the "surface" block of Lopez Sancho et al., J. Phys. F 15, 851 (1985)).
All arrays are complex ``xp`` arrays (NumPy or CuPy), either single n x n blocks or stacks
(nE, n, n) over energies (E then has shape (nE, 1, 1); the energy-independent couplings stay n x n
and broadcast).  Stacks are inverted with ``inv`` below (cuSOLVER per matrix above 256 on CuPy).
"""
from __future__ import annotations

import numpy as np


def _H(a):
    return a.conj().swapaxes(-1, -2)


def inv(xp, a):
    """Inverse of one block or of a stack of blocks.  ``cupy.linalg.inv`` on a stack uses cuBLAS
    getrf/getriBatched, very slow above n ~ 256; here a CuPy stack goes through
    ``cupy.linalg.solve`` against the identity (cuBLAS getrf/getrsBatched) up to n = 256 and
    through one cuSOLVER gesv per matrix above (docs/performance-rgf.md measures the three)."""
    if a.ndim == 2 or xp is np:
        return xp.linalg.inv(a)
    n = a.shape[-1]
    if n > BATCHED_SOLVE_MAX:
        return xp.stack([xp.linalg.inv(a[k]) for k in range(a.shape[0])])
    return xp.linalg.solve(a, xp.ascontiguousarray(xp.broadcast_to(xp.eye(n, dtype=a.dtype), a.shape)))


BATCHED_SOLVE_MAX = 256


def eliminate_group(xp, E, Dg, Tg):
    """Blocks (ff, ll, fl, lf) of (E - H_group)^-1 for a chain of layers Dg with couplings Tg
    (Tg[k] = H(layer k, layer k+1)), by a forward and a backward sweep (no dense inverse)."""
    n = Dg[0].shape[0]
    I = xp.eye(n, dtype=complex)
    p = len(Dg)
    if p == 1:
        g = inv(xp, E * I - Dg[0])
        return g, g, g, g
    # left-connected sweep gives g_ll and the products needed for g_fl / g_lf
    gl = inv(xp, E * I - Dg[0])
    fl = gl  # G^{(k)}_{0,k}: corner of the first k+1 layers
    lf = gl
    ff = gl
    for k in range(1, p):
        gk = inv(xp, E * I - Dg[k] - _H(Tg[k - 1]) @ gl @ Tg[k - 1])
        # Dyson: G_{0,k} = G^{(k-1)}_{0,k-1} T_{k-1} g_k ; G_{k,0} = g_k T^H_{k-1} G^{(k-1)}_{k-1,0}
        # G_{0,0} = G^{(k-1)}_{00} + G^{(k-1)}_{0,k-1} T g_k T^H G^{(k-1)}_{k-1,0}
        fl_new = fl @ Tg[k - 1] @ gk
        lf_new = gk @ _H(Tg[k - 1]) @ lf
        ff = ff + fl_new @ _H(Tg[k - 1]) @ lf
        fl, lf, gl = fl_new, lf_new, gk
    return ff, gl, fl, lf


def sancho_rubio(xp, ws, w, a, b, tol=1e-12, max_iter=200):
    """Surface Green's function inv(ws') of a semi-infinite chain given in the form E - h:
    ws (surface), w (bulk), a = coupling surface -> next plane, b = next plane -> surface."""
    for it in range(max_iter):
        g = inv(xp, w)
        ag = a @ g
        bg = b @ g
        agb = ag @ b
        ws = ws - agb
        w = w - agb - bg @ a
        a = ag @ a
        b = bg @ b
        if float(xp.abs(a).max()) + float(xp.abs(b).max()) < tol:
            break
    return inv(xp, ws), it + 1


def lead_surface_gf(xp, E, Dseq, Tseq, tol=1e-12):
    """Surface Green's function (at layer Dseq[0]) of the semi-infinite lead Dseq[0], Dseq[1], ...
    repeated periodically, Tseq[k] = H(seq k, seq k+1), Tseq[-1] joins the period to the next."""
    n = Dseq[0].shape[0]
    I = xp.eye(n, dtype=complex)
    p = len(Dseq)
    W0 = E * I - Dseq[0]
    if p == 1:
        return sancho_rubio(xp, W0, W0, Tseq[0], _H(Tseq[0]), tol)[0]
    ff, ll, fl, lf = eliminate_group(xp, E, Dseq[1:], Tseq[1:-1])
    V0, V3 = Tseq[0], Tseq[-1]
    ws = W0 - V0 @ ff @ _H(V0)
    w = ws - _H(V3) @ ll @ V3
    a = V0 @ fl @ V3
    b = _H(V3) @ lf @ _H(V0)
    return sancho_rubio(xp, ws, w, a, b, tol)[0]


def self_energies(xp, E, D, C, tol=1e-12):
    """(Sigma_L on a type-0 first layer, Sigma_R on a type-3 last layer) for layer blocks D[0..3]
    and couplings C[t] = H(t, t+1) (xp complex arrays)."""
    gR = lead_surface_gf(xp, E, [D[0], D[1], D[2], D[3]], [C[0], C[1], C[2], C[3]], tol)
    gL = lead_surface_gf(xp, E, [D[3], D[2], D[1], D[0]], [_H(C[2]), _H(C[1]), _H(C[0]), _H(C[3])], tol)
    sigR = C[3] @ gR @ _H(C[3])
    sigL = _H(C[3]) @ gL @ C[3]
    return sigL, sigR


def self_energies_cell(E, H00, H01, tol=1e-12):
    """Reference: Sancho-Rubio on the whole 4-layer cell (4n x 4n), NumPy.  Returns the cell-sized
    (Sigma_L, Sigma_R) acting on the first / last cell of a device made of whole cells."""
    I = np.eye(H00.shape[0])
    W = E * I - H00
    gR = sancho_rubio(np, W, W, H01, H01.conj().T, tol)[0]
    gL = sancho_rubio(np, W, W, H01.conj().T, H01, tol)[0]
    return H01.conj().T @ gL @ H01, H01 @ gR @ H01.conj().T
