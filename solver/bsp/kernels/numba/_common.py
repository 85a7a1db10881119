"""Helpers of the numba fast paths: the thread count and small per-model host constants."""
from __future__ import annotations

import numba


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
