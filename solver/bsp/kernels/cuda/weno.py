"""CUDA fast paths of the WENO phases (weno.cu): ``weno_x``, ``weno_w``, ``weno_phi`` take exactly
the arguments of the array functions of solver/bsp/weno.py and return the same result: bit for bit
with ``numerics.bte_kernels: exact``, within a few ulps with ``fast`` (FMAs and one division per
face; WENO_phi by the coalesced tile kernel) (measurements: docs/performance-bte-kernels.md).  With ``fast2``
WENO_x takes the fast2 faces (``x_defines``: one reciprocal per face, within 1e-12 of the array code, not
bit-equal to fast), by the walk (bsp_weno_dx) or with ``numerics.wenox_kernel: tile`` by the shared-memory tile
kernel bsp_weno_dx_tile (``x_kernel``; the same bits, docs/performance-bte-kernels.md section 19); WENO_w and WENO_phi run fast's (fast2's w and phi faces are in rk.py's fused kernel).

One launch per call, one thread per line segment along the differentiated direction.  The thread
keeps the six flux products g of the stencil in registers (a sliding window), forms each face once
(weno5_faces' arithmetic in its order) and writes (h_{k+1/2} - h_{k-1/2}) / h.  Ghost and boundary
rules are those of weno.py: x inflow ghosts scaled by rho_eq/rho (closed: constant extension and
zero contact faces), w partner-angle ghosts below w = 0, constant extension above, top face 0,
bottom face (h(phi) - h(phi+pi))/2 (the thread of a segment that starts at l = 0 forms the partner
line's bottom face itself), periodic phi with the Lax-Friedrichs pair g+ (left-biased) + g-
(right-biased).  Long lines (x, w) are cut into segments so that about 2^18 threads run; a segment
boundary face is formed by both neighbours (redundancy 1/segment length).  Fast WENO_phi: one
block per LINES whole phi lines (about TILE values), read coalesced into shared memory, one thread
per face.  Only float64 is computed; other dtypes are converted and the result cast back.
"""
from __future__ import annotations

import functools

import numpy as np

import cupy as cp

from solver.bsp import weno as _weno
from solver.bsp import kernels
from solver.bsp.kernels import bte_fast, bte_variant, f64, wenox_kernel
from solver.bsp.kernels.cuda import _build

SOURCE = "weno.cu"
# no implicit contraction of a*b + c: exact rounds each operation as the array code, fast writes
# its FMAs out (so that the host build of the tests computes the device's bits)
OPTIONS = ("--fmad=false",)
BLOCK = 128
TARGET_THREADS = 1 << 18  # segments per launch: enough threads to fill an H100/H200
MIN_SEGMENT = 8  # nodes per segment at least (the boundary face is formed twice)
TILE_BLOCK = 256  # threads per block of the coalesced phi kernel
TILE = 1536  # values per phi tile (LINES = TILE // NPHI whole lines): 3 x 12 KB of shared memory
MAX_TILE = 2040  # 3 x 8 x MAX_TILE B + 12 B per line <= 48 KB (static shared memory); longer: strided kernel
# numerics.wenox_kernel tile (bsp_weno_dx_tile, fast2 only; docs/performance-bte-kernels.md section 19): a block of
# TILE_X_WARPS warps over 32 lines x at most TILE_X_SEG x nodes (shared memory 8 x 32 x (2 seg + 7) B <= 36 KB), built
# with __launch_bounds__(256, TILE_X_MINB): 40 registers, 6 blocks = 48 warps per SM
TILE_X_WARPS = 8
TILE_X_SEG = 66
TILE_X_MINB = 6
# fast2's faces divide by s >= eps^4 (x, w faces) and s+ s- >= 100 eps^8 (phi pair): below this WENO eps, fast's faces
FAST2_MIN_EPS = kernels.FAST2_MIN_EPS


def _defines(model, **extra):
    return {"BSP_WENO_FAST": 1, **extra} if bte_fast(model) else {}


