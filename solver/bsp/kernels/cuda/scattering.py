"""CUDA fast paths of the scattering phases (scattering.cu): ``scat_gain`` and ``scat_loss`` take
exactly the arguments of the array functions of solver/bsp/scattering.py and return the same
result to the summation order of einsum (docs/performance-bte-kernels.md).

ONE launch per call, one block per row (i, nu, p), LPT energies l per thread (row_threads).  The block
puts the row's (branch, p') table into shared memory (what does not depend on l: delta, delta / dw,
weight x W, the PhiHat row, the interval of the l whose node is valid (gain) or the first l with
Gamma >= 0 (loss); docs/performance-bte-kernels.md §14), then each thread loops over the branches of its valley
nu (mechanism, nu', sigma, weight; the host table of ``scattering.branches`` copied once per model
and mechanism subset as small device arrays) and over p' (the N_sbn terms of a branch formed
together: the kernels are built per N_sbn), with the interpolation rule of
``scattering.interpolate`` (trunc toward zero, validity r >= -1/2 and (l_d <= NW-2 or r == NW-1
exactly), clip, linear in t) and the Heaviside / (1 + 2 alpha Gamma) factor of the loss.  Per
branch the p' sum is formed first and then added to the valley total, as the array code does
(einsum per branch, then +=).  Only float64 is computed; other dtypes are converted and the result
cast back.  ``overlap`` (W from chi: one block per x index, the squares of chi[i] in shared memory, one
thread per ((nu, p), (nu', p')); scattering.overlap) runs with numerics.bte_kernels fast / fast2.
"""
from __future__ import annotations

import math

import numpy as np

import cupy as cp

from solver.bsp import scattering as _scat
from solver.bsp.kernels import f64
from solver.bsp.kernels.cuda import _build

SOURCE = "scattering.cu"
OPTIONS = ("--fmad=false",)
OVL_THREADS = 1024  # bsp_overlap's most threads per block (a thread per pair (a, b) up to this)
OVL_TILE = 6144  # bsp_overlap's shared tile (doubles, 48 KB: the static limit; passed as the define OVL_TILE)
LPT = 2  # energies per thread of gain / loss (one block per row: 32 ceil(NW / 64) threads; NW = 300: 160)


