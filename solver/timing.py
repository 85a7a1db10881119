"""Phase timers named as in the papers (BTE/WENO_x, ITER/eigen, ...).

On the GPU each phase is bracketed by CUDA events (read once per step, after one
synchronisation); on the CPU the backend is synchronised (a no-op) and ``perf_counter`` is
read.  Phases nest: ``with t.phase("BTE"): with t.phase("WENO_x")`` records ``BTE`` and
``BTE/WENO_x``.  ``end_step()`` closes a step and returns its ``{phase: seconds}``; totals and
call counts accumulate over the run.
"""
from __future__ import annotations

import time
from collections import defaultdict
from contextlib import contextmanager


class PhaseTimer:
    def __init__(self, backend=None, enabled: bool = True):
        self.backend = backend
        self.enabled = enabled
        self._gpu = bool(backend is not None and backend.is_gpu)
        self._stack: list[str] = []
        self._pending: list[tuple[str, object, object]] = []  # GPU event pairs of this step
        self._free: list = []  # GPU events read and free again (a pool: ~57 phases per step, two events each)
        self._step: dict[str, float] = defaultdict(float)
        self.totals: dict[str, float] = defaultdict(float)
        self.calls: dict[str, int] = defaultdict(int)
        self.steps: list[dict[str, float]] = []

    @contextmanager
    def phase(self, name: str):
        if not self.enabled:
            yield
            return
        self._stack.append(name)
        key = "/".join(self._stack)
        try:
            if self._gpu:
                cp = self.backend.xp
                free = self._free
                start = free.pop() if free else cp.cuda.Event()
                stop = free.pop() if free else cp.cuda.Event()
                start.record()
                yield
                stop.record()
                self._pending.append((key, start, stop))
            else:
                if self.backend is not None:
                    self.backend.synchronize()
                t0 = time.perf_counter()
                yield
                if self.backend is not None:
                    self.backend.synchronize()
                self._step[key] += time.perf_counter() - t0
            self.calls[key] += 1
        finally:
            self._stack.pop()

    def _flush(self) -> None:
        if self._pending:
            cp = self.backend.xp
            self._pending[-1][2].synchronize()  # the last recorded: the events before it on its stream are done
            for key, start, stop in self._pending:
                try:
                    ms = cp.cuda.get_elapsed_time(start, stop)
                except cp.cuda.runtime.CUDARuntimeError:  # not ready (recorded on another stream)
                    stop.synchronize()
                    ms = cp.cuda.get_elapsed_time(start, stop)
                self._step[key] += ms * 1e-3
                self._free += (start, stop)
            self._pending.clear()

    def end_step(self) -> dict[str, float]:
        """Close the current step; return its phase times in seconds."""
        self._flush()
        step = dict(self._step)
        for k, v in step.items():
            self.totals[k] += v
        self.steps.append(step)
        self._step = defaultdict(float)
        return step

    def summary(self) -> dict:
        """Totals, means per recorded step and call counts, for the run record."""
        self._flush()
        n = max(len(self.steps), 1)
        return {
            "steps": len(self.steps),
            "total_s": dict(self.totals),
            "mean_per_step_s": {k: v / n for k, v in self.totals.items()},
            "calls": dict(self.calls),
        }


@contextmanager
def wall_timer(out: dict, key: str, backend=None):
    """Small helper: time one block into ``out[key]`` (seconds), synchronising the backend."""
    if backend is not None:
        backend.synchronize()
    t0 = time.perf_counter()
    yield
    if backend is not None:
        backend.synchronize()
    out[key] = time.perf_counter() - t0
