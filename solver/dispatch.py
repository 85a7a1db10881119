"""One dispatch convention for every study: a table per backend, ``name -> function``.

Each study that has fast paths keeps one ``Registry`` (for example ``solver.bsp.kernels.REGISTRY``)
built from plain imports, one loader per backend::

    def _cupy():
        from solver.bsp.kernels.cuda import TABLE   # plain imports, no namespace merging
        return TABLE

    REGISTRY = Registry("bsp", {"cupy": _cupy, "numba": _numba})
    fast = REGISTRY.lookup("cupy", "WENO_x")        # the function, or None (array reference)

Only a missing optional package (CuPy, numba) means "no fast path": the loader's
``ModuleNotFoundError`` for that package is turned into an empty table.  Any other import error
(a syntax error, a missing file of the package itself, a wrong name) propagates: a broken fast
path fails loudly instead of silently falling back to the reference.
"""
from __future__ import annotations

from typing import Callable

OPTIONAL = frozenset({"cupy", "cupyx", "numba", "llvmlite"})


def _missing_optional(exc: ModuleNotFoundError) -> bool:
    """The optional package itself is missing (not a submodule of an installed one: a broken
    CuPy or numba install fails loudly)."""
    return exc.name in OPTIONAL


class Registry:
    """The fast-path tables of one study: ``{backend name: {phase name: function}}``."""

    def __init__(self, study: str, loaders: dict[str, Callable[[], dict]]):
        self.study = study
        self.loaders = dict(loaders)
        self._tables: dict[str, dict] = {}

    def table(self, backend_name: str) -> dict:
        """The table of a backend ({} when it has none or its optional package is missing)."""
        if backend_name not in self._tables:
            loader = self.loaders.get(backend_name)
            if loader is None:
                table = {}
            else:
                try:
                    table = dict(loader())
                except ModuleNotFoundError as exc:
                    if not _missing_optional(exc):
                        raise
                    table = {}
            self._tables[backend_name] = table
        return self._tables[backend_name]

    def lookup(self, backend_name: str, name: str):
        """The fast path ``name`` of a backend, or None."""
        return self.table(backend_name).get(name)

    def names(self, backend_name: str) -> list[str]:
        return sorted(self.table(backend_name))

    def describe(self, fn) -> str:
        """``module.function`` of a fast path, for run records."""
        return f"{fn.__module__}.{getattr(fn, '__qualname__', getattr(fn, '__name__', repr(fn)))}"
