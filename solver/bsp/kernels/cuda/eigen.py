"""CUDA fast path of the eigen phase (eigen.cu, eigen_nr.cu): ``eigen`` takes exactly the
arguments of schrodinger.eigen and returns the N_sbn lowest eigenpairs of every (x_i, valley)
tridiagonal Schroedinger matrix, by the two kernels of paper 001 (sections 4.2-4.3), one CUDA
thread per (i, nu, p) in both: the eigenvalues (they also store the diagonals) and ``ipim``
(inverse iteration).

Variant ``numerics.eigen`` (the eigenvalues):
  ``newton``     kernel ``eigenvalues_nr`` (eigen_nr.cu): Newton-Raphson on the characteristic
                 polynomial from ``levels`` (the previous Newton iterate's eigenvalues, which
                 poisson._newton_loop passes), bisection as the safeguard; ~4 Sturm evaluations
                 per eigenvalue instead of ~60.  Without ``levels`` (the first solve of a problem)
                 it bisects exactly as ``eigenvalues`` does (bitwise equal).  Results agree with
                 the bisection to ~ 16 DBL_EPSILON ||T||.
  ``bisection``  kernel ``eigenvalues`` (eigen.cu): Sturm bisection to the last bit; ignores
                 ``levels``.  Kept as the baseline (docs/performance-iter-next.md, rule
                 bsp_tables1_4_001_iter_kernels times it).
  ``twisted``    kernels ``eigenvalues_tw`` and ``ipim_t`` (eigen_tw.cu; numerics.ipim is not
                 used): the same Newton-Raphson / bisection, two threads per eigenvalue (the two
                 halves of a twisted factorization: half the dependent chain per evaluation), the
                 block's matrices in shared memory; inverse iteration with the LU formed once and
                 back substitution by the kept reciprocals.  Results agree with ``newton``'s to
                 ~DBL_EPSILON ||T|| (levels) and rounding (vectors), not bitwise;
                 docs/performance-iter-eigen.md.
  ``auto``       (default) twisted.
Variant ``numerics.ipim``: "a" (the matrix from global memory, the default: faster on the H200 at
every NZ 33..129, 14 % at NZ 65) or "b" (shared memory).  Both are kept: Table 1 of paper 001
compares them (rule bsp_tables1_4_001_iter_kernels); docs/performance-ipim.md.
"""
from __future__ import annotations

import math

import numpy as np

import cupy as cp

from solver.bsp import constants as K
from solver.bsp import schrodinger
from solver.bsp.kernels import eigen_reciprocal, eigen_variant, f64, ipim_variant
from solver.bsp.kernels.cuda import _build

SOURCE = "eigen.cu"
OPTIONS = ("-std=c++14",)
BLOCK = 32  # threads per block of eigenvalues / ipim (paper 001: one-dimensional blocks of 32)
VARIANTS = ("a", "b")


def ipim_maxm(NS: int, block: int) -> int:
    """Most (i, nu) matrices the threads t0 .. t0 + block - 1 can touch (t = (i 3 + nu) NS + p)."""
    return (block - 1 + NS - 1) // NS + 1


def _defines(n, variant="a", NS=1, block=BLOCK) -> dict:
    defines = {"N": n, "SIGN_THRESHOLD": repr(schrodinger.SIGN_THRESHOLD), "IPIM_B": int(variant == "b")}
    if variant == "b":
        defines["MAXM"] = ipim_maxm(NS, block)
    return defines


def _function(kernel, n, variant="a", NS=1, block=BLOCK):
    """Kernel ``eigenvalues`` / ``ipim_a`` (one module) or ``ipim_b`` (MAXM for NS and block)."""
    return _build.function(SOURCE, kernel, OPTIONS, _defines(n, variant, NS, block))


def modules(model) -> list:
    """(source, options, defines) of the modules ``eigen`` launches for this model (_build.precompile)."""
    n, variant = model.NZ - 2, ipim_variant(model)
    if eigen_variant(model) == "twisted":  # eigenvalues_tw and ipim_t: a module each (TW_KERNEL 1, 2)
        r = eigen_reciprocal(model)
        return [(TW_SOURCE, OPTIONS, _tw_defines(n, model.N_sbn, TW_IPIM_BLOCK, rcp=r, carry=r, kernel=k))
                for k in TW_KERNELS.values()]
    out = [(SOURCE, OPTIONS, _defines(n, variant, model.N_sbn))]
    if eigen_variant(model) == "newton":
        out.append(("eigen_nr.cu", OPTIONS, None))
    elif variant != "a":  # kernel eigenvalues: the module of ipim_a
        out.append((SOURCE, OPTIONS, _defines(n)))
    return out