def row_threads(NW):
    """(threads per block, energies per thread) of gain / loss: one block per row (i, nu, p), thread t forms
    l = t + j threads, j < LPT (more where NW > 1024 LPT)."""
    lpt = max(LPT, -(-NW // 1024))
    return 32 * -(-NW // (32 * lpt)), lpt


def _launch_rows(kernel, rows, NS, NW, nbranch, args):
    """``kernel`` over one block per row (i, nu, p) for ``rows`` rows.  Built for NS_ = N_sbn, MAXE =
    ``nbranch`` x N_sbn (the (branch, p') pairs of the largest valley table, the size of the block's shared
    table), LPT energies per thread and NWS (the loss's shared copy of w) = threads x LPT."""
    threads, lpt = row_threads(NW)
    fn = _build.function(SOURCE, kernel, OPTIONS, {"MAXE": max(1, nbranch * NS), "NS_": NS, "LPT": lpt,
                                                   "NWS": threads * lpt})
    _build.launch(fn, rows * threads, threads, args)


def _branch_table(model, mechanisms, which):
    """Device arrays (offsets (4,) int32, nu' int32, sigma, weight) of scattering.branches and the
    most branches of one valley (host int); weight = gain weight (``gain``) or 2 pi * loss weight *
    sqrt(m_x m_y)_nu' (``loss``)."""
    mkey = None if mechanisms is None else tuple(sorted(set(int(m) for m in mechanisms)))
    key = ("cuda.scattering", "branches", which, mkey)
    cache = model.device_cache
    if key not in cache:
        brs = _scat.branches(model, mechanisms)
        smm = model.sqrt_mxmy
        off, nu2s, sig, wt = [0], [], [], []
        for nu in range(_scat.N_VALLEYS):
            for _mu, nu2, sigma, lw, gw in brs[nu]:
                nu2s.append(nu2)
                sig.append(sigma)
                wt.append(gw if which == "gain" else (2.0 * math.pi * lw * smm[nu2]))
            off.append(len(nu2s))
        pad = max(len(nu2s), 1)
        cache[key] = (cp.asarray(np.array(off, dtype=np.int32)),
                      cp.asarray(np.array(nu2s + [0] * (pad - len(nu2s)), dtype=np.int32)),
                      cp.asarray(np.array(sig + [0.0] * (pad - len(sig)), dtype=np.float64)),
                      cp.asarray(np.array(wt + [0.0] * (pad - len(wt)), dtype=np.float64)),
                      max(b - a for a, b in zip(off, off[1:])))
    return cache[key]


def scat_gain(model, backend, PhiHat, eps, W, mechanisms=None):
    """scattering.scat_gain: G (NX, 3, N_sbn, NW), one launch."""
    e = f64(cp, eps)
    NX, NV, NS = e.shape
    G = cp.empty((NX, NV, NS, model.NW), dtype=cp.float64)
    gain_into(model, backend, f64(cp, PhiHat), e, f64(cp, W), mechanisms, G)
    return G.astype(PhiHat.dtype, copy=False)


def gain_into(model, backend, PH, e, Wc, mechanisms, G):
    """The launch of scat_gain on float64 C-contiguous inputs, writing G (also captured by bte_graph)."""
    NX, NV, NS = e.shape
    off, nu2, sig, wt, nb = _branch_table(model, mechanisms, "gain")
    s_w = f64(cp, model.on(backend, "s_w"))
    NW = model.NW
    _launch_rows("bsp_scat_gain", NX * NV * NS, NS, NW, nb,
                 (PH, e, Wc, s_w, off, nu2, sig, wt, G, np.int32(NW), np.float64(1.0 / model.dw)))


def scat_loss(model, backend, eps, W, mechanisms=None):
    """scattering.scat_loss: Lc (NX, 3, N_sbn, NW), one launch."""
    e = f64(cp, eps)
    NX, NV, NS = e.shape
    Lc = cp.empty((NX, NV, NS, model.NW), dtype=cp.float64)
    loss_into(model, backend, e, f64(cp, W), mechanisms, Lc)
    return Lc.astype(eps.dtype, copy=False)


def loss_into(model, backend, e, Wc, mechanisms, Lc):
    """The launch of scat_loss on float64 C-contiguous inputs, writing Lc (also captured by bte_graph)."""
    NX, NV, NS = e.shape
    off, nu2, sig, wt, nb = _branch_table(model, mechanisms, "loss")
    w = f64(cp, model.on(backend, "w"))
    NW = model.NW
    _check_w(model)
    _launch_rows("bsp_scat_loss", NX * NV * NS, NS, NW, nb,
                 (e, Wc, w, off, nu2, sig, wt, Lc, np.int32(NW), np.float64(2.0 * model.alpha)))


def _check_w(model):
    """The loss kernel takes the Heaviside factor H(delta + w_l) as 1 from the first such l on: w must
    increase (model.w = (l + 1/2) dw does); checked once per model."""
    key = ("cuda.scattering", "w increases")
    if key not in model.device_cache:
        w = np.asarray(model.w, dtype=np.float64)
        if not np.all(np.diff(w) > 0.0):
            raise ValueError("scat_loss (CUDA): the energy grid w must increase")
        model.device_cache[key] = True


def overlap(model, backend, chi):
    """scattering.overlap by one launch (phase key overlap): W (NX, 3, N_sbn, 3, N_sbn), the sum over
    z in the order j = 1 .. NZ-2 (the reference's matmul sums in cuBLAS's order: equal to rounding).
    One block per x index (the squares of chi[i] staged in shared memory, overlap_shape), the bits of the
    one-thread-per-pair kernel of a7e270b (docs/performance-bte-kernels.md §15)."""
    c = f64(cp, chi)
    NX, NV, NS, NZ = c.shape
    W = cp.empty((NX, NV, NS, NV, NS), dtype=cp.float64)
    threads, rows = overlap_shape(NV * NS, NZ)
    fn = _build.function(SOURCE, "bsp_overlap", OPTIONS, {"OVL_TILE": OVL_TILE})
    _build.launch(fn, NX * threads, threads,
                  (c, W, np.int32(NV * NS), np.int32(NZ), np.int32(rows), np.float64(model.dz)))
    return W.astype(chi.dtype, copy=False)


def overlap_shape(NB, NZ):
    """(threads per block, z rows per chunk) of bsp_overlap for NB = 3 N_sbn pairs (nu, p) and NZ nodes: a
    thread per pair (a, b) up to OVL_THREADS (more pairs: a thread takes every blockDim-th), the NZ-2 interior
    rows of an x in one tile of OVL_TILE doubles where NBP = NB | 1 values each fit (standard NB = 18, NZ = 65:
    63 rows, 9.6 KB; NZ = 257: 255 rows, 38.8 KB), else in chunks of OVL_TILE // NBP rows.  ValueError where
    not one row fits (N_sbn >= 2048: W alone would be > 300 MB per x index)."""
    nbp = NB | 1
    if nbp > OVL_TILE:
        raise ValueError(f"overlap (CUDA): 3 N_sbn = {NB} pairs do not fit bsp_overlap's shared tile "
                         f"({OVL_TILE} doubles); use numerics.bte_kernels: exact")
    return min(OVL_THREADS, 32 * -(-NB * NB // 32)), min(NZ - 2, OVL_TILE // nbp)
