"""A BSP run's folder, memory and faults (issue 17): another configuration's run is refused unless
--overwrite (then cleaned), snapshots carry the configuration hash, a mesh too large for memory is
refused before allocation, the ETA waits for a few timed steps (also after a resume), and a fault
in a step (NaN/Inf, negative density, Newton failure) stops with step, stage and phase named,
keeping the last good checkpoint, exit code 3; with output.on_fault = record the fault also leaves
run.json (summary.status fault), scalars.csv and a fault-marker final_state.h5."""
import io as _io
import json
import tracemalloc
import warnings
from types import SimpleNamespace

import h5py
import numpy as np
import pandas as pd
import pytest

from solver import provenance
from solver.backend import get_backend
from solver.bsp import poisson, simulation
from solver.bsp.model import check_memory, load, memory_need_bytes
from solver.bsp.simulation import CHECKPOINT, Progress, Simulation
from solver.cli import main
from solver.config import ConfigError, RunFault

from _faults import negative_rho, nth_call

TINY = ["mesh.N_sbn=3", "mesh.NX=9", "mesh.NZ=13", "mesh.NW=12", "mesh.NPHI=8",
        "output.progress=false", "numerics.backend=numpy", "time.t_end_ps=null"]


def cfg_of(*extra, steps=2):
    return load(None, TINY + [f"time.steps={steps}"] + list(extra))


def sim_of(cfg, out):
    return Simulation(cfg, get_backend("numpy"), out, progress=False, log=_io.StringIO())


def _hashes(folder):
    out = set()
    for p in [folder / "fields.h5", *sorted((folder / "snapshots").glob("*.h5"))]:
        with h5py.File(p, "r") as f:
            out.add(str(f.attrs["config_hash"]))
    return out


# ------------------------------------------------------------------------------ run folder
def test_another_configuration_is_refused_unless_overwrite(tmp_path):
    a, b = cfg_of(), cfg_of("bias.V_DS=0.05")
    sim_of(a, tmp_path).run()
    ha, hb = provenance.config_hash(a), provenance.config_hash(b)
    assert _hashes(tmp_path) == {ha} and len(list((tmp_path / "snapshots").glob("*.h5"))) == 2
    (tmp_path / "notes.txt").write_text("mine")
    before = sorted(p.name for p in tmp_path.rglob("*"))
    with pytest.raises(ConfigError, match=f"another configuration \\(config hash {ha}; this one is {hb}\\)"):
        sim_of(b, tmp_path).run()
    assert sorted(p.name for p in tmp_path.rglob("*")) == before
    # the same configuration again is no conflict
    sim_of(a, tmp_path).run()
    # --overwrite: the old run's files go (the old snapshot of step 2 too), the user's file stays
    sim_of(b, tmp_path).run(overwrite=True)
    assert _hashes(tmp_path) == {hb}
    assert provenance.config_hash(b) == __import__("json").loads((tmp_path / "run.json").read_text())["config_hash"]
    assert (tmp_path / "notes.txt").read_text() == "mine"


def test_cli_overwrite_option(tmp_path, capsys):
    cfg = tmp_path / "c.yaml"
    cfg.write_text("mesh: {N_sbn: 3, NX: 9, NZ: 13, NW: 12, NPHI: 8}\ntime: {steps: 1, t_end_ps: null}\n")
    out = str(tmp_path / "out")
    assert main(["run", str(cfg), "--out", out, "--no-progress"]) == 0
    assert (tmp_path / "out" / "quicklook.png").read_bytes()[:4] == b"\x89PNG"
    assert main(["run", str(cfg), "--out", out, "--no-progress", "--set", "bias.V_DS=0.05"]) == 2
    assert "--overwrite" in capsys.readouterr().err
    assert main(["run", str(cfg), "--out", out, "--no-progress", "--set", "bias.V_DS=0.05", "--overwrite"]) == 0