def _static(model, n):
    """(kd (3, n), ko (3, n-1), V_c interior, pivmin) on the device, cached on the model."""
    key = ("cuda.eigen", n)
    cache = model.device_cache
    if key not in cache:
        kd = np.empty((K.N_VALLEYS, n))
        ko = np.empty((K.N_VALLEYS, n - 1))
        for nu in range(K.N_VALLEYS):
            kd[nu], ko[nu] = schrodinger._kinetic(model, nu)
        piv = np.finfo(float).tiny * max(1.0, float(np.max(ko**2)) if ko.size else 1.0)
        cache[key] = (cp.asarray(kd), cp.asarray(ko), cp.asarray(np.ascontiguousarray(model.V_c[1:-1])), piv)
    return cache[key]


def eigenvalues(model, V, block=BLOCK):
    """Kernel ``eigenvalues``: (eps (NX, 3, N_sbn), Dg (NX, 3, NZ-2) the diagonals of T_{nu,i})."""
    V = f64(cp, V)
    NX, NZ = V.shape
    n, NS = NZ - 2, model.N_sbn
    kd, ko, Vc, pivmin = _static(model, n)
    eps = cp.empty((NX, K.N_VALLEYS, NS))
    Dg = cp.empty((NX, K.N_VALLEYS, n))
    _build.launch(_function("eigenvalues", n), NX * K.N_VALLEYS * NS, block,
                  (V, kd, ko, Vc, np.float64(pivmin), np.int32(NX), np.int32(NZ), np.int32(NS), eps, Dg))
    return eps, Dg


def _warm_launch(model, V, levels):
    """The arguments of the warm-startable eigenvalue kernels (eigenvalues_nr, eigenvalues_tw): V on the
    device, its sizes, the static diagonals, the outputs eps, Dg, its, and the warm start (warm, prev;
    prev is not read when cold)."""
    V = f64(cp, V)
    NX, NZ = V.shape
    n, NS = NZ - 2, model.N_sbn
    kd, ko, Vc, pivmin = _static(model, n)
    eps = cp.empty((NX, K.N_VALLEYS, NS))
    Dg = cp.empty((NX, K.N_VALLEYS, n))
    its = cp.empty((NX, K.N_VALLEYS, NS), dtype=cp.int32)
    warm = levels is not None
    if warm:
        prev = f64(cp, levels)
        if prev.shape != eps.shape:
            raise ValueError(f"levels have shape {prev.shape}, expected {eps.shape}")
    else:
        prev = eps  # not read
    return V, NX, NZ, n, NS, kd, ko, Vc, pivmin, eps, Dg, its, warm, prev


def eigenvalues_nr(model, V, levels=None, block=BLOCK, iterations=False):
    """Kernel ``eigenvalues_nr``: (eps (NX, 3, N_sbn), Dg (NX, 3, NZ-2)) as ``eigenvalues``
    returns them; ``levels`` (NX, 3, N_sbn): the warm start (None: the bisection of
    ``eigenvalues``, bitwise).  With ``iterations`` also the Sturm evaluations per eigenvalue
    (int32 (NX, 3, N_sbn)).  N is a run-time argument: one compile per machine."""
    V, NX, NZ, n, NS, kd, ko, Vc, pivmin, eps, Dg, its, warm, prev = _warm_launch(model, V, levels)
    _build.launch(_build.function("eigen_nr.cu", "eigenvalues_nr", OPTIONS), NX * K.N_VALLEYS * NS, block,
                  (V, kd, ko, Vc, prev, np.float64(pivmin), np.int32(n), np.int32(NX), np.int32(NZ), np.int32(NS),
                   np.int32(warm), eps, Dg, its))
    return (eps, Dg, its) if iterations else (eps, Dg)


TW_SOURCE = "eigen_tw.cu"
TW_BLOCK = 64  # eigenvalues_tw: 32 eigenvalues (pairs of lanes) per block; whole warps (the shuffles)
TW_IPIM_BLOCK = 32  # ipim_t: 32 eigenpairs per block (the same MAXM as eigenvalues_tw's blocks)
# eigen_tw.cu's TW_KERNEL: each kernel in a module of its own, so that a fresh machine compiles the two
# in parallel (_build.precompile; docs/performance-startup.md round 4); a kernel's code does not depend
# on the other being in its module
TW_KERNELS = {"eigenvalues_tw": 1, "ipim_t": 2}


def _tw_function(kernel, n, NS, block, shared=False, rcp=False, carry=False):
    """Kernel ``eigenvalues_tw`` or ``ipim_t`` of eigen_tw.cu (defines N, MAXM, SIGN_THRESHOLD,
    IPIM_SHARED: ipim_t's matrix from shared memory, else from global memory, the default; the
    candidates TW_RCP, TW_CARRY, off by default: eigen_tw.cu's header)."""
    if n < 3:
        raise ValueError(f"eigen_tw.cu needs NZ >= 5, not NZ = {n + 2}")
    pairs = block // 2 if kernel == "eigenvalues_tw" else block
    return _build.function(TW_SOURCE, kernel, OPTIONS, _tw_defines(n, NS, pairs, shared, rcp, carry, TW_KERNELS[kernel]))


