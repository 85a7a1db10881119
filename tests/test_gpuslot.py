"""solver run --gpu (solver/gpuslot.py): the least-used GPU of a host with several, the registry
dropping dead runs, a scheduler's CUDA_VISIBLE_DEVICES left alone, bad values in one line."""
import os
import subprocess
import sys

import pytest

from solver import gpuslot


@pytest.fixture
def sleepers():
    procs = [subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"]) for _ in range(5)]
    yield [p.pid for p in procs]
    for p in procs:
        p.kill()
        p.wait()


def test_claim_spreads_runs_over_the_gpus_and_forgets_dead_ones(tmp_path, sleepers):
    reg = str(tmp_path / "reg")
    got = [gpuslot.claim(3, reg, pid) for pid in sleepers[:4]]
    assert got == [0, 1, 2, 0]
    assert sorted(os.listdir(reg)) == sorted(["lock"] + [f"{g}-{p}" for g, p in zip(got, sleepers)])
    # a dead run's slot is free again: GPU 1's run ends, the next run takes GPU 1, not 1 of 0/2
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    open(os.path.join(reg, f"1-{dead.pid}"), "w").close()  # a stale entry of an ended process
    os.remove(os.path.join(reg, f"1-{sleepers[1]}"))
    assert gpuslot.claim(3, reg, sleepers[4]) == 1
    assert not os.path.exists(os.path.join(reg, f"1-{dead.pid}"))
    # the same process claiming again does not count itself twice
    assert gpuslot.claim(3, reg, sleepers[4]) == 1
    assert len([n for n in os.listdir(reg) if n.endswith(f"-{sleepers[4]}")]) == 1


def test_select(monkeypatch):
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert gpuslot.select(None) is None and "CUDA_VISIBLE_DEVICES" not in os.environ
    assert gpuslot.select("2") == "2" and os.environ["CUDA_VISIBLE_DEVICES"] == "2"
    # a scheduler's (or the user's) choice wins over auto
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3")
    assert gpuslot.select("auto") is None and os.environ["CUDA_VISIBLE_DEVICES"] == "3"
    # one GPU or none: auto does nothing
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    monkeypatch.setattr(gpuslot, "host_gpus", lambda: 1)
    assert gpuslot.select("auto") is None and "CUDA_VISIBLE_DEVICES" not in os.environ
    calls = []
    monkeypatch.setattr(gpuslot, "host_gpus", lambda: 4)
    monkeypatch.setattr(gpuslot, "claim", lambda n: calls.append(n) or 3)
    assert gpuslot.select("auto") == "3" and os.environ["CUDA_VISIBLE_DEVICES"] == "3" and calls == [4]


def test_bad_gpu_value_is_one_line(tmp_path):
    r = subprocess.run([sys.executable, "-m", "solver", "run", "--out", str(tmp_path / "o"), "--gpu", "first"],
                       capture_output=True, text=True)
    assert r.returncode != 0
    assert "--gpu must be 'auto' or a GPU index >= 0, got 'first'" in r.stderr
    assert "Traceback" not in r.stderr