# ------------------------------------------------------------------------------ memory
def test_memory_estimate_is_the_workflows():
    cfg = load(None, ["mesh.N_sbn=6", "mesh.NX=33", "mesh.NZ=33", "mesh.NW=150", "mesh.NPHI=24"])
    assert memory_need_bytes(cfg) == 16 * 8 * 6 * 3 * 33 * 150 * 24


def test_huge_mesh_is_refused_before_allocation():
    cfg = cfg_of("mesh.NX=8193", "mesh.NW=20000", "mesh.NPHI=1024")
    tracemalloc.start()
    try:
        with pytest.raises(ConfigError, match=r"'mesh': 3x8193x13x20000x1024 needs about 180022\.0 GiB .* host memory"):
            Simulation(cfg, get_backend("numpy"), None, progress=False)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 50 * 2**20


def test_gpu_memory_is_asked_of_cupy():
    runtime = SimpleNamespace(memGetInfo=lambda: (2 * 2**30, 80 * 2**30))
    gpu = SimpleNamespace(is_gpu=True, xp=SimpleNamespace(cuda=SimpleNamespace(runtime=runtime)))
    small, big = cfg_of(), cfg_of("mesh.NX=513", "mesh.NW=600", "mesh.NPHI=96")
    check_memory(small, gpu)
    with pytest.raises(ConfigError, match="but 2.0 GiB of free GPU memory is left"):
        check_memory(big, gpu)


# ------------------------------------------------------------------------------ ETA
def _progress(step, max_steps=100):
    sim = SimpleNamespace(log=_io.StringIO(), state=SimpleNamespace(step=step, t=0.0), max_steps=max_steps,
                          t_end=float("inf"))
    return sim, Progress(sim, enabled=True)


def test_eta_waits_for_timed_steps():
    sim, bar = _progress(0)
    for step, now, text in [(1, 100.0, "ETA after step 4"), (2, 101.0, "ETA after step 4"),
                            (3, 102.0, "ETA after step 4"), (4, 103.0, "~96 s left")]:
        sim.state.step = step
        assert bar.eta(now, step / 100) == text  # 1 s per step after the first: 96 steps left


def test_eta_after_resume_counts_the_resumed_steps_only():
    sim, bar = _progress(50)
    sim.state.step = 51
    assert bar.eta(1000.0, 0.51) == "ETA after step 54"
    sim.state.step = 54
    assert bar.eta(1006.0, 0.54) == "~92 s left"  # 2 s per step, 46 steps left


# ------------------------------------------------------------------------------ faults
def _nan_phi(orig, *a, **k):
    Phi, dn = orig(*a, **k)
    Phi = Phi.copy()
    Phi[0, 0, 0, 0, 0] = np.nan
    return Phi, dn


def _newton_fails(orig, *a, **k):
    raise poisson.ConvergenceError("POTENTIAL: Newton failed: no convergence in 50 iterations")


def _inf_v(orig, *a, **k):
    res = orig(*a, **k)
    res.V = res.V.copy()
    res.V[3, 3] = np.inf
    return res


# calls: bte.advance 3 per step; dens.dens once at start-up, then 3 per step; potential 3 per step
FAULTS = [
    ("bte", "advance", 4, _nan_phi, "step 2, RK stage 2, phase BTE: Phi holds NaN or Inf"),
    ("dens", "dens", 6, negative_rho, "step 2, RK stage 3, phase DENS: negative density (N_s summed over valleys and subbands = -"),
    ("poisson", "potential", 3, _newton_fails, "step 2, RK stage 1, phase ITER: Newton failed (POTENTIAL: Newton"),
    ("poisson", "potential", 5, _inf_v, "step 2, RK stage 3, phase ITER: the potential V holds NaN or Inf"),
]


