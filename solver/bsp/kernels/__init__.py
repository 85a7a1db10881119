"""Hand-written fast paths beside the array reference (docs/developing.md, "kernels").

One dispatch table per backend, phase name -> function (``solver.dispatch``):

    backend "cupy":  solver/bsp/kernels/cuda/__init__.py   TABLE (CUDA: .cu sources + launchers)
    backend "numba": solver/bsp/kernels/numba/__init__.py  TABLE (numba njit/prange)

Every array function that has a fast path looks it up by its phase name::

    fast = kernels.lookup(model, backend, "scat_gain")
    if fast is not None:
        return fast(model, backend, PhiHat, eps, W, mechanisms)
    ... array reference ...

A fast path has the name of the reference function it replaces, takes exactly its arguments and
returns the same result (to rounding).  Only a missing CuPy or numba means "no fast path"; any
other import error fails loudly.  ``numerics.kernels``: ``auto`` (default) = the fast path where
one exists, ``array`` = the array reference everywhere (the test oracle).  Variants are schema
keys (``numerics.linsys``, ``numerics.linsys_graph``, ``numerics.iter_graph``, ``numerics.iter_overlap``, ``numerics.batched_blocks``,
``numerics.resolve``, ``numerics.eigen``,
``numerics.ipim``, ``numerics.bte_kernels``: they
choose among the CUDA kernels); ``implementations`` says, per phase, which function and variant run
(written into run.json).  ``RK`` (the stage update fused with the loss product, the sum of the terms
and DENS) exists in the cupy table (agrees with the reference to 1e-12) and the numba table
(bit-identical to it) and runs only with ``numerics.bte_kernels: fast``; without it the stage is
formed by bte.rhs + bte.rk3_combine and DENS as before.  ``RK_wphi`` (cupy and numba, also
``numerics.bte_kernels: fast``) is RK with the WENO w and phi terms formed in the same kernel
(reference bte.stage_update); where it exists bte.advance uses it instead of WENO_w + WENO_phi + RK.
``numerics.bte_kernels: fast2`` is ``fast`` everywhere except the cupy RK_wphi and WENO_x kernels, which it
builds with fewer FP64 operations per face (``bte_fast`` is true for both; run.json says ``fast2 (as fast)`` where
it runs fast's kernel).

One variant is array code and so runs on every backend: ``numerics.linsys: batched_cr``
(solver/bsp/blocktri_batched.py, block cyclic reduction over batched LU / GEMM).  Set explicitly,
it replaces the backend's Newton system on numpy (SuperLU) and numba (the CR kernels); on cupy
newton.py runs it (construct kernel + the batched solve), and ``auto`` selects it there.
"""
from __future__ import annotations

import numpy as np

from solver.dispatch import Registry

# phase name -> the array reference function (module.function)
REFERENCE = {
    "WENO_x": "solver.bsp.weno.weno_x",
    "WENO_w": "solver.bsp.weno.weno_w",
    "WENO_phi": "solver.bsp.weno.weno_phi",
    "scat_gain": "solver.bsp.scattering.scat_gain",
    "scat_loss": "solver.bsp.scattering.scat_loss",
    "RK": "solver.bsp.bte.rk3_combine",  # without the fast path: rhs + rk3_combine, DENS apart
    "RK_wphi": "solver.bsp.bte.stage_update",  # RK with the WENO w and phi terms in one kernel
    "overlap": "solver.bsp.scattering.overlap",  # the overlap integrals W of the scattering rates
    "eigen": "solver.bsp.schrodinger.eigen",
    "Frechet": "solver.bsp.poisson.frechet",
    "construct_linsys": "solver.bsp.poisson.construct_linsys",
    "solve_linsys": "solver.bsp.poisson.solve_linsys",
    "newton_rhs": "solver.bsp.poisson.newton_rhs",
    "newton_norms": "solver.bsp.poisson.norms",
    "deps_dx": "solver.bsp.schrodinger.deps_dx_max",
    "newton_norms_tail": "solver.bsp.poisson.norms_tail",  # newton_norms + deps_dx of the new iterate, one host read
    "iter_start": "solver.bsp.poisson.iter_start",  # the prediction of a stage's POTENTIAL start
    "linsys_rhs": "solver.bsp.poisson.linsys_rhs",  # construct_linsys's b alone (kept Jacobian)
    # one kept-Jacobian Newton iteration of POTENTIAL (cupy: one CUDA graph replay, numerics.iter_graph)
    "newton_iteration": "solver.bsp.poisson.newton_iteration",
    "density_probe": "solver.bsp.dens.density_probe",  # the stage's density check numbers (cupy: one launch)
    # the start's eigenpairs of a stage's first such iteration launched while the BTE runs (cupy: a second
    # stream, numerics.iter_overlap); the reference launches nothing early (None)
    "iter_prologue": "solver.bsp.poisson.iter_prologue",
    "scalars_probe": "solver.bsp.dens.scalars_probe",  # a scalars row's numbers, one read (cupy: one launch)
}
PHASES = tuple(REFERENCE)
FAST_ONLY = frozenset({"RK", "RK_wphi", "overlap"})  # fast paths that run only with numerics.bte_kernels: fast (or fast2)
BTE_VARIANT_PHASES = ("WENO_x", "WENO_w", "WENO_phi", "RK", "RK_wphi")  # cupy kernels chosen by numerics.bte_kernels
FAST2_PHASES = ("RK_wphi", "WENO_x")  # cupy kernels with fast2 faces (weno.cu BSP_WENO_FAST2); the others run fast's
# fast2's faces divide by s >= eps^4 (x, w faces) and s+ s- >= 100 eps^8 (phi pair): below this WENO eps the fast2
# kernels build fast's faces (kernels/cuda/weno.py, rk.py)
FAST2_MIN_EPS = 1e-30


