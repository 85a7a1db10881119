"""Compile, cache and launch the CUDA sources of this folder (the only module that does).

``function(source, kernel, options, defines)``: kernel ``kernel`` of the ``.cu`` file ``source``
(beside this module, read with importlib.resources) compiled by CuPy (NVRTC) with ``options``
and the ``-D`` ``defines``.  A compiled module is kept per (source, options, defines) for the
life of the process (CuPy also keeps the binaries on disk).  ``launch`` runs one launch of
ceil(nthreads / block) blocks.

``precompile(specs)`` (start-up, docs/performance-startup.md round 3): compiles the modules of
``specs`` (source, options, defines) in background threads, one per module, which run in
parallel since CuPy's NVRTC call releases the GIL; a ``module`` call for one of them waits for its
thread instead of compiling it again.  The modules are the same, so are the results.  Its ``jobs``
(the start-up's CuPy warm-up, solver/bsp/warm.py) run in the same threads; every CUDA graph capture
calls ``wait_jobs`` first, so no such thread launches during a capture.  The start-up
takes each of its precompiled modules before its first CUDA graph capture (the batched Newton solver
takes its modules when it is built, before it captures), so no thread loads a module during a capture.
"""
from __future__ import annotations

import importlib.resources
import os
import re
import threading
from concurrent.futures import ThreadPoolExecutor

import cupy as cp

_SOURCES = importlib.resources.files(__package__)  # this package's folder (as package data)
_modules: dict = {}
_pending: dict = {}  # key -> Future of the module a precompile thread builds
_jobs: list = []  # Futures of precompile's jobs not yet waited for
_lock = threading.Lock()


_D2D = 3  # cudaMemcpyDeviceToDevice


def put(dst, src):
    """dst[...] = src on the current stream (one cudaMemcpyAsync for a float64 C-contiguous src):
    the graphs' fixed input buffers (bte_graph, iter_graph) filled before a replay."""
    if src.dtype == dst.dtype and src.shape == dst.shape and src.flags.c_contiguous:
        if src.data.ptr != dst.data.ptr:
            cp.cuda.runtime.memcpyAsync(dst.data.ptr, src.data.ptr, dst.nbytes, _D2D,
                                        cp.cuda.get_current_stream().ptr)
    else:
        dst[...] = src


def source(name: str) -> str:
    """The text of the CUDA source ``name`` of this package."""
    return _SOURCES.joinpath(name).read_text()


def define(name: str, macro: str) -> int:
    """The integer of ``#define macro <int>`` in the CUDA source ``name`` (exactly one such line): a
    launcher's copy of a size the kernel is built with, read from the one place it is set."""
    found = re.findall(rf"^[ \t]*#[ \t]*define[ \t]+{re.escape(macro)}[ \t]+(\d+)\b", source(name), re.MULTILINE)
    if len(found) != 1:
        raise ValueError(f"{name}: {len(found)} lines '#define {macro} <int>', expected one")
    return int(found[0])


def _key(name: str, options=(), defines=None) -> tuple:
    return (name, tuple(options), tuple(sorted((defines or {}).items())))


def _raw(key: tuple):
    name, options, defs = key
    return cp.RawModule(code=source(name), options=tuple(options) + tuple(f"-D{k}={v}" for k, v in defs))


def module(name: str, options=(), defines=None):
    """The compiled RawModule of source ``name`` (cached)."""
    key = _key(name, options, defines)
    mod = _modules.get(key)
    if mod is None:
        with _lock:
            fut = _pending.pop(key, None)
        mod = fut.result() if fut is not None else _raw(key)  # (a failed precompile raises here)
        _modules[key] = mod
    return mod


def precompile(specs, jobs=()) -> int:
    """Compile the modules of ``specs`` ((source, options, defines) each) in background threads on
    the current device, and run the callables ``jobs`` there too, after them in the queue (the start-up's
    CuPy warm-up, solver/bsp/warm.py; ``wait_jobs`` waits for them); returns how many modules it started
    (those not built or building already)."""
    keys = []
    with _lock:
        for s in specs:
            k = _key(*s)
            if k not in _modules and k not in _pending and k not in keys:
                keys.append(k)
        jobs = list(jobs)
        if not keys and not jobs:
            return 0
        device = cp.cuda.Device().id
        pool = ThreadPoolExecutor(max_workers=min(len(keys) + len(jobs), os.cpu_count() or 1),
                                  thread_name_prefix="nvrtc")

        def build(key):
            with cp.cuda.Device(device):
                mod = _raw(key)
                mod.compile()  # NVRTC (or CuPy's disk cache) and the module load, kept by CuPy per device
                return mod

        def run(job):
            with cp.cuda.Device(device):
                job()
                cp.cuda.get_current_stream().synchronize()  # its launches done before the start-up goes on

        for k in keys:
            _pending[k] = pool.submit(build, k)
        for j in jobs:
            _jobs.append(pool.submit(run, j))
        pool.shutdown(wait=False)  # the threads end with their queue
    return len(keys)


def wait_jobs() -> None:
    """Wait for precompile's jobs; a job's error is raised here (the run would meet it too)."""
    with _lock:
        futs = list(_jobs)
        _jobs.clear()
    for f in futs:
        f.result()


def function(name: str, kernel: str, options=(), defines=None):
    """Kernel ``kernel`` of source ``name``."""
    return module(name, options, defines).get_function(kernel)


def launch(fn, nthreads: int, block: int, args) -> None:
    """Launch ``fn`` over ``nthreads`` threads in blocks of ``block`` (nothing for nthreads <= 0)."""
    if nthreads <= 0:
        return
    fn(((int(nthreads) + block - 1) // block,), (block,), args)
