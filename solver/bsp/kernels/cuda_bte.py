"""CUDA fast paths of the BTE phase (cupy backend): scattering gain and loss coefficient, WENO-5
x, w and phi terms.  Gathered by ``kernels/cuda.py``; each function takes exactly the arguments of
the array function it replaces (scattering.gain / loss_coefficient, weno.dx_term / dw_term /
dphi_term) and returns the same result to rounding.

Design (counts and measurements: docs/performance-bte-kernels.md):

* ``gain`` / ``loss_coefficient``: ONE launch per call, one thread per output (i, nu, p, l).  The
  thread loops over the branches of its valley nu (mechanism, nu', sigma, weight; the host table of
  ``scattering.branches`` copied once per model and mechanism subset as small device arrays) and
  over p', with the interpolation rule of ``scattering.interpolate`` (trunc toward zero, validity
  r >= -1/2 and (l_d <= NW-2 or r == NW-1 exactly), clip, linear in t) and the Heaviside /
  (1 + 2 alpha Gamma) factor of the loss.  Per branch the p' sum is formed first and then added to
  the valley total, as the array code does (einsum per branch, then +=).
* ``dx_term`` / ``dw_term`` / ``dphi_term``: one launch per call, one thread per line segment along
  the differentiated direction.  The thread keeps the six flux products g of the stencil in
  registers (a sliding window), forms each face once (weno5_faces' arithmetic in its order) and
  writes (h_{k+1/2} - h_{k-1/2}) / h.  Ghost and boundary rules are those of weno.py: x inflow
  ghosts scaled by rho_eq/rho (closed: constant extension and zero contact faces), w partner-angle
  ghosts below w = 0, constant extension above, top face 0, bottom face (h(phi) - h(phi+pi))/2
  (the thread of a segment that starts at l = 0 forms the partner line's bottom face itself),
  periodic phi with the Lax-Friedrichs pair g+ (left-biased) + g- (right-biased).  Long lines
  (x, w) are cut into segments so that about 2^18 threads run; a segment boundary face is formed
  by both neighbours (redundancy 1/segment length).

The kernels are compiled with ``--fmad=false`` (no contraction of a*b + c into an FMA), so each
operation rounds as in the array code: the WENO terms agree bit for bit with the NumPy array
path on the CPU emulation of the kernel source (tests/test_bsp_kernels_cuda.py), the scattering
terms to the summation order of einsum.  Only float64 is computed; other dtypes are converted
and the result cast back.
"""
from __future__ import annotations

import math

import numpy as np

import cupy as cp  # ImportError without CuPy: kernels/cuda.py then leaves the BTE on the array code

from solver.bsp import scattering as _scat
from solver.bsp import weno as _weno

__all__ = ["gain", "loss_coefficient", "dx_term", "dw_term", "dphi_term"]

N_VALLEYS = 3
BLOCK = 128
TARGET_THREADS = 1 << 18  # segments per WENO launch: enough threads to fill an H100/H200
MIN_SEGMENT = 8  # nodes per segment at least (the boundary face is formed twice)
OPTIONS = ("--fmad=false",)