def _cupy():
    from solver.bsp.kernels.cuda import TABLE
    return TABLE


def _numba():
    from solver.bsp.kernels.numba import TABLE
    return TABLE


REGISTRY = Registry("bsp", {"cupy": _cupy, "numba": _numba})


def f64(xp, a):
    """``a`` as a C-contiguous float64 array of ``xp`` (NumPy or CuPy): the kernels' input form.  An
    array that already is one is returned as it is (as the conversion would), without the two calls
    (~4 us of host time each on the GPU; ~90 per step)."""
    if type(a) is getattr(xp, "ndarray", None) and a.dtype == np.float64 and a.ndim and a.flags.c_contiguous:
        return a
    return xp.ascontiguousarray(xp.asarray(a, dtype=xp.float64))


def precompile(model, backend) -> int:
    """Start compiling the CUDA modules of the start-up's fast paths in background threads (cupy
    backend with fast paths; solver/bsp/kernels/cuda/_build.py), and running the start-up's CuPy array
    expressions on small arrays in the same threads (solver/bsp/warm.py: CuPy compiles or loads their
    kernels; every CUDA graph capture waits for them first, _build.wait_jobs): how many modules were
    started."""
    if backend.name != "cupy" or mode(model) == "array":
        return 0
    from solver.bsp import warm
    from solver.bsp.kernels.cuda import _build, startup_modules

    return _build.precompile(startup_modules(model), warm.jobs(model, backend))


def mode(model) -> str:
    return str(model.cfg.get("numerics", {}).get("kernels", "auto"))


def _numerics(model, key: str, default: str) -> str:
    return str(model.cfg.get("numerics", {}).get(key, default))


def lookup(model, backend, name: str):
    """The fast path of phase ``name`` for this model's backend, or None (the array reference):
    the backend's kernel, else an array-code variant selected explicitly (``_array_variant``)."""
    if name not in REFERENCE:
        raise KeyError(f"no BSP phase {name!r} (phases: {', '.join(PHASES)})")
    if mode(model) == "array":
        return None
    if name in FAST_ONLY and not bte_fast(model):
        return None
    if name == "newton_iteration" and not iter_graph(model, backend):
        return None
    if name == "iter_prologue" and not iter_overlap(model, backend):
        return None
    if backend.name != "cupy":  # the CUDA table runs numerics.linsys itself
        array = _array_variant(model, name)
        if array is not None:
            return array
    return REGISTRY.lookup(backend.name, name)


def _array_variant(model, name: str):
    """numerics.linsys = batched_cr: construct_linsys / solve_linsys of blocktri_batched (array
    code, any backend); None otherwise."""
    if name in ("construct_linsys", "solve_linsys") and _numerics(model, "linsys", "auto") == "batched_cr":
        from solver.bsp import blocktri_batched
        return getattr(blocktri_batched, name)
    return None


def linsys_variant(model) -> str:
    """The Newton system that runs where a phase has a fast path (numerics.linsys; auto =
    batched_cr at every NZ: measured faster than block_cr from NZ = 33 up, docs/performance-iter-next.md
    section 9)."""
    v = _numerics(model, "linsys", "auto")
    return "batched_cr" if v == "auto" else v


