"""A run stopped by SIGINT or SIGTERM (Ctrl-C, kill, a batch system's time limit, Snakemake stopping its jobs) takes
the signal at the end of the step, writes a checkpoint of that step and exits with 128 + the signal; the same command
resumes it to the uninterrupted result bit for bit.  A second signal stops at once.  (Simulation._stop_signals,
_take_stop; solver.cli.main.)"""
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import h5py
import numpy as np
import pandas as pd
import pytest

from solver.backend import get_backend
from solver.bsp.model import load
from solver.bsp.simulation import CHECKPOINT, Simulation
from solver.config import Interrupted

REPO = Path(__file__).resolve().parents[1]
TINY = ["mesh.N_sbn=3", "mesh.NX=9", "mesh.NZ=13", "mesh.NW=12", "mesh.NPHI=8", "output.progress=false",
        "numerics.backend=numpy", "time.t_end_ps=null"]


def cfg_of(steps, *extra):
    return load(None, TINY + [f"time.steps={steps}"] + list(extra))


class SignalsAt(Simulation):
    """Sends itself ``sig`` (``times`` times) at the end of step ``n`` (n = 0: at the end of the start-up)."""

    def __init__(self, *a, n, sig=signal.SIGTERM, times=1, **k):
        super().__init__(*a, **k)
        self.n, self.sig, self.times = n, sig, times

    def _send(self):
        for _ in range(self.times):
            os.kill(os.getpid(), self.sig)

    def startup(self):
        super().startup()
        if self.n == 0:
            self._send()

    def step(self):
        super().step()
        if self.state.step == self.n:
            self._send()


def _same_run(a: Path, b: Path):
    for name in ("profiles_t0.csv", "profiles.csv", "scalars.csv"):
        pa, pb = pd.read_csv(a / name), pd.read_csv(b / name)
        assert list(pa.columns) == list(pb.columns), name
        np.testing.assert_array_equal(pa.to_numpy(), pb.to_numpy(), err_msg=name)


@pytest.mark.parametrize("n, sig, every", [(3, signal.SIGTERM, 0), (0, signal.SIGINT, 0), (2, signal.SIGTERM, 2)],
                         ids=["SIGTERM-step3", "SIGINT-startup", "SIGTERM-at-a-periodic-checkpoint"])
def test_a_signal_stops_at_the_step_end_with_a_checkpoint_and_resumes_bitwise(tmp_path, n, sig, every):
    # every = 0: no periodic checkpoint, the signal's is the only one; every = 2: the step's periodic one is kept
    cfg = cfg_of(6, f"output.checkpoint_every_steps={every}")
    a, b = tmp_path / "a", tmp_path / "b"
    Simulation(cfg, get_backend("numpy"), a, progress=False).run()
    before = signal.getsignal(sig)
    s = SignalsAt(cfg, get_backend("numpy"), b, progress=False, n=n, sig=sig)
    with pytest.raises(Interrupted) as exc:
        s.run()
    assert exc.value.signum == sig
    assert f"{signal.Signals(sig).name} at step {n}," in str(exc.value) and "checkpoint written" in str(exc.value)
    assert signal.getsignal(sig) is before  # the handlers are given back
    assert not (b / "run.json").exists() and not (b / "profiles.csv").exists()
    with h5py.File(b / CHECKPOINT, "r") as f:
        assert f.attrs["step"] == n  # the step it was in finished, none after it began
    r = Simulation(cfg, get_backend("numpy"), b, progress=False).run()
    assert r["summary"]["steps"] == 6 and not (b / CHECKPOINT).exists()
    _same_run(a, b)


def test_a_second_signal_stops_at_once(tmp_path):
    cfg = cfg_of(6, "output.checkpoint_every_steps=0")
    s = SignalsAt(cfg, get_backend("numpy"), tmp_path, progress=False, n=2, sig=signal.SIGINT, times=2)
    with pytest.raises(KeyboardInterrupt):
        s.run()
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    assert not (tmp_path / CHECKPOINT).exists()


def test_an_ignored_signal_stays_ignored(tmp_path):
    """SIGINT ignored by the process (a shell's background job, nohup): the run goes on to its end."""
    old = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        s = SignalsAt(cfg_of(4, "output.checkpoint_every_steps=0"), get_backend("numpy"), tmp_path, progress=False,
                      n=2, sig=signal.SIGINT)
        assert s.run()["summary"]["steps"] == 4
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGINT, old)


def test_a_run_without_a_folder_stops_without_a_checkpoint():
    s = SignalsAt(cfg_of(4), get_backend("numpy"), None, progress=False, n=1)
    with pytest.raises(Interrupted, match="no output folder, nothing kept"):
        s.run()
    assert s.state.step == 1


def test_cli_sigterm_exits_143_with_a_checkpoint_and_the_same_command_resumes(tmp_path):
    """`python -m solver run` in a subprocess: SIGTERM once the start-up is done; exit code 143 and one line;
    the same command again resumes from that step and finishes (exit 0)."""
    out = tmp_path / "run"
    cmd = [sys.executable, "-m", "solver", "run", "config/bsp/dgmosfet.yaml", "--backend", "numpy", "--out", str(out),
           "--no-progress"] + [a for s in TINY + ["time.steps=300"] for a in ("--set", s)]
    env = dict(os.environ, PYTHONPATH=str(REPO))
    p = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    t0 = time.monotonic()
    while not (out / "profiles_t0.csv").exists() and p.poll() is None and time.monotonic() - t0 < 120:
        time.sleep(0.05)
    time.sleep(0.3)  # some steps in
    p.send_signal(signal.SIGTERM)
    _, err = p.communicate(timeout=120)
    assert p.returncode == 128 + signal.SIGTERM, err[-2000:]
    assert "stopped: SIGTERM at step" in err and "Traceback" not in err, err[-2000:]
    with h5py.File(out / CHECKPOINT, "r") as f:
        k = int(f.attrs["step"])
    assert 0 < k < 300
    r = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert f"at step {k}" in r.stderr and "resumed from" in r.stderr
    assert int(pd.read_csv(out / "scalars.csv")["step"].iloc[-1]) == 300


