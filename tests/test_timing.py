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


def test_max_depth_records_the_phases_and_no_events_for_the_kernels():
    """max_depth 2 (output.timers: phases): step, step/BTE, step/ITER recorded as under max_depth None, the kernels
    under them not recorded and given no events; an aside inside an unrecorded kernel pauses the recorded ITER and
    is its sibling; its own kernels are not recorded either."""
    be, clock = _fake_backend()
    tm = PhaseTimer(be, max_depth=2)
    with tm.phase("step"):  # 1
        with tm.phase("BTE"):  # 2
            with tm.phase("WENO_x"):  # no event
                clock["t"] += 10.0
                with tm.phase("inner"):
                    pass
        # BTE stop 13
        with tm.phase("ITER"):  # 14
            with tm.phase("eigen"):
                clock["t"] += 5.0
                with tm.aside("BTE"):  # ITER cut 20, BTE start 21
                    with tm.phase("overlap"):  # not recorded
                        clock["t"] += 100.0
                # BTE stop 122, ITER start 123
            clock["t"] += 1.0
        # ITER stop 125, step stop 126
    out = tm.end_step()
    assert out == pytest.approx({"step": 125e-3, "step/BTE": 11e-3 + 101e-3, "step/ITER": 6e-3 + 2e-3})
    assert clock["created"] == 10  # step, BTE, ITER, the aside's BTE: two events each; ITER's second interval: 2
    assert dict(tm.calls) == {"step": 1, "step/BTE": 2, "step/ITER": 1}
    assert tm._stack == [] and tm._open == [] and tm._skip == 0


def test_output_timers_phases_times_the_phases_and_changes_no_result(tmp_path):
    """output.timers: phases on a run: the same scalars, profiles and configuration hash as kernels; the timers hold
    step, step/BTE, step/DENS and step/ITER only."""
    from solver import provenance
    from solver.backend import get_backend
    from solver.bsp.model import load
    from solver.bsp.simulation import Simulation

    res = {}
    for mode in ("kernels", "phases"):
        cfg = load("config/bsp/dgmosfet.yaml", ["mesh.N_sbn=3", "mesh.NX=9", "mesh.NZ=9", "mesh.NW=12", "mesh.NPHI=8",
                                                "time.steps=3", "time.t_end_ps=null", f"output.timers={mode}"])
        sim = Simulation(cfg, get_backend("numpy"), out_dir=tmp_path / mode)
        sim.run()
        res[mode] = (sim, provenance.config_hash(cfg))
    (a, ha), (b, hb) = res["kernels"], res["phases"]
    assert ha == hb
    for f in ("scalars.csv", "profiles.csv"):
        assert (tmp_path / "kernels" / f).read_bytes() == (tmp_path / "phases" / f).read_bytes(), f
    assert set(b.timer.calls) == {"step", "step/BTE", "step/DENS", "step/ITER"}
    assert {"step/BTE/WENO_x", "step/ITER/eigen"} <= set(a.timer.calls)
    assert {k: a.timer.calls[k] for k in b.timer.calls} == dict(b.timer.calls)