def linsys_graph(model) -> bool:
    """numerics.linsys_graph: the cupy batched_cr solve replayed from a CUDA graph (default true)."""
    return bool(model.cfg.get("numerics", {}).get("linsys_graph", True))


def iter_graph(model, backend) -> bool:
    """numerics.iter_graph: POTENTIAL's kept-Jacobian Newton iterations replayed from CUDA graphs
    (phase newton_iteration; auto = on for cupy and numba (there one call per iteration with the serial
    NumPy pieces in numba, kernels/numba/iter.py), false = the phases one by one)."""
    v = model.cfg.get("numerics", {}).get("iter_graph", "auto")
    if v == "auto":
        return backend.name in ("cupy", "numba")
    return bool(v)


def iter_overlap(model, backend) -> bool:
    """numerics.iter_overlap: the start's eigenpairs of each stage's first kept-Jacobian iteration
    launched on a second stream during the stage's BTE (phase iter_prologue, kernels/cuda/iter_graph.py
    Early; the same bits); only where numerics.iter_graph is on (its ``stage`` graph takes them);
    auto = off (measured: no shorter step, docs/performance-iter-overlap.md)."""
    v = model.cfg.get("numerics", {}).get("iter_overlap", "auto")
    if not iter_graph(model, backend) or v == "auto":
        return False
    return bool(v)


def bte_speculate(model, backend) -> bool:
    """numerics.bte_speculate: the next RK stage's BTE launched inside ITER before its host read (Simulation.step,
    poisson.newton_iteration's ``before_read``); only with numerics.iter_graph on and numerics.overlap, iter_overlap
    off; auto = on for cupy."""
    v = model.cfg.get("numerics", {}).get("bte_speculate", "auto")
    on = backend.name == "cupy" if v == "auto" else v is True
    return (on and iter_graph(model, backend) and not iter_overlap(model, backend)
            and not model.cfg.get("numerics", {}).get("overlap", False))


def batched_blocks(model) -> str:
    """numerics.batched_blocks: how the cupy batched_cr solve solves its blocks (lu | gauss_jordan;
    auto = gauss_jordan where NZ <= blocktri.GJ_MAX_NZ, else lu)."""
    from solver.bsp.blocktri import GJ_MAX_NZ

    v = _numerics(model, "batched_blocks", "auto")
    if v == "auto":
        return "gauss_jordan" if model.NZ <= GJ_MAX_NZ else "lu"
    return v


def resolve_variant(model) -> str:
    """numerics.resolve: GaussJordanCR's resolve with the kept factorization (cupy, batched_blocks
    gauss_jordan): levels = kernels bcr_rhs / bcr_backsub per level (2 log2(NX) + 2 launches), fused =
    the persistent kernel bcr_resolve (one launch, the same bits); auto = fused."""
    v = _numerics(model, "resolve", "auto")
    return "fused" if v == "auto" else v


def eigen_variant(model) -> str:
    """The eigenvalue kernel of the GPU eigen phase (numerics.eigen; auto = twisted)."""
    v = _numerics(model, "eigen", "auto")
    return "twisted" if v == "auto" else v


def eigen_reciprocal(model) -> bool:
    """numerics.eigen_division (numerics.eigen = twisted): reciprocal (auto) = eigen_tw.cu's TW_RCP and
    TW_CARRY (one division per node, the reciprocal kept; ipim_t's x carried in registers), divide =
    the IEEE divisions of the first form (docs/performance-iter-eigen.md)."""
    return _numerics(model, "eigen_division", "auto") in ("auto", "reciprocal")


def ipim_variant(model) -> str:
    """The ipim kernel of the GPU eigen phase (numerics.ipim)."""
    return _numerics(model, "ipim", "a")


def bte_variant(model) -> str:
    """The cupy BTE kernels that run (numerics.bte_kernels: fast | fast2 | exact)."""
    return _numerics(model, "bte_kernels", "fast2")


def bte_fast(model) -> bool:
    """numerics.bte_kernels is fast or fast2: the fast paths of FAST_ONLY run and the WENO kernels are the
    fast build.  fast2 differs from fast only in the cupy fused stage kernel (RK_wphi: the w and phi faces
    with fewer FP64 operations, docs/performance-bte-kernels.md section 12) and the cupy x kernel (WENO_x, the
    same faces, section 13); everywhere else, and on every other backend, fast2 runs what fast runs."""
    return bte_variant(model) in ("fast", "fast2")


