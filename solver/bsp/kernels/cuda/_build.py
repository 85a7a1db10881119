"""Compile, cache and launch the CUDA sources of this folder (the only module that does).

``function(source, kernel, options, defines)``: kernel ``kernel`` of the ``.cu`` file ``source``
(beside this module, read with importlib.resources) compiled by CuPy (NVRTC) with ``options``
and the ``-D`` ``defines``.  A compiled module is kept per (source, options, defines) for the
life of the process (CuPy also keeps the binaries on disk).  ``launch`` runs one launch of
ceil(nthreads / block) blocks.
"""
from __future__ import annotations

import importlib.resources

import cupy as cp

_SOURCES = importlib.resources.files(__package__)  # this package's folder (as package data)
_modules: dict = {}


def source(name: str) -> str:
    """The text of the CUDA source ``name`` of this package."""
    return _SOURCES.joinpath(name).read_text()


def module(name: str, options=(), defines=None):
    """The compiled RawModule of source ``name`` (cached)."""
    defs = tuple(sorted((defines or {}).items()))
    key = (name, tuple(options), defs)
    if key not in _modules:
        opts = tuple(options) + tuple(f"-D{k}={v}" for k, v in defs)
        _modules[key] = cp.RawModule(code=source(name), options=opts)
    return _modules[key]


def function(name: str, kernel: str, options=(), defines=None):
    """Kernel ``kernel`` of source ``name``."""
    return module(name, options, defines).get_function(kernel)


def launch(fn, nthreads: int, block: int, args) -> None:
    """Launch ``fn`` over ``nthreads`` threads in blocks of ``block`` (nothing for nthreads <= 0)."""
    if nthreads <= 0:
        return
    fn(((int(nthreads) + block - 1) // block,), (block,), args)
