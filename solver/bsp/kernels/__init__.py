"""Hand-written fast paths beside the array reference (docs/developing.md, "kernels").

Every BTE/ITER function that has a fast path looks it up here by name::

    fast = kernels.lookup(model, backend, "gain")
    if fast is not None:
        return fast(model, backend, PhiHat, eps, W, mechanisms)
    ... array reference ...

A fast path takes exactly the arguments of the array function it replaces and returns the same
result (to rounding).  The modules are per backend: ``cuda`` (CuPy RawKernel/ElementwiseKernel,
backend "cupy") and ``numba_cpu`` (numba njit/prange, backend "numba").  A module is imported on
first use only, so the package imports without CuPy or numba.  The config switch
``numerics.kernels`` chooses: ``auto`` (default) = the fast path where one exists, ``array`` =
the array reference everywhere (the test oracle).  Tests compare the two.
"""
from __future__ import annotations

import importlib

MODULES = {"cupy": "solver.bsp.kernels.cuda", "numba": "solver.bsp.kernels.numba_cpu"}
_loaded: dict = {}


def module_for(backend_name: str):
    """The fast-path module of a backend, or None (none exists or it cannot be imported)."""
    name = MODULES.get(backend_name)
    if name is None:
        return None
    if name not in _loaded:
        try:
            _loaded[name] = importlib.import_module(name)
        except ImportError:
            _loaded[name] = None
    return _loaded[name]


def mode(model) -> str:
    return str(model.cfg.get("numerics", {}).get("kernels", "auto"))


def lookup(model, backend, name: str):
    """The fast path ``name`` for this model's backend, or None (use the array reference)."""
    if mode(model) == "array":
        return None
    mod = module_for(backend.name)
    return None if mod is None else getattr(mod, name, None)


def available(backend_name: str) -> list[str]:
    """Names of the fast paths a backend has (for run records and docs)."""
    mod = module_for(backend_name)
    if mod is None:
        return []
    return sorted(n for n in getattr(mod, "__all__", []) if callable(getattr(mod, n, None)))
