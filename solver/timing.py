"""Phase timers named as in the papers (BTE/WENO_x, ITER/eigen, ...).

On the GPU each phase is bracketed by CUDA events (read once per step, after one
synchronisation); on the CPU the backend is synchronised (a no-op) and ``perf_counter`` is
read.  Phases nest: ``with t.phase("BTE"): with t.phase("WENO_x")`` records ``BTE`` and
``BTE/WENO_x``.  ``end_step()`` closes a step and returns its ``{phase: seconds}``; totals and
call counts accumulate over the run.  ``aside(name)`` inside an open phase times a block as that phase's
sibling: the open phase's interval stops before the block and starts again after it (a phase may so
hold several intervals; they add up), so work enqueued in the middle of a phase (numerics.bte_speculate:
the next stage's BTE launched inside ITER, before ITER's host read) is booked under its own name.
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
        self._open: list[list] = []  # per open phase: [its interval's start] (a GPU event or perf_counter)
        self._pending: list[tuple[str, object, object]] = []  # GPU event pairs of this step
        self._free: list = []  # GPU events read and free again (a pool: ~26 phases per standard step, two events each)
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
        slot = [self._mark()]
        self._open.append(slot)
        try:
            yield
            self._close(key, slot[0])
            self.calls[key] += 1
        finally:
            self._open.pop()
            self._stack.pop()

    @contextmanager
    def aside(self, name: str):
        """Time the block as phase ``name`` beside the innermost open phase (whose interval pauses for it);
        outside any phase, as ``phase(name)``."""
        if not (self.enabled and self._stack):
            with self.phase(name):
                yield
            return
        inner, slot = self._stack.pop(), self._open.pop()
        self._close("/".join(self._stack + [inner]), slot[0])
        try:
            with self.phase(name):
                yield
        finally:
            slot[0] = self._mark()
            self._stack.append(inner)
            self._open.append(slot)

    def _mark(self):
        """An interval's start: a recorded GPU event, else the time after a synchronisation."""
        if self._gpu:
            free = self._free
            ev = free.pop() if free else self.backend.xp.cuda.Event()
            ev.record()
            return ev
        if self.backend is not None:
            self.backend.synchronize()
        return time.perf_counter()

    def _close(self, key: str, start) -> None:
        if self._gpu:
            free = self._free
            stop = free.pop() if free else self.backend.xp.cuda.Event()
            stop.record()
            self._pending.append((key, start, stop))
        else:
            if self.backend is not None:
                self.backend.synchronize()
            self._step[key] += time.perf_counter() - start

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
