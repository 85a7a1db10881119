"""A BSP run's folder, memory and faults (issue 17): another configuration's run is refused unless
--overwrite (then cleaned), snapshots carry the configuration hash, a mesh too large for memory is
refused before allocation, the ETA waits for a few timed steps (also after a resume), and a fault
in a step (NaN/Inf, negative density, Newton failure) stops with step, stage and phase named,
keeping the last good checkpoint, exit code 3."""
import io as _io
import tracemalloc
import warnings
from types import SimpleNamespace

import h5py
import numpy as np
import pytest

from solver import provenance
from solver.backend import get_backend
from solver.bsp import poisson, simulation
from solver.bsp.model import check_memory, load, memory_need_bytes
from solver.bsp.simulation import CHECKPOINT, Progress, Simulation
from solver.cli import main
from solver.config import ConfigError, RunFault

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
def _nth_call(module, name, n, change):
    """Replace module.name by a wrapper whose call number ``n`` (from 0) goes through ``change``."""
    orig = getattr(module, name)
    calls = []

    def wrapper(*a, **k):
        calls.append(1)
        return change(orig, *a, **k) if len(calls) == n + 1 else orig(*a, **k)
    return wrapper


def _nan_phi(orig, *a, **k):
    Phi, dn = orig(*a, **k)
    Phi = Phi.copy()
    Phi[0, 0, 0, 0, 0] = np.nan
    return Phi, dn


def _negative_rho(orig, *a, **k):
    rho, PhiHat = orig(*a, **k)
    rho = rho.copy()
    rho[4] = -rho[4]
    return rho, PhiHat


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
    ("dens", "dens", 6, _negative_rho, "step 2, RK stage 3, phase DENS: negative density (N_s summed over valleys and subbands = -"),
    ("poisson", "potential", 3, _newton_fails, "step 2, RK stage 1, phase ITER: Newton failed (POTENTIAL: Newton"),
    ("poisson", "potential", 5, _inf_v, "step 2, RK stage 3, phase ITER: the potential V holds NaN or Inf"),
]


@pytest.mark.parametrize("module,name,n,change,words", FAULTS, ids=[f[4].split(":")[1].strip() for f in FAULTS])
def test_fault_stops_with_step_stage_phase_and_keeps_checkpoint(module, name, n, change, words, tmp_path,
                                                                 monkeypatch, capsys):
    mod = getattr(simulation, module)
    monkeypatch.setattr(mod, name, _nth_call(mod, name, n, change))
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
    monkeypatch.setattr(simulation.poisson, "potential", _nth_call(simulation.poisson, "potential", 0, _newton_fails))
    with pytest.raises(RunFault, match="step 1, RK stage 1, phase ITER: .*; no checkpoint was written yet"):
        sim_of(cfg_of(), tmp_path).run()


def test_startup_newton_failure_is_a_fault(tmp_path, monkeypatch):
    monkeypatch.setattr(simulation.poisson, "initcond", _nth_call(simulation.poisson, "initcond", 0, _newton_fails))
    with pytest.raises(RunFault, match=r"start-up \(INITCOND, THERMEQUIL\): Newton failed"):
        sim_of(cfg_of(), tmp_path).run()


@pytest.mark.parametrize("module,name,n,change,words", FAULTS, ids=[f[4].split(":")[1].strip() for f in FAULTS])
def test_deferred_density_check_names_the_same_fault(module, name, n, change, words, tmp_path, monkeypatch):
    """The GPU's order (Simulation._defer_check: the stage's density read after its ITER) on the
    NumPy path: every fault is reported as without it, a bad density before ITER's outcome."""
    mod = getattr(simulation, module)
    monkeypatch.setattr(mod, name, _nth_call(mod, name, n, change))
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