def _tw_defines(n, NS, pairs, shared=False, rcp=False, carry=False, kernel=0) -> dict:
    return {"N": n, "MAXM": ipim_maxm(NS, pairs), "SIGN_THRESHOLD": repr(schrodinger.SIGN_THRESHOLD),
            "IPIM_SHARED": int(bool(shared)), "TW_RCP": int(bool(rcp)), "TW_CARRY": int(bool(carry)),
            "TW_KERNEL": int(kernel)}


def eigenvalues_tw(model, V, levels=None, block=TW_BLOCK, iterations=False, rcp=False, carry=False):
    """Kernel ``eigenvalues_tw`` (two threads per eigenvalue): as ``eigenvalues_nr`` (warm start from
    ``levels``, else the bisection; ``iterations``: the Sturm evaluations per eigenvalue; ``rcp``:
    TW_RCP; ``carry``: TW_CARRY, which changes only ipim_t, passed so that both kernels come from one
    module)."""
    if block % 32:
        raise ValueError(f"eigenvalues_tw needs blocks of whole warps (the shuffles), not {block}")
    V, NX, NZ, n, NS, kd, ko, Vc, pivmin, eps, Dg, its, warm, prev = _warm_launch(model, V, levels)
    _build.launch(_tw_function("eigenvalues_tw", n, NS, block, rcp=rcp, carry=carry), 2 * NX * K.N_VALLEYS * NS, block,
                  (V, kd, ko, Vc, prev, np.float64(pivmin), np.int32(NX), np.int32(NZ), np.int32(NS),
                   np.int32(warm), eps, Dg, its))
    return (eps, Dg, its) if iterations else (eps, Dg)


def ipim_t(model, eps, Dg, block=TW_IPIM_BLOCK, shared=False, rcp=False, carry=False):
    """Kernel ``ipim_t``: chi (NX, 3, N_sbn, NZ) as ``ipim`` returns it (LU once, reciprocals kept);
    ``shared``: the matrix from shared memory (the same bits); ``rcp``, ``carry``: the candidates."""
    NX, _, NS = eps.shape
    n = Dg.shape[-1]
    NZ = n + 2
    kd, ko, Vc, pivmin = _static(model, n)
    chi = cp.empty((NX, K.N_VALLEYS, NS, NZ))
    _build.launch(_tw_function("ipim_t", n, NS, block, shared, rcp, carry), NX * K.N_VALLEYS * NS, block,
                  (eps, Dg, ko, np.float64(pivmin), np.float64(1.0 / math.sqrt(model.dz)), np.int32(NX),
                   np.int32(NZ), np.int32(NS), chi))
    return chi


def ipim(model, eps, Dg, variant="a", block=BLOCK):
    """Kernel ``ipim`` (inverse iteration, variant "a" or "b"): chi (NX, 3, N_sbn, NZ) from the
    eigenvalues and the diagonals of kernel ``eigenvalues``."""
    if variant not in VARIANTS:
        raise ValueError(f"ipim variant must be one of {VARIANTS}, not {variant!r}")
    NX, _, NS = eps.shape
    n = Dg.shape[-1]
    NZ = n + 2
    kd, ko, Vc, pivmin = _static(model, n)
    chi = cp.empty((NX, K.N_VALLEYS, NS, NZ))
    _build.launch(_function("ipim_" + variant, n, variant, NS, block), NX * K.N_VALLEYS * NS, block,
                  (eps, Dg, ko, np.float64(pivmin), np.float64(1.0 / math.sqrt(model.dz)), np.int32(NX),
                   np.int32(NZ), np.int32(NS), chi))
    return chi


def eigen(model, backend, V, levels=None):
    """schrodinger.eigen on the device: (eps (NX, 3, N_sbn), chi (NX, 3, N_sbn, NZ)) by the kernels
    ``eigenvalues_tw`` + ``ipim_t`` (numerics.eigen = twisted), else ``eigenvalues_nr`` from
    ``levels`` (newton) or ``eigenvalues`` (bisection), then ``ipim`` (variant numerics.ipim)."""
    v = eigen_variant(model)
    if v == "twisted":  # numerics.eigen_division: reciprocal = TW_RCP + TW_CARRY
        r = eigen_reciprocal(model)
        eps, Dg = eigenvalues_tw(model, V, levels, rcp=r, carry=r)
        return eps, ipim_t(model, eps, Dg, rcp=r, carry=r)
    if v == "newton":
        eps, Dg = eigenvalues_nr(model, V, levels)
    else:
        eps, Dg = eigenvalues(model, V)
    return eps, ipim(model, eps, Dg, ipim_variant(model))
