"""numba fast paths of the WENO phases (backend "numba"): ``weno_x``, ``weno_w``, ``weno_phi`` take
exactly the arguments of the array functions of solver/bsp/weno.py and return the same result to
rounding (tests/test_bsp_kernels_numba_weno.py: ~1e-15 relative).

One fused WENO-5 kernel per direction, vectorised (SIMD) over the contiguous axis: ``prange`` over
x bundles (nu, p, block of ~512 contiguous (l, phi) values; the x faces swept upwards with the
previous face row kept) and over (i, nu, p) rows for w (SIMD over phi, faces swept in w) and phi
(SIMD over the faces of one l).  Each bundle is padded with its ghosts in a thread-local buffer and
the difference of the faces is written straight into the output: no temporaries of Phi's size.
The weights take one division per face (``_corr``) instead of four, with the multiply-adds fused
explicitly (``_fma``, no fastmath: the same bits compiled or loaded from numba's cache).  Boundary
rules as in weno.py: inflow ghosts a1 (rho_eq/rho) Phi at the contacts (or closed contacts:
constant extension and zero contact faces), partner-angle ghosts below w = 0, top w face 0, the
bottom face average (h(phi) - h(phi + pi))/2, periodic phi with the Lax-Friedrichs split.  Only
float64 is supported (inputs are converted).
"""
from __future__ import annotations

import numpy as np
from llvmlite import ir as llvm_ir
from numba import njit, prange, types, uint64
from numba.extending import intrinsic

from solver.bsp import weno as _weno
from solver.bsp.kernels import f64
from solver.bsp.kernels.numba._common import cached, out_array, set_threads

_D0, _D1, _D2 = _weno.D_WEIGHTS  # 0.1, 0.6, 0.3


def _masks(model):
    def build():
        in_l, in_r, left = _weno._phi_masks(model)
        u8 = lambda a: np.ascontiguousarray(a, dtype=np.uint8)  # noqa: E731
        return u8(in_l), u8(in_r), u8(left)
    return cached(model, "weno.masks", build)


# ---------------------------------------------------------------------------- WENO-5 face
# Every loop that evaluates faces runs over a contiguous axis (phi, or (l, phi) for x) with the
# bias a select, so that LLVM vectorises it (packed divisions).  No fastmath: the fused
# multiply-adds are written out (_fma = llvm.fma, one rounding), so the machine code computes the
# same bits however LLVM optimises the kernel.  With fastmath "contract" LLVM chose the fusions
# itself, and a kernel freshly compiled and the same kernel loaded from numba's cache fused
# differently (rk._stage_kernel: 1 ulp, docs/performance-numba-kernels.md section 10).
_FM = False


@intrinsic
def _fma(typingctx, a, b, c):
    """a * b + c rounded once (llvm.fma.f64; vectorised as vfmadd).  float64 only."""
    if not all(isinstance(t, types.Float) for t in (a, b, c)):
        return None
    sig = types.float64(types.float64, types.float64, types.float64)

    def codegen(context, builder, signature, args):
        f64t = llvm_ir.DoubleType()
        x, y, z = (context.cast(builder, v, t, types.float64) for v, t in zip(args, signature.args))
        fn = builder.module.declare_intrinsic("llvm.fma", [f64t], llvm_ir.FunctionType(f64t, [f64t] * 3))
        return builder.call(fn, [x, y, z])
    return sig, codegen


@njit(cache=True, fastmath=_FM, inline="always")
def _corr(a, b, c, d, eps):
    """F(a, b, c, d) of weno._correction with one division instead of four: with
    q_k = (IS_k + eps)^2 the weights w_k = (d_k / q_k) / sum_j (d_j / q_j) are u_k / S,
    u_k = d_k prod_{j != k} q_j, S = sum u_k (q_k >= eps^2, so the products of two q neither
    underflow nor, while |D| < 1e70, overflow)."""
    ab = a - b
    bc = b - c
    cd = c - d
    t = _fma(-3.0, b, a)
    q0 = _fma(13.0 * ab, ab, _fma(3.0 * t, t, eps))
    t = b + c
    q1 = _fma(13.0 * bc, bc, _fma(3.0 * t, t, eps))
    t = _fma(3.0, c, -d)
    q2 = _fma(13.0 * cd, cd, _fma(3.0 * t, t, eps))
    q0 *= q0
    q1 *= q1
    q2 *= q2
    u0 = _D0 * (q1 * q2)
    u2 = _D2 * (q0 * q1)
    s = _fma(_D1, q0 * q2, u0) + u2
    return _fma(u0 * (bc - ab), 1.0 / 3.0, (_fma(-0.5, s, u2) * (cd - bc)) * (1.0 / 6.0)) / s