def fast2(model, eps) -> bool:
    """The fast2 faces (weno.cu -DBSP_WENO_FAST2=1): numerics.bte_kernels fast2 and WENO eps >= FAST2_MIN_EPS."""
    return bte_variant(model) == "fast2" and eps >= FAST2_MIN_EPS


def x_defines(model, eps):
    """The -D defines of bsp_weno_dx: exact none, fast -DBSP_WENO_FAST=1, fast2 (eps >= FAST2_MIN_EPS) adds
    -DBSP_WENO_FAST2=1 (weno2_face12: fewer FP64 operations, one reciprocal per face; docs/performance-bte-kernels.md
    section 13)."""
    return _defines(model, **({"BSP_WENO_FAST2": 1} if fast2(model, eps) else {}))


def _launch(model, kernel, nthreads, args, block=BLOCK, **extra):
    _build.launch(_build.function(SOURCE, kernel, OPTIONS, _defines(model, **extra)), nthreads, block, args)


def _segments(nline, n):
    """(segment length, number of segments) for lines of n nodes: about TARGET_THREADS threads."""
    nseg = max(1, min(-(-TARGET_THREADS // max(nline, 1)), -(-n // MIN_SEGMENT)))
    seg = -(-n // nseg)
    return seg, -(-n // seg)


def _x_flags(model):
    """Device flags (3, NW, NPHI): 1 inflow left, 2 inflow right, 4 left-biased."""
    key = ("cuda.weno", "x_flags")
    cache = model.device_cache
    if key not in cache:
        in_l, in_r, left = _weno._phi_masks(model)
        f = (np.asarray(in_l, dtype=np.uint8) + 2 * np.asarray(in_r, dtype=np.uint8)
             + 4 * np.asarray(left, dtype=np.uint8))
        cache[key] = cp.asarray(np.ascontiguousarray(f, dtype=np.uint8))
    return cache[key]


def weno_x(model, backend, Phi, rho_eq0, rho_eqL, rho0, rhoL, closed=False, eps=None):
    """weno.weno_x: d(a1 Phi)/dx, one launch."""
    P = f64(cp, Phi)
    r = None if closed else tuple(f64(cp, v) for v in (rho_eq0, rho_eqL, rho0, rhoL))
    out = cp.empty_like(P)
    x_into(model, backend, P, r, out, eps)
    return out.astype(Phi.dtype, copy=False)


def x_into(model, backend, P, r, out, eps=None):
    """The launch of weno_x on float64 C-contiguous P and r = (rho_eq0, rho_eqL, rho0, rhoL), or
    r = None (closed contacts), writing out (also captured by bte_graph)."""
    eps = _weno._eps(model) if eps is None else eps
    NX, NV, NS, NW, NPHI = P.shape
    a1 = f64(cp, model.on(backend, "a1"))
    flags = _x_flags(model)
    closed = r is None
    if closed:
        dummy = _dummy()
        r = (dummy, dummy, dummy, dummy)
    hybrid = not closed and _weno.contact_rule(model) == "hybrid"
    shape = _inflow_shape(model) if hybrid else _dummy()
    nline = NV * NS * NW * NPHI
    tail = (np.float64(eps), np.float64(1.0 / model.dx), shape, np.int32(hybrid))
    head = (P, a1, flags) + r + (out,)
    closed_arg = np.int32(1 if closed else 0)
    name, defines = x_kernel(model, eps, NX, NS, NW, NPHI)
    fn = _build.function(SOURCE, name, OPTIONS, defines)
    if name == "bsp_weno_dx_tile":  # the sizes are compile-time (x_kernel's defines)
        nseg = -(-NX // defines["XSEG_"])
        block = 32 * TILE_X_WARPS
        _build.launch(fn, -(-nline // 32) * nseg * block, block, head + (closed_arg,) + tail)
        return
    seg, nseg = _segments(nline, NX)
    _build.launch(fn, nline * nseg, BLOCK, head + (np.int32(NX), np.int32(NS), np.int32(NW), np.int32(NPHI),
                                                   closed_arg, np.int32(seg), np.int32(nseg)) + tail)


def x_kernel(model, eps, NX, NS=None, NW=None, NPHI=None):
    """(kernel name, -D defines) of WENO_x: bsp_weno_dx with x_defines, or with numerics.wenox_kernel tile and the
    fast2 faces bsp_weno_dx_tile, x_defines plus XSEG_ (x nodes per block: NX in ceil(NX / TILE_X_SEG) near-equal
    segments), XWARPS, XMINB and the mesh sizes XNX, XNS, XNW, XNPHI (compile-time in the tile kernel,
    docs/performance-bte-kernels.md section 20; NS, NW, NPHI default to the model's: one build per mesh)."""
    defines = x_defines(model, eps)
    if wenox_kernel(model) != "tile" or not fast2(model, eps):
        return "bsp_weno_dx", defines
    _, _, ns, nw, nphi = model.shape
    nseg = -(-NX // TILE_X_SEG)
    return "bsp_weno_dx_tile", {**defines, "XSEG_": -(-NX // nseg), "XWARPS": TILE_X_WARPS, "XMINB": TILE_X_MINB,
                                "XNX": NX, "XNS": ns if NS is None else NS, "XNW": nw if NW is None else NW,
                                "XNPHI": nphi if NPHI is None else NPHI}


def _inflow_shape(model):
    """s_w M, (3, NW) on the device: the start-up shape the hybrid contact rule injects a deficit with."""
    key = ("cuda.weno", "inflow_shape")
    cache = model.device_cache
    if key not in cache:
        cache[key] = cp.asarray(np.ascontiguousarray(model.s_w * model.maxwellian, dtype=np.float64))
    return cache[key]


@functools.cache
def _dummy():
    """A one-value device array for the pointer arguments a launch does not read (one per process;
    a captured graph of bte_graph.py holds its address)."""
    return cp.zeros(1, dtype=cp.float64)


def weno_w(model, backend, Phi, deps_dx, eps=None):
    """weno.weno_w: d(a2 Phi)/dw, one launch."""
    eps = _weno._eps(model) if eps is None else eps
    P = f64(cp, Phi)
    NX, NV, NS, NW, NPHI = P.shape
    a1 = f64(cp, model.on(backend, "a1"))
    d = f64(cp, deps_dx)
    out = cp.empty_like(P)
    nline = NX * NV * NS * NPHI
    seg, nseg = _segments(nline, NW)
    _launch(model, "bsp_weno_dw", nline * nseg, (P, a1, d, out, np.int32(NX), np.int32(NS), np.int32(NW),
                                                 np.int32(NPHI), np.int32(seg), np.int32(nseg), np.float64(eps),
                                                 np.float64(1.0 / model.dw)))
    return out.astype(Phi.dtype, copy=False)


def weno_phi(model, backend, Phi, deps_dx, A_eps, eps=None):
    """weno.weno_phi: d(a3 Phi)/dphi with the Lax-Friedrichs split, one launch."""
    eps = _weno._eps(model) if eps is None else eps
    P = f64(cp, Phi)
    NX, NV, NS, NW, NPHI = P.shape
    a3f = f64(cp, model.on(backend, "a3_factor"))
    d = f64(cp, deps_dx)
    alpha = float(A_eps * model.A3)  # as the array code forms it (a 0-d array costs one sync)
    out = cp.empty_like(P)
    nline = NX * NV * NS * NW
    lines = max(1, TILE // NPHI)
    if bte_fast(model) and lines * NPHI <= MAX_TILE:
        _launch(model, "bsp_weno_dphi_tile", -(-nline // lines) * TILE_BLOCK,
                (P, a3f, d, out, np.int32(NS), np.int32(NW), np.int32(nline), np.float64(alpha),
                 np.float64(eps), np.float64(1.0 / model.dphi)), block=TILE_BLOCK, NPHI_=NPHI, LINES=lines)
    else:
        _launch(model, "bsp_weno_dphi", nline, (P, a3f, d, out, np.int32(NX), np.int32(NS), np.int32(NW),
                                                np.int32(NPHI), np.float64(alpha), np.float64(eps),
                                                np.float64(1.0 / model.dphi)))
    return out.astype(Phi.dtype, copy=False)
