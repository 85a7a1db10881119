"""CUDA fast paths of the scattering phases (scattering.cu): ``scat_gain`` and ``scat_loss`` take
exactly the arguments of the array functions of solver/bsp/scattering.py and return the same
result to the summation order of einsum (docs/performance-bte-kernels.md).

ONE launch per call, one thread per output (i, nu, p, l).  The thread loops over the branches of
its valley nu (mechanism, nu', sigma, weight; the host table of ``scattering.branches`` copied once
per model and mechanism subset as small device arrays) and over p', with the interpolation rule of
``scattering.interpolate`` (trunc toward zero, validity r >= -1/2 and (l_d <= NW-2 or r == NW-1
exactly), clip, linear in t) and the Heaviside / (1 + 2 alpha Gamma) factor of the loss.  Per
branch the p' sum is formed first and then added to the valley total, as the array code does
(einsum per branch, then +=).  Only float64 is computed; other dtypes are converted and the result
cast back.
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
BLOCK = 128


def _launch(kernel, nthreads, args):
    _build.launch(_build.function(SOURCE, kernel, OPTIONS), nthreads, BLOCK, args)


def _branch_table(model, mechanisms, which):
    """Device arrays (offsets (4,) int32, nu' int32, sigma, weight) of scattering.branches;
    weight = gain weight (``gain``) or 2 pi * loss weight * sqrt(m_x m_y)_nu' (``loss``)."""
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
                      cp.asarray(np.array(wt + [0.0] * (pad - len(wt)), dtype=np.float64)))
    return cache[key]


def scat_gain(model, backend, PhiHat, eps, W, mechanisms=None):
    """scattering.scat_gain: G (NX, 3, N_sbn, NW), one launch."""
    PH, e, Wc = f64(cp, PhiHat), f64(cp, eps), f64(cp, W)
    NX, NV, NS = e.shape
    NW = model.NW
    off, nu2, sig, wt = _branch_table(model, mechanisms, "gain")
    s_w = f64(cp, model.on(backend, "s_w"))
    G = cp.empty((NX, NV, NS, NW), dtype=cp.float64)
    _launch("bsp_scat_gain", G.size, (PH, e, Wc, s_w, off, nu2, sig, wt, G, np.int32(NX), np.int32(NS),
                                      np.int32(NW), np.float64(1.0 / model.dw)))
    return G.astype(PhiHat.dtype, copy=False)


def scat_loss(model, backend, eps, W, mechanisms=None):
    """scattering.scat_loss: Lc (NX, 3, N_sbn, NW), one launch."""
    e, Wc = f64(cp, eps), f64(cp, W)
    NX, NV, NS = e.shape
    NW = model.NW
    off, nu2, sig, wt = _branch_table(model, mechanisms, "loss")
    w = f64(cp, model.on(backend, "w"))
    Lc = cp.empty((NX, NV, NS, NW), dtype=cp.float64)
    _launch("bsp_scat_loss", Lc.size, (e, Wc, w, off, nu2, sig, wt, Lc, np.int32(NX), np.int32(NS),
                                       np.int32(NW), np.float64(2.0 * model.alpha)))
    return Lc.astype(eps.dtype, copy=False)