@njit(cache=True, fastmath=_FM, inline="always")
def _face(g0, g1, g2, g3, g4, g5, left, eps):
    """h_{l-1/2} from the six padded values g_{l-3..l+2}: left-biased (a, b, c, d) = (D_{l-2},
    D_{l-1}, D_l, D_{l+1}) with sign +, else right-biased (D_{l+2}, D_{l+1}, D_l, D_{l-1}), sign -."""
    h = (_fma(7.0, g2 + g3, -g1) - g4) * (1.0 / 12.0)
    dm1 = g2 - g1
    dp1 = g4 - g3
    a = (g1 - g0) if left else (g5 - g4)
    b = dm1 if left else dp1
    d = dp1 if left else dm1
    c = _corr(a, b, g3 - g2, d, eps)
    return h + (c if left else -c)


# ---------------------------------------------------------------------------- x
_X_VALUES = 512  # values per x node of one x bundle: whole (l, phi) rows, ceil(_X_VALUES / NPHI) angles


@njit(parallel=True, cache=True, fastmath=_FM)
def _dx_kernel(Phi, a1, in_l, in_r, left, r0, rL, closed, eps, inv, V, out, hybrid, d0, dL, inj):
    """Phi, out (NX, 3, NS, NW * NP); a1, in_l, in_r, left (3, NW * NP).  Items (nu, p, block of
    V contiguous (l, phi) values); the x faces are swept upwards keeping the previous face row.
    The column index is unsigned (c0 + v: no negative-index wrap-around, so the loops vectorise).
    ``hybrid`` (numerics.contact_rule): inflow ghosts g r + d inj with r = min(rho_eq/rho, 1) (r0,
    rL), d = max(rho_eq - rho, 0) (d0, dL, (3, NS)) and inj = a1 s_w M (3, NW * NP), in the array
    code's order of operations."""
    NX, NV, NS, NWP = Phi.shape
    nblk = (NWP + V - 1) // V
    for k in prange(NV * NS * nblk):
        nu = k // (NS * nblk)
        p = (k // nblk) % NS
        c0 = uint64((k % nblk) * V)
        n = uint64(min(NWP - (k % nblk) * V, V))
        gp = np.empty((NX + 6, V))
        fp = np.empty(V)
        lf = np.empty(V, dtype=np.bool_)
        for i in range(NX):
            for v in range(n):
                gp[i + 3, v] = Phi[i, nu, p, c0 + v] * a1[nu, c0 + v]
        for v in range(n):
            lf[v] = left[nu, c0 + v] != 0
            g0 = gp[3, v]
            gL = gp[NX + 2, v]
            if not closed:
                if in_l[nu, c0 + v]:
                    g0 = g0 * r0[nu, p]
                    if hybrid:
                        g0 = g0 + d0[nu, p] * inj[nu, c0 + v]
                if in_r[nu, c0 + v]:
                    gL = gL * rL[nu, p]
                    if hybrid:
                        gL = gL + dL[nu, p] * inj[nu, c0 + v]
            for q in range(3):
                gp[q, v] = g0
                gp[NX + 3 + q, v] = gL
        for v in range(n):
            fp[v] = 0.0 if closed else _face(gp[0, v], gp[1, v], gp[2, v], gp[3, v], gp[4, v], gp[5, v],
                                             lf[v], eps)
        for j in range(1, NX):
            for v in range(n):
                fc = _face(gp[j, v], gp[j + 1, v], gp[j + 2, v], gp[j + 3, v], gp[j + 4, v], gp[j + 5, v],
                           lf[v], eps)
                out[j - 1, nu, p, c0 + v] = (fc - fp[v]) * inv
                fp[v] = fc
        for v in range(n):
            fc = 0.0 if closed else _face(gp[NX, v], gp[NX + 1, v], gp[NX + 2, v], gp[NX + 3, v],
                                          gp[NX + 4, v], gp[NX + 5, v], lf[v], eps)
            out[NX - 1, nu, p, c0 + v] = (fc - fp[v]) * inv


def weno_x(model, backend, Phi, rho_eq0, rho_eqL, rho0, rhoL, closed=False, eps=None):
    """weno.weno_x (same arguments, same result to rounding)."""
    set_threads(backend)
    eps = _weno._eps(model) if eps is None else float(eps)
    Phi = f64(np, Phi)
    NX, NV, NS, NW, NP = Phi.shape
    hybrid = not closed and _weno.contact_rule(model) == "hybrid"
    d0 = dL = np.zeros((NV, NS))
    if closed:
        r0 = rL = np.ones((NV, NS))
    else:
        r0 = f64(np, np.asarray(rho_eq0) / np.asarray(rho0))
        rL = f64(np, np.asarray(rho_eqL) / np.asarray(rhoL))
        if hybrid:  # as weno.weno_x forms them
            d0 = f64(np, np.maximum(np.asarray(rho_eq0) - np.asarray(rho0), 0.0))
            dL = f64(np, np.maximum(np.asarray(rho_eqL) - np.asarray(rhoL), 0.0))
            r0, rL = np.minimum(r0, 1.0), np.minimum(rL, 1.0)
    in_l, in_r, left = (a.reshape(NV, NW * NP) for a in _masks(model))
    a1 = f64(np, model.a1)
    inj = f64(np, a1 * (model.s_w * model.maxwellian)[:, :, None]) if hybrid else a1  # a1 s_w M
    out = out_array(model, "WENO_x", Phi.shape)
    V = min(NW, -(-_X_VALUES // NP)) * NP
    _dx_kernel(Phi.reshape(NX, NV, NS, NW * NP), a1.reshape(NV, NW * NP), in_l, in_r, left,
               r0, rL, bool(closed), eps, 1.0 / model.dx, V, out.reshape(NX, NV, NS, NW * NP),
               hybrid, d0, dL, inj.reshape(NV, NW * NP))
    return out


# ---------------------------------------------------------------------------- w
@njit(cache=True, fastmath=_FM, inline="always")
def w_row(P, a1n, md, eps, inv, gp, h0, f, out):
    """The w term of one (i, nu, p) row: P (NW, NP) the row of Phi, a1n (NW, NP) = a1[nu], md =
    -deps_dx[i, nu, p]; gp (NW + 6, NP), h0 and f (NP) work arrays; out (NW, NP).  Faces swept in w
    (SIMD over phi) with the previous face row kept."""
    NW, NP = P.shape
    half = NP // 2
    for l in range(NW):
        for m in range(NP):
            gp[l + 3, m] = (a1n[l, m] * md) * P[l, m]
    for m in range(NP):
        mp = (m + half) % NP
        for q in range(3):  # g_{-q-1}(phi) = a2(w_q, phi) Phi(w_q, phi + pi): padded 2 - q
            gp[2 - q, m] = (a1n[q, m] * md) * P[q, mp]
            gp[NW + 3 + q, m] = gp[NW + 2, m]
    for m in range(NP):
        h0[m] = _face(gp[0, m], gp[1, m], gp[2, m], gp[3, m], gp[4, m], gp[5, m], (a1n[0, m] * md) > 0.0, eps)
    for m in range(NP):  # bottom face (h(phi) - h(phi + pi)) / 2
        f[m] = 0.5 * (h0[m] - h0[(m + half) % NP])
    for j in range(1, NW):
        for m in range(NP):
            fc = _face(gp[j, m], gp[j + 1, m], gp[j + 2, m], gp[j + 3, m], gp[j + 4, m], gp[j + 5, m],
                       (a1n[0, m] * md) > 0.0, eps)
            out[j - 1, m] = (fc - f[m]) * inv
            f[m] = fc
    for m in range(NP):  # top face 0
        out[NW - 1, m] = -f[m] * inv


@njit(parallel=True, cache=True, fastmath=_FM)
def _dw_kernel(Phi, a1, deps, eps, inv, out):
    NX, NV, NS, NW, NP = Phi.shape
    for k in prange(NX * NV * NS):
        i = k // (NV * NS)
        nu = (k // NS) % NV
        p = k % NS
        w_row(Phi[i, nu, p], a1[nu], -deps[i, nu, p], eps, inv, np.empty((NW + 6, NP)), np.empty(NP), np.empty(NP),
              out[i, nu, p])


def weno_w(model, backend, Phi, deps_dx, eps=None):
    """weno.weno_w (same arguments, same result to rounding)."""
    set_threads(backend)
    eps = _weno._eps(model) if eps is None else float(eps)
    Phi = f64(np, Phi)
    out = out_array(model, "WENO_w", Phi.shape)
    _dw_kernel(Phi, f64(np, model.a1), f64(np, deps_dx), eps, 1.0 / model.dw, out)
    return out


# ---------------------------------------------------------------------------- phi
@njit(cache=True, fastmath=_FM, inline="always")
def phi_row(P, a3n, d, alpha, eps, inv, gpp, gpm, f, out):
    """The phi term of one (i, nu, p) row: P (NW, NP), a3n (NW, NP) = a3_factor[nu], d =
    deps_dx[i, nu, p]; gpp, gpm (NP + 6), f (NP + 1) work arrays; out (NW, NP).  SIMD over the faces."""
    NW, NP = P.shape
    for l in range(NW):
        for m in range(NP):
            a3 = a3n[l, m] * d
            v = P[l, m]
            gpp[m + 3] = ((a3 + alpha) * v) * 0.5
            gpm[m + 3] = ((a3 - alpha) * v) * 0.5
        for q in range(3):  # periodic ghosts
            gpp[q] = gpp[NP + q]
            gpm[q] = gpm[NP + q]
            gpp[NP + 3 + q] = gpp[3 + q]
            gpm[NP + 3 + q] = gpm[3 + q]
        for j in range(NP):  # Lax-Friedrichs split: g+ left-biased, g- right-biased
            f[j] = (_face(gpp[j], gpp[j + 1], gpp[j + 2], gpp[j + 3], gpp[j + 4], gpp[j + 5], True, eps)
                    + _face(gpm[j], gpm[j + 1], gpm[j + 2], gpm[j + 3], gpm[j + 4], gpm[j + 5], False, eps))
        f[NP] = f[0]  # periodic: face NP has the stencil of face 0
        for m in range(NP):
            out[l, m] = (f[m + 1] - f[m]) * inv


@njit(parallel=True, cache=True, fastmath=_FM)
def _dphi_kernel(Phi, a3f, deps, alpha, eps, inv, out):
    NX, NV, NS, NW, NP = Phi.shape
    for k in prange(NX * NV * NS):
        i = k // (NV * NS)
        nu = (k // NS) % NV
        p = k % NS
        phi_row(Phi[i, nu, p], a3f[nu], deps[i, nu, p], alpha, eps, inv, np.empty(NP + 6), np.empty(NP + 6), np.empty(NP + 1),
                out[i, nu, p])


def weno_phi(model, backend, Phi, deps_dx, A_eps, eps=None):
    """weno.weno_phi (same arguments, same result to rounding)."""
    set_threads(backend)
    eps = _weno._eps(model) if eps is None else float(eps)
    Phi = f64(np, Phi)
    alpha = float(A_eps * model.A3)
    out = out_array(model, "WENO_phi", Phi.shape)
    _dphi_kernel(Phi, f64(np, model.a3_factor), f64(np, deps_dx), alpha, eps, 1.0 / model.dphi, out)
    return out