def test_an_interrupted_workflow_resumes_its_point_from_the_signal_checkpoint(tmp_path):
    """Ctrl-C on `snakemake` (SIGINT to its process group, as a terminal sends it): the running I-V point takes it at
    the end of its step, checkpoints and exits 130; `snakemake` again reruns the incomplete job, which resumes from
    that step and finishes, and the study's tables are made."""
    import yaml

    cfg = yaml.safe_load((REPO / "config" / "smoke.yaml").read_text())
    for study in ("bsp", "vecops", "collision", "rgf"):
        cfg[study] = {"enabled": False}
    cfg["results_dir"] = str(tmp_path / "results")
    cfg["iv"].update(vg=[0.3, 0.5], idvg_vds=[0.1], idvd_vg=[0.5], vds=[0.1, 0.2], skip=[[0.3, 0.1], [0.5, 0.2]],
                     continuation=False,  # one point, 0.5 V / 0.1 V, run to t_max (no steady stop)
                     set=["output.checkpoint_every_steps=20"],
                     steady={"window_ps": 0.01, "rtol": 1e-9, "conservation_tol": 1e-9, "t_max_ps": 0.4})
    cf = tmp_path / "interrupt.yaml"
    cf.write_text(yaml.safe_dump(cfg))
    cmd = [sys.executable, "-m", "snakemake", "iv_collect", "--cores", "1", "--configfile", str(cf), "--nolock"]
    env = dict(os.environ, PYTHONPATH=str(REPO))
    p = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                         start_new_session=True)
    t0 = time.monotonic()
    ck = []
    while not ck and p.poll() is None and time.monotonic() - t0 < 180:
        time.sleep(0.1)
        ck = list((tmp_path / "results").glob("*/iv/runs/*/*/vg*/checkpoint.h5"))
    if not ck:
        p.kill()
        pytest.fail("the point wrote no checkpoint: " + p.communicate()[0][-3000:])
    os.killpg(p.pid, signal.SIGINT)
    out, _ = p.communicate(timeout=120)
    assert p.returncode != 0, out[-2000:]
    log = next((tmp_path / "results").glob("*/iv/logs/point_*.log"))
    text = log.read_text()
    assert "stopped: SIGINT at step" in text, text[-2000:]
    k = int(text.split("stopped: SIGINT at step ")[1].split(",")[0])
    with h5py.File(ck[0], "r") as f:
        assert int(f.attrs["step"]) == k
    r = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, (r.stdout + r.stderr)[-3000:]
    text = log.read_text()
    assert f"at step {k}" in text and "resumed from" in text, text[-2000:]
    assert list((tmp_path / "results").glob("*/iv/figures_of_merit.csv"))


# ------------------------------------------------------------------ output.checkpoint_every_s
class CountsCheckpoints(Simulation):
    def save_checkpoint(self, *a, **k):
        self.saved = getattr(self, "saved", []) + [self.state.step]
        return super().save_checkpoint(*a, **k)


@pytest.mark.parametrize("every_s, steps_every, expect", [
    (1e-9, 0, [1, 2, 3, 4]),  # due after every step (not after the last: the run is done)
    (3600.0, 0, []),  # never due in a short run
    (None, 2, [2, 4]),  # off: the step interval alone
    (3600.0, 2, [2, 4]),  # both: whichever is due
], ids=["every-step", "never", "off", "with-steps"])
def test_checkpoint_every_s_checkpoints_by_wall_time(tmp_path, every_s, steps_every, expect):
    every = "null" if every_s is None else every_s
    s = CountsCheckpoints(cfg_of(5, f"output.checkpoint_every_steps={steps_every}", f"output.checkpoint_every_s={every}"),
                          get_backend("numpy"), tmp_path, progress=False)
    s.run()
    assert getattr(s, "saved", []) == expect


def test_checkpoint_every_s_is_hash_neutral_and_resumes_bitwise(tmp_path, dies_after):
    """The wall-clock interval decides only where checkpoints fall: left out of the configuration hash, and a run
    stopped at a checkpoint it placed resumes to the uninterrupted result (under another interval too)."""
    from solver import provenance

    base, timed = cfg_of(6, "output.checkpoint_every_steps=0"), cfg_of(6, "output.checkpoint_every_steps=0",
                                                                           "output.checkpoint_every_s=1e-9")
    assert base["output"]["checkpoint_every_s"] is None
    assert provenance.config_hash(base) == provenance.config_hash(timed)
    assert provenance.config_hash(base) != provenance.config_hash(cfg_of(6, "output.checkpoint_every_steps=3"))
    a, b = tmp_path / "a", tmp_path / "b"
    Simulation(base, get_backend("numpy"), a, progress=False).run()
    s = dies_after(timed, get_backend("numpy"), b, progress=False, n=4)
    with pytest.raises(dies_after.Interrupted):
        s.run()
    with h5py.File(b / CHECKPOINT, "r") as f:
        assert f.attrs["step"] == 3  # the checkpoint after step 3; step 4's was not written
    Simulation(base, get_backend("numpy"), b, progress=False).run()  # resumed without the interval
    _same_run(a, b)


def test_checkpoint_every_s_must_not_be_negative():
    from solver.config import ConfigError

    with pytest.raises(ConfigError, match="checkpoint_every_s"):
        cfg_of(2, "output.checkpoint_every_s=-1")
