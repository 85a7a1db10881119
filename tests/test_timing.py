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
    be, clock = _fake_backend(not_ready={3})  # BTE's stop (created third: a start at entry, a stop at exit)
    tm = PhaseTimer(be)
    out = _step(tm)
    assert out["step/BTE"] == pytest.approx(1e-3)
    assert clock["synced"] == 2  # the last event of the step, then the one not ready


def test_aside_pauses_the_open_phase_for_a_sibling_gpu():
    """aside: the open phase's interval stops before the block and starts again after it; the block is timed
    as the sibling (numerics.bte_speculate: the next stage's BTE launched inside ITER)."""
    be, clock = _fake_backend()
    tm = PhaseTimer(be)
    with tm.phase("step"):  # record 1
        with tm.phase("ITER"):  # 2
            clock["t"] += 10.0  # ITER's work before the aside: 11 ms by the stand-in clock
            with tm.aside("BTE"):  # ITER's cut 13, BTE start 14 (clock +1 each record)
                clock["t"] += 100.0
                with tm.phase("overlap"):  # 115 .. 116
                    pass
                # BTE stop 117; ITER starts again 118
            clock["t"] += 5.0
        # ITER stop 124, step stop 125
    out = tm.end_step()
    assert out == pytest.approx({"step": 124e-3, "step/ITER": 11e-3 + 6e-3, "step/BTE": 103e-3,
                                 "step/BTE/overlap": 1e-3})
    assert tm.calls["step/ITER"] == 1 and tm.calls["step/BTE"] == 1 and tm._stack == [] and tm._open == []


def test_aside_on_the_cpu_and_outside_any_phase():
    import time as _time
    tm = PhaseTimer(None)
    with tm.phase("step"):
        with tm.phase("ITER"):
            with tm.aside("BTE"):
                _time.sleep(0.05)
    with tm.aside("alone"):
        pass
    out = tm.end_step()
    assert out["step/BTE"] >= 0.05 and out["step/ITER"] < 0.02 and out["step"] >= 0.05
    assert "alone" in out and tm._stack == []