@pytest.mark.parametrize("module,name,n,change,words", FAULTS, ids=[f[4].split(":")[1].strip() for f in FAULTS])
def test_fault_stops_with_step_stage_phase_and_keeps_checkpoint(module, name, n, change, words, tmp_path,
                                                                 monkeypatch, capsys):
    mod = getattr(simulation, module)
    monkeypatch.setattr(mod, name, nth_call(mod, name, n, change))
    cfg = tmp_path / "c.yaml"
    cfg.write_text("mesh: {N_sbn: 3, NX: 9, NZ: 13, NW: 12, NPHI: 8}\n"
                   "time: {steps: 3, t_end_ps: null}\noutput: {checkpoint_every_steps: 1}\n")
    out = tmp_path / "out"
    rc = main(["run", str(cfg), "--out", str(out), "--no-progress"])
    err = capsys.readouterr().err.splitlines()
    assert rc == 3
    assert len(err) == 1 and err[0].startswith("fault: ") and words in err[0], err
    assert f"the last good checkpoint {out / CHECKPOINT} (step 1) is kept" in err[0]
    with h5py.File(out / CHECKPOINT, "r") as f:
        assert int(f.attrs["step"]) == 1 and np.isfinite(f["Phi"][...]).all()
    assert not (out / "run.json").exists()


def test_fault_before_any_checkpoint_says_so(tmp_path, monkeypatch):
    monkeypatch.setattr(simulation.poisson, "potential", nth_call(simulation.poisson, "potential", 0, _newton_fails))
    with pytest.raises(RunFault, match="step 1, RK stage 1, phase ITER: .*; no checkpoint was written yet"):
        sim_of(cfg_of(), tmp_path).run()


def test_startup_newton_failure_is_a_fault(tmp_path, monkeypatch):
    monkeypatch.setattr(simulation.poisson, "initcond", nth_call(simulation.poisson, "initcond", 0, _newton_fails))
    with pytest.raises(RunFault, match=r"start-up \(INITCOND, THERMEQUIL\): Newton failed"):
        sim_of(cfg_of(), tmp_path).run()


@pytest.mark.parametrize("module,name,n,change,words", FAULTS, ids=[f[4].split(":")[1].strip() for f in FAULTS])
def test_deferred_density_check_names_the_same_fault(module, name, n, change, words, tmp_path, monkeypatch):
    """The GPU's order (Simulation._defer_check: the stage's density read after its ITER) on the
    NumPy path: every fault is reported as without it, a bad density before ITER's outcome."""
    mod = getattr(simulation, module)
    monkeypatch.setattr(mod, name, nth_call(mod, name, n, change))
    sim = sim_of(cfg_of(steps=3), tmp_path)
    sim._defer_check = True
    probes = []
    probe = sim._density_probe
    monkeypatch.setattr(sim, "_density_probe", lambda st: probes.append(1) or probe(st))
    with warnings.catch_warnings():  # ITER on a bad density may warn before the fault is read
        warnings.simplefilter("ignore")
        with pytest.raises(RunFault) as info:
            sim.run()
    assert words in str(info.value)
    assert len(probes) >= 3


def test_deferred_density_check_gives_the_same_bits(tmp_path):
    ref = sim_of(cfg_of(steps=2), tmp_path / "a")
    ref.run()
    dfr = sim_of(cfg_of(steps=2), tmp_path / "b")
    dfr._defer_check = True
    dfr.run()
    for f in ("scalars.csv", "profiles.csv"):
        assert (tmp_path / "a" / f).read_bytes() == (tmp_path / "b" / f).read_bytes()


# ------------------------------------------------------------------------------ output.on_fault
_FAULT_YAML = ("mesh: {N_sbn: 3, NX: 9, NZ: 13, NW: 12, NPHI: 8}\n"
               "time: {steps: 3, t_end_ps: null}\noutput: {checkpoint_every_steps: 1}\n"
               "steady: {enabled: true}\ncontinuation: {save_final_state: true}\n")