# The kernel source is plain C++ apart from the CUDA qualifiers and blockIdx/threadIdx, so that
# tests/test_bsp_kernels_cuda.py can also compile it with the host compiler (a CPU emulation).
CUDA_SOURCE = r"""
extern "C" {

/* F(a, b, c, d) of weno._correction, in its order of operations. */
__device__ __forceinline__ double weno_corr(double a, double b, double c, double d, double eps)
{
    double ab = a - b;
    double bc = b - c;
    double cd = c - d;
    double t = a - 3.0 * b;
    double is0 = 13.0 * ab * ab + 3.0 * t * t;
    t = b + c;
    double is1 = 13.0 * bc * bc + 3.0 * t * t;
    t = 3.0 * c - d;
    double is2 = 13.0 * cd * cd + 3.0 * t * t;
    is0 += eps;
    is1 += eps;
    is2 += eps;
    double a0 = 0.1 / (is0 * is0);
    double a1 = 0.6 / (is1 * is1);
    double a2 = 0.3 / (is2 * is2);
    double s = a0 + a1 + a2;
    double out = a0 * (bc - ab) * (1.0 / 3.0);
    a2 -= 0.5 * s;
    out += a2 * (cd - bc) * (1.0 / 6.0);
    out /= s;
    return out;
}

/* Face h_{j-1/2} from the padded values g_{j-3} .. g_{j+2} (weno5_faces). */
__device__ __forceinline__ double weno_face(double g0, double g1, double g2, double g3, double g4,
                                            double g5, int left, double eps)
{
    double Dm2 = g1 - g0, Dm1 = g2 - g1, D0 = g3 - g2, Dp1 = g4 - g3, Dp2 = g5 - g4;
    double h = g2 + g3;
    h *= 7.0;
    h -= g1;
    h -= g4;
    h *= (1.0 / 12.0);
    /* select the stencil, then one correction (no divergence between left- and right-biased
       lines of a warp); h + (-F) == h - F exactly, as weno5_faces' mask form */
    double a = left ? Dm2 : Dp2;
    double b = left ? Dm1 : Dp1;
    double d = left ? Dp1 : Dm1;
    double corr = weno_corr(a, b, D0, d, eps);
    h += left ? corr : -corr;
    return h;
}

/* ------------------------------------------------------------------ x
   thread = (segment, line (nu, p, l, m)); g_k = a1 Phi_k, ghosts g_0 f_left, g_{NX-1} f_right
   flags (3, NW, NPHI): 1 inflow left, 2 inflow right, 4 left-biased. */
__device__ __forceinline__ double gx_val(const double* P, long long sX, int k, int NX, double a,
                                         double gl, double gr)
{
    if (k < 0) return gl;
    if (k > NX - 1) return gr;
    return P[k * sX] * a;
}

__global__ void bsp_weno_dx(const double* Phi, const double* a1, const unsigned char* flags,
                            const double* rho_eq0, const double* rho_eqL, const double* rho0,
                            const double* rhoL, double* out, int NX, int NS, int NW, int NPHI,
                            int closed, int seg, int nseg, double eps, double inv)
{
    long long nline = 3LL * NS * NW * NPHI;
    long long tid = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (tid >= nline * nseg) return;
    long long line = tid % nline;
    int s = (int)(tid / nline);
    int m = (int)(line % NPHI);
    long long r = line / NPHI;
    int l = (int)(r % NW);
    r /= NW;
    int p = (int)(r % NS);
    int nu = (int)(r / NS);
    int ai = (nu * NW + l) * NPHI + m;
    double a = a1[ai];
    int fl = flags[ai];
    int left = (fl & 4) != 0;
    const double* P = Phi + line;
    long long sX = nline;
    double gl = P[0] * a, gr = P[(long long)(NX - 1) * sX] * a;
    if (!closed) {
        if (fl & 1) gl = gl * (rho_eq0[nu * NS + p] / rho0[nu * NS + p]);
        if (fl & 2) gr = gr * (rho_eqL[nu * NS + p] / rhoL[nu * NS + p]);
    }
    int i0 = s * seg;
    int i1 = i0 + seg < NX ? i0 + seg : NX;
    double g0 = gx_val(P, sX, i0 - 3, NX, a, gl, gr), g1 = gx_val(P, sX, i0 - 2, NX, a, gl, gr),
           g2 = gx_val(P, sX, i0 - 1, NX, a, gl, gr), g3 = gx_val(P, sX, i0, NX, a, gl, gr),
           g4 = gx_val(P, sX, i0 + 1, NX, a, gl, gr), g5 = gx_val(P, sX, i0 + 2, NX, a, gl, gr);
    double fp = weno_face(g0, g1, g2, g3, g4, g5, left, eps);
    if (closed && i0 == 0) fp = 0.0;
    for (int i = i0; i < i1; ++i) {
        g0 = g1; g1 = g2; g2 = g3; g3 = g4; g4 = g5;
        g5 = gx_val(P, sX, i + 3, NX, a, gl, gr);
        double fn = weno_face(g0, g1, g2, g3, g4, g5, left, eps);
        if (closed && i + 1 == NX) fn = 0.0;
        out[line + i * sX] = (fn - fp) * inv;
        fp = fn;
    }
}

/* ------------------------------------------------------------------ w
   thread = (segment, line (i, nu, p, m)); a2 = a1 (-deps_dx); ghost g_{-k}(m) = a2(k-1, m)
   Phi(k-1, m + NPHI/2); constant extension above; top face 0; bottom face (h(m) - h(m'))/2. */
__device__ __forceinline__ double gw_val(const double* Pl, const double* a1n, double md, int k,
                                         int m, int mp, int NW, int NPHI)
{
    if (k < 0) {
        int j = -k - 1;
        return (a1n[j * NPHI + m] * md) * Pl[j * NPHI + mp];
    }
    if (k > NW - 1) k = NW - 1;
    return (a1n[k * NPHI + m] * md) * Pl[k * NPHI + m];
}

__global__ void bsp_weno_dw(const double* Phi, const double* a1, const double* deps, double* out,
                            int NX, int NS, int NW, int NPHI, int seg, int nseg, double eps,
                            double inv)
{
    long long nline = (long long)NX * 3 * NS * NPHI;
    long long tid = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (tid >= nline * nseg) return;
    long long line = tid % nline;
    int s = (int)(tid / nline);
    int m = (int)(line % NPHI);
    long long ipv = line / NPHI;
    int nu = (int)((ipv / NS) % 3);
    const double* Pl = Phi + ipv * NW * NPHI;
    const double* a1n = a1 + (long long)nu * NW * NPHI;
    double md = -deps[ipv];
    int half = NPHI / 2;
    int mp = (m + half) % NPHI;
    int left = (a1n[m] * md) > 0.0;
    int l0 = s * seg;
    int l1 = l0 + seg < NW ? l0 + seg : NW;
    double g0 = gw_val(Pl, a1n, md, l0 - 3, m, mp, NW, NPHI),
           g1 = gw_val(Pl, a1n, md, l0 - 2, m, mp, NW, NPHI),
           g2 = gw_val(Pl, a1n, md, l0 - 1, m, mp, NW, NPHI),
           g3 = gw_val(Pl, a1n, md, l0, m, mp, NW, NPHI),
           g4 = gw_val(Pl, a1n, md, l0 + 1, m, mp, NW, NPHI),
           g5 = gw_val(Pl, a1n, md, l0 + 2, m, mp, NW, NPHI);
    double fp = weno_face(g0, g1, g2, g3, g4, g5, left, eps);
    if (l0 == 0) {
        /* the partner line's own bottom face (its ghosts take Phi at mp + half) */
        int mpp = (mp + half) % NPHI;
        int leftp = (a1n[mp] * md) > 0.0;
        double hp = weno_face(gw_val(Pl, a1n, md, -3, mp, mpp, NW, NPHI),
                              gw_val(Pl, a1n, md, -2, mp, mpp, NW, NPHI),
                              gw_val(Pl, a1n, md, -1, mp, mpp, NW, NPHI),
                              gw_val(Pl, a1n, md, 0, mp, mpp, NW, NPHI),
                              gw_val(Pl, a1n, md, 1, mp, mpp, NW, NPHI),
                              gw_val(Pl, a1n, md, 2, mp, mpp, NW, NPHI), leftp, eps);
        fp = 0.5 * (fp - hp);
    }
    double* o = out + ipv * NW * NPHI + m;
    for (int l = l0; l < l1; ++l) {
        g0 = g1; g1 = g2; g2 = g3; g3 = g4; g4 = g5;
        g5 = gw_val(Pl, a1n, md, l + 3, m, mp, NW, NPHI);
        double fn = weno_face(g0, g1, g2, g3, g4, g5, left, eps);
        if (l + 1 == NW) fn = 0.0;
        o[(long long)l * NPHI] = (fn - fp) * inv;
        fp = fn;
    }
}

/* ------------------------------------------------------------------ phi
   thread = line (i, nu, p, l); periodic; g+- = ((a3 +- alpha) Phi) 0.5, a3 = a3_factor deps_dx;
   face = h+(left) + h-(right). */
__global__ void bsp_weno_dphi(const double* Phi, const double* a3f, const double* deps,
                              double* out, int NX, int NS, int NW, int NPHI, double alpha,
                              double eps, double inv)
{
    long long nline = (long long)NX * 3 * NS * NW;
    long long line = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (line >= nline) return;
    int l = (int)(line % NW);
    long long ipv = line / NW;
    int nu = (int)((ipv / NS) % 3);
    const double* P = Phi + line * NPHI;
    const double* a3 = a3f + ((long long)nu * NW + l) * NPHI;
    double d = deps[ipv];
    double p0, p1, p2, p3, p4, p5, q0, q1, q2, q3, q4, q5;
#define BSP_GPM(k, gp, gm)                                  \
    {                                                       \
        int mm_ = (k) % NPHI;                               \
        if (mm_ < 0) mm_ += NPHI;                           \
        double a_ = a3[mm_] * d;                            \
        double x_ = P[mm_];                                 \
        gp = ((a_ + alpha) * x_) * 0.5;                     \
        gm = ((a_ - alpha) * x_) * 0.5;                     \
    }
    BSP_GPM(-3, p0, q0)
    BSP_GPM(-2, p1, q1)
    BSP_GPM(-1, p2, q2)
    BSP_GPM(0, p3, q3)
    BSP_GPM(1, p4, q4)
    BSP_GPM(2, p5, q5)
    double fp = weno_face(p0, p1, p2, p3, p4, p5, 1, eps);
    fp += weno_face(q0, q1, q2, q3, q4, q5, 0, eps);
    double* o = out + line * NPHI;
    for (int m = 0; m < NPHI; ++m) {
        p0 = p1; p1 = p2; p2 = p3; p3 = p4; p4 = p5;
        q0 = q1; q1 = q2; q2 = q3; q3 = q4; q4 = q5;
        BSP_GPM(m + 3, p5, q5)
        double fn = weno_face(p0, p1, p2, p3, p4, p5, 1, eps);
        fn += weno_face(q0, q1, q2, q3, q4, q5, 0, eps);
        o[m] = (fn - fp) * inv;
        fp = fn;
    }
#undef BSP_GPM
}

/* ------------------------------------------------------------------ scattering
   thread = (i, nu, p, l); branches of valley nu: boff[nu] .. boff[nu+1]-1 with (nu', sigma, weight). */
__global__ void bsp_scat_gain(const double* PH, const double* eps, const double* W,
                              const double* s_w, const int* boff, const int* bnu2,
                              const double* bsig, const double* bw, double* G, int NX, int NS,
                              int NW, double inv_dw)
{
    long long n = (long long)NX * 3 * NS * NW;
    long long tid = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (tid >= n) return;
    int l = (int)(tid % NW);
    long long r = tid / NW;
    int p = (int)(r % NS);
    r /= NS;
    int nu = (int)(r % 3);
    long long i = r / 3;
    double ep = eps[(i * 3 + nu) * NS + p];
    double lf = (double)l;
    double top = (double)(NW - 1), lmax = (double)(NW - 2);
    const double* Wp = W + ((i * 3 + nu) * NS + p) * 3 * NS;  /* W[i, nu, p, :, :] */
    double acc = 0.0;
    for (int b = boff[nu]; b < boff[nu + 1]; ++b) {
        int nu2 = bnu2[b];
        double sig = bsig[b], gw = bw[b];
        double sb = 0.0;
        for (int q = 0; q < NS; ++q) {
            double delta = (ep - eps[(i * 3 + nu2) * NS + q]) + sig;
            double rr = delta * inv_dw + lf;
            double ld = trunc(rr);
            if (!(rr >= -0.5 && (ld <= lmax || rr == top))) continue;
            double ldc = ld < 0.0 ? 0.0 : (ld > lmax ? lmax : ld);
            double t = rr - ldc;
            const double* ph = PH + ((i * 3 + nu2) * NS + q) * NW + (int)ldc;
            double f0 = ph[0];
            double f1 = ph[1];
            f1 -= f0;
            f1 *= t;
            f1 += f0;
            sb += (gw * Wp[nu2 * NS + q]) * f1;
        }
        acc += sb;
    }
    G[tid] = acc * s_w[nu * NW + l];
}

__global__ void bsp_scat_loss(const double* eps, const double* W, const double* w,
                              const int* boff, const int* bnu2, const double* bsig,
                              const double* bw, double* Lc, int NX, int NS, int NW, double c2a)
{
    long long n = (long long)NX * 3 * NS * NW;
    long long tid = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (tid >= n) return;
    int l = (int)(tid % NW);
    long long r = tid / NW;
    int p = (int)(r % NS);
    r /= NS;
    int nu = (int)(r % 3);
    long long i = r / 3;
    double ep = eps[(i * 3 + nu) * NS + p];
    double wl = w[l];
    const double* Wp = W + ((i * 3 + nu) * NS + p) * 3 * NS;
    double acc = 0.0;
    for (int b = boff[nu]; b < boff[nu + 1]; ++b) {
        int nu2 = bnu2[b];
        double sig = bsig[b], cb = bw[b];
        double sb = 0.0;
        for (int q = 0; q < NS; ++q) {
            double g = ((ep - eps[(i * 3 + nu2) * NS + q]) + sig) + wl;
            if (g >= 0.0) sb += (cb * Wp[nu2 * NS + q]) * (1.0 + c2a * g);
        }
        acc += sb;
    }
    Lc[tid] = acc;
}

}  /* extern "C" */
"""