def wenox_kernel(model) -> str:
    """The cupy fast2 WENO_x kernel (numerics.wenox_kernel: tile = bsp_weno_dx_tile, the default since
    docs/performance-bte-kernels.md section 20.5, or walk = bsp_weno_dx: the same bits); walk's form runs wherever
    fast2's x kernel does not."""
    return _numerics(model, "wenox_kernel", "tile")


def _fast2_eps(model) -> bool:
    """numerics.weno_eps (default 1e-6) is at least FAST2_MIN_EPS: fast2's faces can run."""
    try:
        return float(model.cfg["numerics"]["weno_eps"]) >= FAST2_MIN_EPS
    except (KeyError, TypeError):
        return True


def _bte_label(model, backend, name: str) -> str:
    v = bte_variant(model)
    if v == "fast2" and not (backend.name == "cupy" and name in FAST2_PHASES):
        return "numerics.bte_kernels=fast2 (as fast)"
    if v == "fast2" and not _fast2_eps(model):
        return f"numerics.bte_kernels=fast2 (as fast: numerics.weno_eps below {FAST2_MIN_EPS:g})"
    if v == "fast2" and name == "WENO_x":
        k = wenox_kernel(model)
        kernel = "bsp_weno_dx_tile" if k == "tile" else "bsp_weno_dx"
        return f"numerics.bte_kernels=fast2, numerics.wenox_kernel={k} ({kernel})"
    return f"numerics.bte_kernels={v}"


def _variant(model, backend, name: str) -> str | None:
    if name in FAST_ONLY:  # gated by bte_kernels on every backend that has it
        return _bte_label(model, backend, name)
    if name == "newton_iteration":
        out = ("numerics.iter_graph=true; its iterations time ITER only: eigen, Frechet, construct_linsys "
               "and solve_linsys are not timed apart there")
        return out + (f"; numerics.resolve={resolve_variant(model)}" if backend.name == "cupy" else "")
    if name == "iter_prologue":
        return ("numerics.iter_overlap=true: the start's eigenpairs on a second stream during the BTE, "
                "timed as ITER_prologue there")
    if backend.name != "cupy":  # the variant keys choose among the CUDA kernels, except batched_cr
        return "numerics.linsys=batched_cr" if _array_variant(model, name) is not None else None
    if name in BTE_VARIANT_PHASES:
        return _bte_label(model, backend, name)
    if name in ("construct_linsys", "solve_linsys"):
        v = linsys_variant(model)
        if v == "batched_cr" and name == "solve_linsys":
            out = (f"numerics.linsys={v}, numerics.linsys_graph={str(linsys_graph(model)).lower()}, "
                   f"numerics.batched_blocks={batched_blocks(model)}")
            if batched_blocks(model) == "gauss_jordan":
                out += f", numerics.resolve={resolve_variant(model)}"
            return out
        return f"numerics.linsys={v}"
    if name == "eigen":
        if eigen_variant(model) == "twisted":
            div = "reciprocal" if eigen_reciprocal(model) else "divide"
            return f"numerics.eigen=twisted, eigen_division={div} (kernels eigenvalues_tw, ipim_t; numerics.ipim not used)"
        return f"numerics.eigen={eigen_variant(model)}, numerics.ipim={ipim_variant(model)}"
    return None


FUSED_INTO_RK_WPHI = ("WENO_w", "WENO_phi", "RK")  # phases bte.advance skips where RK_wphi has a fast path


def implementations(model, backend) -> dict:
    """{phase: the function that runs it (module.function) and, for a fast path, its variant}.
    Where RK_wphi has a fast path, WENO_w, WENO_phi and RK run inside it (bte.advance calls none of
    their own functions): they read "inside RK_wphi"."""
    out = {}
    for name, ref in REFERENCE.items():
        fast = lookup(model, backend, name)
        if fast is None:
            rule = _numerics(model, "contact_rule", "reference")
            out[name] = f"{ref} [contact_rule {rule}]" if name == "WENO_x" and rule != "reference" else ref
            continue
        desc = REGISTRY.describe(fast)
        variant = _variant(model, backend, name)
        out[name] = desc if variant is None else f"{desc} [{variant}]"
        if name == "WENO_x" and _numerics(model, "contact_rule", "reference") != "reference":
            out[name] += f" [contact_rule {_numerics(model, 'contact_rule', 'reference')}]"
    if lookup(model, backend, "RK_wphi") is not None:
        out.update(dict.fromkeys(FUSED_INTO_RK_WPHI, "inside RK_wphi"))
    return out
