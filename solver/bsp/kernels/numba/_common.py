"""Helpers of the numba fast paths: the thread count, small per-model host constants and reusable
output arrays."""
from __future__ import annotations

import sys

import numba
import numpy as np

_POOL_SIZE = 4  # output arrays kept per key (the RK output: Phi^0, Phi^s and Phi^{s+1} may all be alive)


def set_threads(backend) -> None:
    """Set numba's thread count to ``backend.threads`` (get_backend("numba", threads=N)) on every
    call, so that two backends with different counts in one process each get their own."""
    n = int(getattr(backend, "threads", 0) or numba.config.NUMBA_NUM_THREADS)
    n = max(1, min(n, numba.config.NUMBA_NUM_THREADS))
    if numba.get_num_threads() != n:
        numba.set_num_threads(n)


def cached(model, key, build):
    """A small host constant per model (in model.device_cache beside the backend copies)."""
    k = ("numba", key)
    cache = model.device_cache
    if k not in cache:
        cache[k] = build()
    return cache[k]


def _free_refcount() -> int:
    """sys.getrefcount of a pooled array that nothing outside the pool holds, as out_array's loop
    sees it (pool list + loop variable + getrefcount's argument on CPython <= 3.13; one fewer where
    locals are borrowed references, CPython 3.14): measured once, not assumed."""
    pool = [np.empty(0)]
    for a in pool:
        return sys.getrefcount(a)
    raise AssertionError("unreachable")


_FREE_REFS = _free_refcount()


def out_array(model, key, shape, pool_size=_POOL_SIZE):
    """An uninitialised float64 output array of ``shape`` for the fast path ``key``: one of the
    model's earlier outputs of that key that nothing outside the pool references any more, else a
    new one (kept if the pool has room).  A fresh array of Phi's size costs its first-touch page
    faults on every call (~30 ms per 135 MB at one thread); a reused one does not.  An array is
    handed out again only when its reference count shows no holder besides the pool (views hold
    their base), so a result the caller still keeps is never overwritten.  ``pool_size``: the arrays
    kept for the key (at least as many as the caller may hold at once, else the extra ones are fresh)."""
    pool = cached(model, "out:" + key, list)
    for a in pool:
        if a.shape == shape and sys.getrefcount(a) <= _FREE_REFS:  # no holder outside the pool
            return a
    a = np.empty(shape)
    if len(pool) < pool_size:
        pool.append(a)
    return a