_module = None


def _function(name):
    global _module
    if _module is None:
        _module = cp.RawModule(code=CUDA_SOURCE, options=OPTIONS)
    return _module.get_function(name)


def _launch(name, nthreads, args):
    if nthreads <= 0:
        return
    grid = (int(nthreads) + BLOCK - 1) // BLOCK
    _function(name)((grid,), (BLOCK,), args)


def _f64(a):
    return cp.ascontiguousarray(cp.asarray(a), dtype=cp.float64)


def _segments(nline, n):
    """(segment length, number of segments) for lines of n nodes: about TARGET_THREADS threads."""
    nseg = max(1, min(-(-TARGET_THREADS // max(nline, 1)), -(-n // MIN_SEGMENT)))
    seg = -(-n // nseg)
    return seg, -(-n // seg)


def _i(v):
    return np.int32(v)


def _d(v):
    return np.float64(v)


# ---------------------------------------------------------------------------- scattering
def _branch_table(model, backend, mechanisms, which):
    """Device arrays (offsets (4,) int32, nu' int32, sigma, weight) of scattering.branches;
    weight = gain weight (``gain``) or 2 pi * loss weight * sqrt(m_x m_y)_nu' (``loss``)."""
    mkey = None if mechanisms is None else tuple(sorted(set(int(m) for m in mechanisms)))
    key = (backend.name, "cuda_bte:branches:" + which, mkey)
    cache = model._device_cache
    if key not in cache:
        brs = _scat.branches(model, mechanisms)
        smm = model.sqrt_mxmy
        off, nu2s, sig, wt = [0], [], [], []
        for nu in range(N_VALLEYS):
            for _mu, nu2, sigma, lw, gw in brs[nu]:
                nu2s.append(nu2)
                sig.append(sigma)
                wt.append(gw if which == "gain" else (2.0 * math.pi * lw * smm[nu2]))
            off.append(len(nu2s))
        pad = max(len(nu2s), 1)
        cache[key] = (cp.asarray(np.array(off, dtype=np.int32)),
                      cp.asarray(np.array(nu2s + [0] * (pad - len(nu2s)), dtype=np.int32)),
                      cp.asarray(np.array(sig + [0.0] * (pad - len(sig)), dtype=np.float64)),
                      cp.asarray(np.array(wt + [0.0] * (pad - len(wt)), dtype=np.float64)))
    return cache[key]


def gain(model, backend, PhiHat, eps, W, mechanisms=None):
    """scattering.gain: G (NX, 3, N_sbn, NW), one launch."""
    PH, e, Wc = _f64(PhiHat), _f64(eps), _f64(W)
    NX, NV, NS = e.shape
    NW = model.NW
    off, nu2, sig, wt = _branch_table(model, backend, mechanisms, "gain")
    s_w = _f64(model.on(backend, "s_w"))
    G = cp.empty((NX, NV, NS, NW), dtype=cp.float64)
    _launch("bsp_scat_gain", G.size, (PH, e, Wc, s_w, off, nu2, sig, wt, G,
                                      _i(NX), _i(NS), _i(NW), _d(1.0 / model.dw)))
    return G.astype(PhiHat.dtype, copy=False)


def loss_coefficient(model, backend, eps, W, mechanisms=None):
    """scattering.loss_coefficient: Lc (NX, 3, N_sbn, NW), one launch."""
    e, Wc = _f64(eps), _f64(W)
    NX, NV, NS = e.shape
    NW = model.NW
    off, nu2, sig, wt = _branch_table(model, backend, mechanisms, "loss")
    w = _f64(model.on(backend, "w"))
    Lc = cp.empty((NX, NV, NS, NW), dtype=cp.float64)
    _launch("bsp_scat_loss", Lc.size, (e, Wc, w, off, nu2, sig, wt, Lc,
                                       _i(NX), _i(NS), _i(NW), _d(2.0 * model.alpha)))
    return Lc.astype(eps.dtype, copy=False)


# ---------------------------------------------------------------------------- WENO
def _x_flags(model, backend):
    key = (backend.name, "cuda_bte:x_flags")
    cache = model._device_cache
    if key not in cache:
        in_l, in_r, left = _weno._phi_masks(model)
        f = (np.asarray(in_l, dtype=np.uint8) + 2 * np.asarray(in_r, dtype=np.uint8)
             + 4 * np.asarray(left, dtype=np.uint8))
        cache[key] = cp.asarray(np.ascontiguousarray(f, dtype=np.uint8))
    return cache[key]


def dx_term(model, backend, Phi, rho_eq0, rho_eqL, rho0, rhoL, closed=False, eps=None):
    """weno.dx_term: d(a1 Phi)/dx, one launch."""
    eps = _weno._eps(model) if eps is None else eps
    P = _f64(Phi)
    NX, NV, NS, NW, NPHI = P.shape
    a1 = _f64(model.on(backend, "a1"))
    flags = _x_flags(model, backend)
    if closed:
        dummy = cp.zeros(1, dtype=cp.float64)
        r = (dummy, dummy, dummy, dummy)
    else:
        r = tuple(_f64(v) for v in (rho_eq0, rho_eqL, rho0, rhoL))
    out = cp.empty_like(P)
    nline = NV * NS * NW * NPHI
    seg, nseg = _segments(nline, NX)
    _launch("bsp_weno_dx", nline * nseg, (P, a1, flags) + r + (
        out, _i(NX), _i(NS), _i(NW), _i(NPHI), _i(1 if closed else 0), _i(seg), _i(nseg),
        _d(eps), _d(1.0 / model.dx)))
    return out.astype(Phi.dtype, copy=False)


def dw_term(model, backend, Phi, deps_dx, eps=None):
    """weno.dw_term: d(a2 Phi)/dw, one launch."""
    eps = _weno._eps(model) if eps is None else eps
    P = _f64(Phi)
    NX, NV, NS, NW, NPHI = P.shape
    a1 = _f64(model.on(backend, "a1"))
    d = _f64(deps_dx)
    out = cp.empty_like(P)
    nline = NX * NV * NS * NPHI
    seg, nseg = _segments(nline, NW)
    _launch("bsp_weno_dw", nline * nseg, (P, a1, d, out, _i(NX), _i(NS), _i(NW), _i(NPHI),
                                          _i(seg), _i(nseg), _d(eps), _d(1.0 / model.dw)))
    return out.astype(Phi.dtype, copy=False)


def dphi_term(model, backend, Phi, deps_dx, A_eps, eps=None):
    """weno.dphi_term: d(a3 Phi)/dphi with the Lax-Friedrichs split, one launch."""
    eps = _weno._eps(model) if eps is None else eps
    P = _f64(Phi)
    NX, NV, NS, NW, NPHI = P.shape
    a3f = _f64(model.on(backend, "a3_factor"))
    d = _f64(deps_dx)
    alpha = float(A_eps * model.A3)  # as the array code forms it (a 0-d array costs one sync)
    out = cp.empty_like(P)
    _launch("bsp_weno_dphi", NX * NV * NS * NW, (P, a3f, d, out, _i(NX), _i(NS), _i(NW), _i(NPHI),
                                                 _d(alpha), _d(eps), _d(1.0 / model.dphi)))
    return out.astype(Phi.dtype, copy=False)
