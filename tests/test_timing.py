"""solver.timing.PhaseTimer on a stand-in GPU backend: CUDA events from a pool (created once, reused
after they are read), the elapsed times per phase, and the fallback for an event not yet ready."""
import types

import pytest

from solver.timing import PhaseTimer


class _Err(RuntimeError):
    pass


def _fake_backend(not_ready=()):
    clock = {"t": 0.0, "created": 0, "synced": 0}

    class Event:
        def __init__(self):
            clock["created"] += 1
            self.id = clock["created"]
            self.t = None
            self.ready = True

        def record(self):
            clock["t"] += 1.0
            self.t = clock["t"]
            self.ready = self.id not in not_ready

        def synchronize(self):
            clock["synced"] += 1
            self.ready = True

    def get_elapsed_time(a, b):
        if not b.ready:
            raise _Err("cudaErrorNotReady")
        return b.t - a.t  # ms

    cuda = types.SimpleNamespace(Event=Event, get_elapsed_time=get_elapsed_time,
                                 runtime=types.SimpleNamespace(CUDARuntimeError=_Err))
    be = types.SimpleNamespace(is_gpu=True, xp=types.SimpleNamespace(cuda=cuda))
    return be, clock


def _step(tm):
    with tm.phase("step"):
        with tm.phase("BTE"):
            pass
        with tm.phase("ITER"):
            pass
    return tm.end_step()


def test_gpu_timer_reuses_its_events_and_times_each_phase():
    be, clock = _fake_backend()
    tm = PhaseTimer(be)
    first = _step(tm)
    assert clock["created"] == 6  # two per phase
    # record order: step start 1, BTE 2-3, ITER 4-5, step stop 6 (ms)
    assert first == pytest.approx({"step": 5e-3, "step/BTE": 1e-3, "step/ITER": 1e-3})
    for _ in range(3):
        again = _step(tm)
        assert again == pytest.approx(first)
    assert clock["created"] == 6  # the pool: no new event after the first step
    assert tm.calls["step/BTE"] == 4 and tm.totals["step"] == pytest.approx(4 * 5e-3)


def test_gpu_timer_waits_for_an_event_that_is_not_ready():
    be, clock = _fake_backend(not_ready={4})  # BTE's stop (created fourth) reports not ready
    tm = PhaseTimer(be)
    out = _step(tm)
    assert out["step/BTE"] == pytest.approx(1e-3)
    assert clock["synced"] == 2  # the last event of the step, then the one not ready