def _faulting_run(tmp_path, monkeypatch, *sets):
    """The CLI's run of _FAULT_YAML with a negative density at step 2, RK stage 3 (FAULTS' dens case)."""
    monkeypatch.setattr(simulation.dens, "dens", nth_call(simulation.dens, "dens", 6, negative_rho))
    cfg = tmp_path / "c.yaml"
    cfg.write_text(_FAULT_YAML)
    out = tmp_path / "out"
    rc = main(["run", str(cfg), "--out", str(out), "--no-progress", *[a for s in sets for a in ("--set", s)]])
    return rc, out


def test_on_fault_record_leaves_the_record(tmp_path, monkeypatch, capsys):
    """output.on_fault = record: run.json with summary.status fault and the fault's record, every scalars row
    so far, final_state.h5 a marker without state, the checkpoint kept; still 'fault: ...' and exit code 3;
    a run continued from it stops in one line naming the source run and its fault."""
    rc, out = _faulting_run(tmp_path, monkeypatch, "output.on_fault=record")
    err = capsys.readouterr().err.splitlines()
    assert rc == 3
    assert len(err) == 1 and err[0].startswith("fault: step 2, RK stage 3, phase DENS: negative density"), err
    rec = json.loads((out / "run.json").read_text())
    s = rec["summary"]
    assert s["status"] == "fault" and "status" not in rec
    f = s["fault"]
    assert f["message"] == err[0][len("fault: "):]
    assert f["step"] == 2 and f["phase"] == "DENS"
    sc = pd.read_csv(out / "scalars.csv")
    assert list(sc["step"]) == [0, 1]  # every row recorded before the fault
    assert f["t_ps"] == pytest.approx(sc["time_s"].iloc[-1] * 1e12, rel=1e-12)  # the last good state
    assert s["steps"] == 1 and s["t_end_s"] == pytest.approx(sc["time_s"].iloc[-1], rel=1e-12)
    assert s["mean_current_A_per_m"] == pytest.approx(sc["mean_current_A_per_m"].iloc[-1], rel=1e-11)
    assert s["steady"]["reached"] is False and s["steady"]["t_reached_ps"] is None
    assert rec["config"]["output"]["on_fault"] == "record"
    with h5py.File(out / simulation.FINAL_STATE, "r") as h:
        assert str(h.attrs["fault"]) == f["message"] and len(h.keys()) == 0
    with h5py.File(out / CHECKPOINT, "r") as h:  # kept, as with stop
        assert int(h.attrs["step"]) == 1
    assert not (out / "fields.h5").exists() and not (out / "profiles.csv").exists()
    # a run starting from it: one line, the source run and its fault (not the generic 'cannot read')
    monkeypatch.undo()
    with pytest.raises(ConfigError) as info:
        sim_of(cfg_of(f"continuation.init_from={out}"), tmp_path / "next").run()
    msg = str(info.value)
    assert "\n" not in msg and "continuation.init_from" in msg and str(out) in msg
    assert "numerical fault" in msg and "negative density" in msg and "cannot read" not in msg
    assert main(["run", "--out", str(tmp_path / "next2"), "--no-progress", "--set", f"continuation.init_from={out}",
                 *[a for s in TINY + ["time.steps=1"] for a in ("--set", s)]]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and "negative density" in err[0], err


def test_a_run_continued_from_a_faulted_run_records_the_source_fault(tmp_path, monkeypatch, capsys):
    """A chain of bias points (iv.continuation): under record, a run whose continuation.init_from names a
    faulted run records a fault of its own (phase continuation, step 0, the source's fault in
    summary.continuation), exit code 3 and a marker of its own, so the run after it is recorded the same way."""
    rc, src = _faulting_run(tmp_path, monkeypatch, "output.on_fault=record")
    assert rc == 3
    capsys.readouterr()
    monkeypatch.undo()
    prev = src
    for name in ("next", "after"):
        out = tmp_path / name
        args = ["run", "--out", str(out), "--no-progress", "--set", f"continuation.init_from={prev}",
                "--set", "output.on_fault=record", "--set", "continuation.save_final_state=true"]
        assert main(args + [a for x in TINY + ["time.steps=2"] for a in ("--set", x)]) == 3
        err = capsys.readouterr().err.splitlines()
        assert len(err) == 1 and err[0].startswith("fault: continuation: the source run") and str(prev) in err[0], err
        s = json.loads((out / "run.json").read_text())["summary"]
        assert s["status"] == "fault" and s["fault"]["phase"] == "continuation" and s["fault"]["step"] == 0
        assert s["continuation"]["init_from"] == str(prev)
        assert "negative density" in s["continuation"]["source_fault"]  # the first fault, down the chain
        assert list(pd.read_csv(out / "scalars.csv")["step"]) == [0]  # the start-up state's row
        with h5py.File(out / simulation.FINAL_STATE, "r") as h:
            assert "did not start" in str(h.attrs["fault"]) and len(h.keys()) == 0
        prev = out


@pytest.mark.parametrize("sets", [(), ("output.on_fault=stop",)], ids=["absent", "stop"])
def test_on_fault_stop_writes_no_record(sets, tmp_path, monkeypatch, capsys):
    rc, out = _faulting_run(tmp_path, monkeypatch, *sets)
    assert rc == 3 and capsys.readouterr().err.startswith("fault: step 2, RK stage 3, phase DENS")
    assert not (out / "run.json").exists() and not (out / "scalars.csv").exists()
    assert not (out / simulation.FINAL_STATE).exists() and (out / CHECKPOINT).exists()


def test_wenox_kernel_is_left_out_of_the_hash():
    """numerics.wenox_kernel (walk, tile: the same bits) is hash-neutral: its default moved from walk to tile, and a
    run folder checkpointed under either value, or before the key existed, stays this configuration's; a key that
    changes results still changes the hash."""
    base = cfg_of()
    assert base["numerics"]["wenox_kernel"] == "tile"
    absent = {**base, "numerics": {k: v for k, v in base["numerics"].items() if k != "wenox_kernel"}}
    hashes = {provenance.config_hash(c) for c in (base, absent, cfg_of("numerics.wenox_kernel=walk"))}
    assert len(hashes) == 1
    assert provenance.config_hash(cfg_of("numerics.weno_eps=1.0e-7")) not in hashes


def test_a_fault_stopped_run_resumes_under_record_and_records(tmp_path, monkeypatch, capsys):
    """on_fault is left out of the configuration hash: the folder of a run that faulted with stop (its
    checkpoint) is the same run's under record, which resumes from the checkpoint and records the fault."""
    assert provenance.config_hash(cfg_of()) == provenance.config_hash(cfg_of("output.on_fault=record"))
    rc, out = _faulting_run(tmp_path, monkeypatch)
    assert rc == 3 and not (out / "run.json").exists()
    monkeypatch.undo()
    # resumed at step 1: no start-up DENS, so the fault's DENS call (step 2, RK stage 3) is number 2
    monkeypatch.setattr(simulation.dens, "dens", nth_call(simulation.dens, "dens", 2, negative_rho))
    rc = main(["run", str(tmp_path / "c.yaml"), "--out", str(out), "--no-progress", "--set", "output.on_fault=record"])
    err = capsys.readouterr().err.splitlines()
    assert rc == 3 and err[-1].startswith("fault: step 2, RK stage 3, phase DENS"), err
    s = json.loads((out / "run.json").read_text())["summary"]
    assert s["status"] == "fault" and s["fault"]["step"] == 2
    assert list(pd.read_csv(out / "scalars.csv")["step"]) == [0, 1]  # the checkpoint's rows


def test_on_fault_record_leaves_a_normal_run_alone(tmp_path):
    """Without a fault, record changes no output (the configuration only); absent = stop, and absent
    leaves the resolved configuration as before the key."""
    assert "on_fault" not in cfg_of()["output"]
    a = sim_of(cfg_of(), tmp_path / "a").run()
    b = sim_of(cfg_of("output.on_fault=record"), tmp_path / "b").run()
    for f in ("scalars.csv", "profiles.csv", "profiles_t0.csv"):
        assert (tmp_path / "a" / f).read_bytes() == (tmp_path / "b" / f).read_bytes(), f
    drop = ("wall_s", "wall_s_run", "startup_s")
    assert {k: v for k, v in a["summary"].items() if k not in drop} == \
        {k: v for k, v in b["summary"].items() if k not in drop}
    assert "status" not in b["summary"] and "fault" not in b["summary"]


def test_on_fault_bad_value_names_the_key():
    with pytest.raises(ConfigError) as info:
        load(None, ["output.on_fault=continue"])
    msg = str(info.value)
    assert "\n" not in msg and msg.startswith("config key 'output.on_fault': 'continue' is not one of ['stop', 'record']")


def test_on_fault_record_removes_an_earlier_finished_runs_files(tmp_path, monkeypatch, capsys):
    """A fault record in a folder that holds a finished run of the same configuration (rerun without
    --overwrite, e.g. a workflow job that deletes only its declared outputs): the old run's fields.h5,
    profiles.csv and quicklook.png go, so that nothing of the folder reads as this run's result."""
    cfg = tmp_path / "c.yaml"
    cfg.write_text(_FAULT_YAML)
    out = tmp_path / "out"
    assert main(["run", str(cfg), "--out", str(out), "--no-progress"]) == 0
    assert all((out / f).exists() for f in ("fields.h5", "profiles.csv", "quicklook.png"))
    capsys.readouterr()
    rc, out2 = _faulting_run(tmp_path, monkeypatch, "output.on_fault=record")
    assert rc == 3 and out2 == out
    assert json.loads((out / "run.json").read_text())["summary"]["status"] == "fault"
    assert not any((out / f).exists() for f in ("fields.h5", "profiles.csv", "quicklook.png"))


def _ramp_faulting(tmp_path, monkeypatch, retries, *sets, before_fault=None):
    """A source run and the configuration of a run continued from it over a 0.002 ps bias ramp, whose every
    attempt faults past half its ramp (test_bsp_steady_ramp's stand-in for a negative density), with
    RAMP_RETRIES = ``retries``; ``before_fault(n, src)`` is called before the n-th fault (from 1)."""
    src = tmp_path / "src"
    sim_of(cfg_of("continuation.save_final_state=true", steps=2), src).run()
    check = Simulation._check_density
    faults = []

    def fault_past_half_the_ramp(self, st, stage, probe=None):
        check(self, st, stage, probe)
        if self.source is not None and st.t * self.model.scales.t * 1e12 > self.source["ramp_ps"] / 2:
            faults.append(1)
            if before_fault is not None:
                before_fault(len(faults), src)
            raise self._fault(stage, "DENS", "negative density (stand-in) at x node 4")

    monkeypatch.setattr(Simulation, "_check_density", fault_past_half_the_ramp)
    monkeypatch.setattr(simulation, "RAMP_RETRIES", retries)
    return cfg_of("bias.V_DS=0.05", "time.steps=null", "time.t_end_ps=0.02", f"continuation.init_from={src}",
                  "continuation.ramp_ps=0.002", "continuation.save_final_state=true", *sets, steps=1)


def _fault_record(out, message):
    """run.json's summary of a fault record in ``out``, checked against the RunFault's ``message``: the fault
    of the last good state (scalars.csv's last row, every row of one attempt) and the marker final_state.h5."""
    s = json.loads((out / "run.json").read_text())["summary"]
    assert s["status"] == "fault" and s["fault"]["phase"] == "DENS"
    assert s["fault"]["message"] == " ".join(message.split())
    sc = pd.read_csv(out / "scalars.csv")
    assert list(sc["step"]) == list(range(len(sc))) and s["fault"]["step"] == sc["step"].iloc[-1] + 1
    assert s["fault"]["t_ps"] == pytest.approx(sc["time_s"].iloc[-1] * 1e12, rel=1e-12)
    with h5py.File(out / simulation.FINAL_STATE, "r") as h:
        assert str(h.attrs["fault"]) == s["fault"]["message"] and len(h.keys()) == 0
    return s


def test_on_fault_record_after_the_ramp_retries(tmp_path, monkeypatch):
    """A continued run that faults during its bias ramp past the retries (_retry_ramp): the record holds the
    last attempt's rows and summary.continuation the lengthened ramp and the earlier attempts' faults; the
    message says that the ramp was retried."""
    cfg = _ramp_faulting(tmp_path, monkeypatch, 1, "output.on_fault=record")
    out = tmp_path / "cont"
    with pytest.raises(RunFault, match="negative density") as info:
        sim_of(cfg, out).run()
    s = _fault_record(out, str(info.value))
    c = s["continuation"]
    assert c["ramp_ps"] == pytest.approx(0.004) and c["ramp_ps_config"] == 0.002 and len(c["ramp_faults"]) == 1
    assert 0.002 < s["fault"]["t_ps"] < 0.004  # the second attempt's, past half its 0.004 ps ramp
    assert s["fault"]["message"].endswith("; after 1 bias ramp retry (ramp 0.002 ps, now 0.004 ps)")


def _source_gone(n, src):
    if n == 1:
        (src / simulation.FINAL_STATE).unlink()


def _source_faulted(n, src):  # the source point run again meanwhile, and faulted under record
    if n == 2:
        with h5py.File(src / simulation.FINAL_STATE, "w") as h:
            h.attrs["fault"] = "step 9, RK stage 1, phase DENS: negative density (the source's)"


@pytest.mark.parametrize("before_fault,on_fault", [(_source_gone, "record"), (_source_faulted, "record"),
                                                    (_source_gone, "stop")],
                         ids=["source_gone", "source_now_a_marker", "source_gone_stop"])
def test_a_ramp_retry_that_cannot_start_leaves_the_fault(before_fault, on_fault, tmp_path, monkeypatch):
    """_retry_ramp cannot read its source again (the final state gone: ConfigError; a fault marker now:
    SourceFaulted): the fault that called for the retry stands (RunFault, exit code 3, not a bad input),
    its message says why the retry did not start, and under record it leaves the record of the attempt that
    faulted (its rows and time, its ramp)."""
    cfg = _ramp_faulting(tmp_path, monkeypatch, 3, f"output.on_fault={on_fault}", before_fault=before_fault)
    out = tmp_path / "cont"
    with pytest.raises(RunFault) as info:
        sim_of(cfg, out).run()
    msg = str(info.value)
    assert msg.startswith("step ") and ", phase DENS: negative density (stand-in) at x node 4; " in msg
    if before_fault is _source_gone:
        assert "; the bias ramp retry (ramp 0.004 ps) could not start (ConfigError: config key " \
               "'continuation.init_from': cannot read" in msg
    else:
        assert "; after 1 bias ramp retry (ramp 0.002 ps, now 0.004 ps); the bias ramp retry (ramp 0.008 ps) could " \
               "not start (SourceFaulted: " in msg and "negative density (the source's)" in msg
    if on_fault == "stop":
        assert not (out / "run.json").exists()
        return
    s = _fault_record(out, msg)
    c = s["continuation"]
    if before_fault is _source_gone:  # the first attempt's
        assert c["ramp_ps"] == 0.002 and "ramp_faults" not in c and 0.001 < s["fault"]["t_ps"] < 0.004
    else:  # the second attempt's
        assert c["ramp_ps"] == pytest.approx(0.004) and len(c["ramp_faults"]) == 1
        assert 0.002 < s["fault"]["t_ps"] < 0.004


def test_a_ramp_retry_that_fails_midway_records_the_attempt_that_faulted(tmp_path, monkeypatch):
    """Any error of _retry_ramp after it has read its source (here a MemoryError as it sets up the new
    attempt) leaves the fault of the attempt that faulted, recorded from that attempt's state, not the
    half-made retry's."""
    cfg = _ramp_faulting(tmp_path, monkeypatch, 3, "output.on_fault=record")
    out = tmp_path / "cont"
    sim = sim_of(cfg, out)

    def no_memory(*a, **k):
        raise MemoryError("stand-in: out of memory")

    monkeypatch.setattr(simulation, "PhaseTimer", no_memory)  # the retry's timers (the run's are made)
    with pytest.raises(RunFault) as info:
        sim.run()
    msg = str(info.value)
    assert msg.endswith("; the bias ramp retry (ramp 0.004 ps) could not start (MemoryError: stand-in: out of memory)")
    s = _fault_record(out, msg)
    assert s["continuation"]["ramp_ps"] == 0.002 and "ramp_faults" not in s["continuation"]
    assert 0.001 < s["fault"]["t_ps"] < 0.004 and s["fault"]["step"] > 1  # not the retry's start (step 0)
    assert "could not start" in sim.log.getvalue()


def test_on_fault_record_removes_later_snapshots_of_an_earlier_run(tmp_path, monkeypatch, capsys):
    """A fault record in a folder that holds a longer run of the same configuration: its snapshots of the
    fault's step and later go (this run never reached them), the earlier ones (this run's history, written
    again by it) and other files stay."""
    cfg = tmp_path / "c.yaml"
    cfg.write_text(_FAULT_YAML)
    out = tmp_path / "out"
    assert main(["run", str(cfg), "--out", str(out), "--no-progress", "--set", "output.every_steps=1"]) == 0
    snaps = out / "snapshots"
    assert sorted(p.name for p in snaps.iterdir()) == [f"step_{i:07d}.h5" for i in range(4)]
    (snaps / "notes.txt").write_text("mine")
    (snaps / "step_best.h5").write_text("mine")
    capsys.readouterr()
    rc, out2 = _faulting_run(tmp_path, monkeypatch, "output.on_fault=record", "output.every_steps=1")
    assert rc == 3 and out2 == out
    assert json.loads((out / "run.json").read_text())["summary"]["fault"]["step"] == 2
    assert sorted(p.name for p in snaps.iterdir()) == ["notes.txt", "step_0000000.h5", "step_0000001.h5",
                                                        "step_best.h5"]


def test_on_fault_record_without_an_output_folder_raises_as_stop(tmp_path, monkeypatch):
    monkeypatch.setattr(simulation.dens, "dens", nth_call(simulation.dens, "dens", 6, negative_rho))
    sim = Simulation(cfg_of("output.on_fault=record", "steady.enabled=true", steps=3), get_backend("numpy"), None,
                     progress=False, log=_io.StringIO())
    with pytest.raises(RunFault, match="negative density"):
        sim.run()
    assert "warning" not in sim.log.getvalue()


def test_on_fault_record_that_cannot_be_written_leaves_the_fault(tmp_path, monkeypatch):
    """A record that fails to be written is a warning on the log: the run still ends on its fault."""
    def full_disk(self, *a, fault=None, **k):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(Simulation, "finish", full_disk)
    monkeypatch.setattr(simulation.dens, "dens", nth_call(simulation.dens, "dens", 6, negative_rho))
    sim = sim_of(cfg_of("output.on_fault=record", "steady.enabled=true", steps=3), tmp_path)
    with pytest.raises(RunFault, match="step 2, RK stage 3, phase DENS: negative density"):
        sim.run()
    assert "warning: output.on_fault record: the fault's record was not written (OSError" in sim.log.getvalue()
    assert not (tmp_path / "run.json").exists()
