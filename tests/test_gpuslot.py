"""solver --gpu (solver/gpuslot.py): the least-used GPU of a host with several (auto, shared), a GPU
of its own (exclusive: timings never share one), the registry dropping dead runs, a scheduler's
CUDA_VISIBLE_DEVICES kept (or chosen among), run.json's record, bad values in one line.  Fake GPU
counts: claim() takes the count or the list, and CUDA_VISIBLE_DEVICES=0,1,2,3 stands for a host
with four GPUs (select chooses among its entries)."""
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from solver import gpuslot

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def sleepers():
    procs = [subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"]) for _ in range(6)]
    yield [p.pid for p in procs]
    for p in procs:
        p.kill()
        p.wait()


def _dead_pid():
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


def _entries(reg):
    return sorted(n for n in os.listdir(reg) if n != "lock")


def test_claim_spreads_runs_over_the_gpus_and_forgets_dead_ones(tmp_path, sleepers):
    reg = str(tmp_path / "reg")
    got = [gpuslot.claim(3, reg, pid) for pid in sleepers[:4]]
    assert got == [["0"], ["1"], ["2"], ["0"]]
    assert _entries(reg) == sorted(f"{p}.a.{g[0]}" for g, p in zip(got, sleepers))
    # a dead run's slot is free again: GPU 1's run ends, the next run takes GPU 1, not 1 of 0/2
    dead = _dead_pid()
    open(os.path.join(reg, f"{dead}.a.1"), "w").close()  # a stale entry of an ended process
    os.remove(os.path.join(reg, f"{sleepers[1]}.a.1"))
    assert gpuslot.claim(3, reg, sleepers[4]) == ["1"]
    assert not os.path.exists(os.path.join(reg, f"{dead}.a.1"))
    # the same process claiming again does not count itself twice
    assert gpuslot.claim(3, reg, sleepers[4]) == ["1"]
    assert len([n for n in os.listdir(reg) if n.startswith(f"{sleepers[4]}.")]) == 1


def test_exclusive_runs_take_one_gpu_each_and_wait_for_a_free_one(tmp_path, sleepers):
    reg = str(tmp_path / "reg")
    got = [gpuslot.claim(4, reg, pid, exclusive=True, poll=0.01, timeout=1) for pid in sleepers[:4]]
    assert got == [["0"], ["1"], ["2"], ["3"]]
    # a fifth timing run waits: every GPU is held; its entries go when it gives up
    t0 = time.monotonic()
    with pytest.raises(TimeoutError):
        gpuslot.claim(4, reg, sleepers[4], exclusive=True, poll=0.01, timeout=0.2)
    assert time.monotonic() - t0 >= 0.2
    assert not [n for n in os.listdir(reg) if n.startswith(f"{sleepers[4]}.")]
    # so does a shared run: exclusive GPUs are not shared
    with pytest.raises(TimeoutError):
        gpuslot.claim(4, reg, sleepers[5], poll=0.01, timeout=0.1)
    # the run on GPU 2 ends (killed: no clean-up): the waiting run gets GPU 2
    os.rename(os.path.join(reg, f"{sleepers[2]}.x.2"), os.path.join(reg, f"{_dead_pid()}.x.2"))
    assert gpuslot.claim(4, reg, sleepers[4], exclusive=True, poll=0.01, timeout=1) == ["2"]


def test_exclusive_marks_its_gpu_and_waits_for_its_shared_runs(tmp_path, sleepers):
    reg = str(tmp_path / "reg")
    a, b, c, t, d = sleepers[:5]
    assert [gpuslot.claim(2, reg, p) for p in (a, b, c)] == [["0"], ["1"], ["0"]]
    # the timing run marks the GPU with the fewest shared runs (1) but is not granted yet
    assert gpuslot._locked_attempt(["0", "1"], 1, True, reg, t) == (["1"], False)
    assert f"{t}.x.1" in _entries(reg)
    # a new shared run goes to GPU 0 although GPU 1 has fewer runs: GPU 1 is marked
    assert gpuslot.claim(2, reg, d) == ["0"]
    # GPU 1's shared run ends: the timing run has GPU 1 to itself
    os.remove(os.path.join(reg, f"{b}.a.1"))
    assert gpuslot.claim(2, reg, t, exclusive=True, poll=0.01, timeout=1) == ["1"]
    assert [n for n in _entries(reg) if n.endswith(".1")] == [f"{t}.x.1"]


def test_exclusive_k_gpus(tmp_path, sleepers):
    reg = str(tmp_path / "reg")
    assert gpuslot.claim(4, reg, sleepers[0], exclusive=True) == ["0"]
    assert gpuslot.claim(4, reg, sleepers[1]) == ["1"]  # shared
    assert gpuslot.claim(4, reg, sleepers[2], exclusive=True, k=2, poll=0.01, timeout=1) == ["2", "3"]
    with pytest.raises(TimeoutError):  # one GPU left with a shared run on it, two wanted
        gpuslot.claim(4, reg, sleepers[3], exclusive=True, k=2, poll=0.01, timeout=0.1)
    from solver.config import ConfigError
    with pytest.raises(ConfigError, match="exclusive:5: 4 GPUs"):
        gpuslot.claim(4, reg, sleepers[3], exclusive=True, k=5)


def test_gpu_labels_of_a_list(tmp_path, sleepers):
    # CUDA_VISIBLE_DEVICES entries may be UUIDs (MIG: with slashes): labels, not indices
    reg = str(tmp_path / "reg")
    labels = ["GPU-1a2b", "MIG-GPU-1a2b/1/0"]
    assert gpuslot.claim(labels, reg, sleepers[0], exclusive=True) == ["GPU-1a2b"]
    assert gpuslot.claim(labels, reg, sleepers[1], exclusive=True) == ["MIG-GPU-1a2b/1/0"]
    assert gpuslot._parse(_entries(reg)[1]) == ("MIG-GPU-1a2b/1/0", sleepers[1], True)


def test_select(monkeypatch, tmp_path):
    monkeypatch.setenv("TMPDIR", str(tmp_path))  # the registry
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.delenv("SOLVER_GPU_SLOT", raising=False)
    import tempfile
    monkeypatch.setattr(tempfile, "tempdir", None)
    assert gpuslot.registry_dir().startswith(str(tmp_path))
    assert gpuslot.select(None) is None and "CUDA_VISIBLE_DEVICES" not in os.environ
    assert gpuslot.select("2") == "2" and os.environ["CUDA_VISIBLE_DEVICES"] == "2"
    # a scheduler's (or the user's) choice of one GPU wins over auto and exclusive
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3")
    assert gpuslot.select("auto") is None and os.environ["CUDA_VISIBLE_DEVICES"] == "3"
    assert gpuslot.select("exclusive") is None and os.environ["CUDA_VISIBLE_DEVICES"] == "3"
    assert json.loads(os.environ["SOLVER_GPU_SLOT"]) == {"mode": "exclusive", "gpus": "3", "by": "CUDA_VISIBLE_DEVICES"}
    # a list of several: chosen among its entries (a workflow inside an allocation of four GPUs)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "4,5,6,7")
    assert gpuslot.select("exclusive") == "4"
    slot = json.loads(os.environ["SOLVER_GPU_SLOT"])
    assert slot["mode"] == "exclusive" and slot["gpus"] == "4" and slot["among"] == "4,5,6,7" and slot["host_gpus"] == 4
    # one GPU or none: auto and exclusive do nothing
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    monkeypatch.setattr(gpuslot, "host_gpus", lambda: 1)
    assert gpuslot.select("auto") is None and "CUDA_VISIBLE_DEVICES" not in os.environ
    assert gpuslot.select("exclusive") is None and "CUDA_VISIBLE_DEVICES" not in os.environ
    calls = []
    monkeypatch.setattr(gpuslot, "host_gpus", lambda: 4)
    monkeypatch.setattr(gpuslot, "claim", lambda gpus, exclusive, k, log, wait_auto:
                        calls.append((gpus, exclusive, k, wait_auto)) or ["3"])
    assert gpuslot.select("auto") == "3" and os.environ["CUDA_VISIBLE_DEVICES"] == "3"
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    assert gpuslot.select("exclusive:2") == "3"
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    assert gpuslot.select("own") == "3" and json.loads(os.environ["SOLVER_GPU_SLOT"])["mode"] == "own"
    assert calls == [(4, False, 1, True), (4, True, 2, True), (4, True, 1, False)]


def test_cpu_share_keeps_cores_and_sockets_together():
    # 2 sockets x 4 cores x 2 SMT threads, Linux's usual numbering: CPU c and c + 8 are siblings,
    # CPUs 0-3 (and 8-11) on socket 0
    topo = {c: (c % 8 // 4, c % 4) for c in range(16)}
    shares = [gpuslot.cpu_share(range(16), i, 4, topo.get) for i in range(4)]
    assert shares == [[0, 1, 8, 9], [2, 3, 10, 11], [4, 5, 12, 13], [6, 7, 14, 15]]
    # two slices: one socket each
    assert gpuslot.cpu_share(range(16), 1, 2, topo.get) == [4, 5, 6, 7, 12, 13, 14, 15]
    # without topology (sysfs silent): consecutive CPUs; a remainder spread over the slices
    flat = lambda c: (0, c)  # noqa: E731
    assert [len(gpuslot.cpu_share(range(10), i, 4, flat)) for i in range(4)] == [2, 3, 2, 3]
    assert sorted(sum((gpuslot.cpu_share(range(10), i, 4, flat) for i in range(4)), [])) == list(range(10))
    # fewer CPUs than slices: every slice gets them all
    assert gpuslot.cpu_share([5, 3], 2, 4, flat) == [3, 5]
    assert gpuslot.cpu_list_text([0, 1, 2, 3, 8, 9, 11]) == "0-3,8-9,11"
    assert gpuslot.cpu_list_text([7]) == "7"
    # unsorted input, a run last, lone numbers between runs, a set, nothing, a repeated number (kept apart)
    assert gpuslot.cpu_list_text([39, 32, 33, 34, 35, 36, 37, 38, 0, 1, 2, 3, 4, 5, 6, 7]) == "0-7,32-39"
    assert gpuslot.cpu_list_text({5, 1, 3, 9, 10}) == "1,3,5,9-10"
    assert gpuslot.cpu_list_text([]) == ""
    assert gpuslot.cpu_list_text([1, 1, 2]) == "1,1-2"
    # this host's sysfs reading gives a (socket, core) pair for CPU 0
    assert len(gpuslot.cpu_topology(0)) == 2


def test_slice_takes_a_gpu_of_its_own_and_its_share_of_the_cpus(monkeypatch, tmp_path):
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    monkeypatch.delenv("SOLVER_GPU_SLOT", raising=False)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1,2,3")
    pinned, calls = [], []
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(16)))
    monkeypatch.setattr(os, "sched_setaffinity", lambda pid, cpus: pinned.append(sorted(cpus)))
    monkeypatch.setattr(gpuslot, "cpu_topology", lambda c: (0, c))
    monkeypatch.setattr(gpuslot, "claim", lambda gpus, exclusive, k, log, wait_auto:
                        calls.append((gpus, exclusive, k)) or ["2"])
    assert gpuslot.select("slice") == "2"
    assert calls == [(["0", "1", "2", "3"], True, 1)]  # exclusive, like --gpu exclusive
    assert pinned == [[8, 9, 10, 11]]  # GPU 2 of 4: the third quarter of the CPUs
    slot = json.loads(os.environ["SOLVER_GPU_SLOT"])
    assert slot["mode"] == "slice" and slot["gpus"] == "2" and slot["cpus"] == "8-11"
    # a scheduler's single GPU wins, and the scheduler's CPUs too: no pinning
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "5")
    assert gpuslot.select("slice") is None and len(pinned) == 1
    # a one-GPU host is one slice: nothing to choose or pin
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    monkeypatch.setattr(gpuslot, "host_gpus", lambda: 1)
    assert gpuslot.select("slice") is None and len(pinned) == 1 and "CUDA_VISIBLE_DEVICES" not in os.environ


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="Linux CPU affinity")
def test_slice_pins_the_process_and_its_threads(tmp_path):
    # a real process on a fake four-GPU host (CUDA_VISIBLE_DEVICES=0,1,2,3): its affinity and that
    # of a thread it starts afterwards are its slice's CPUs, and run.json's record names them
    code = ("import json, os, threading; from solver import gpuslot; gpuslot.select('slice'); out = {}; "
            "t = threading.Thread(target=lambda: out.update(t=sorted(os.sched_getaffinity(0)))); t.start(); t.join(); "
            "print(json.dumps(dict(out, p=sorted(os.sched_getaffinity(0)), slot=gpuslot.slot_record())))")
    env = dict(os.environ, TMPDIR=str(tmp_path), CUDA_VISIBLE_DEVICES="0,1,2,3",
               PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    env.pop("SLURM_JOB_ID", None)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)
    everything = sorted(os.sched_getaffinity(0))
    assert got["slot"]["mode"] == "slice" and got["slot"]["gpus"] == "0"
    assert got["p"] == got["t"] == gpuslot.cpu_share(everything, 0, 4)
    assert gpuslot.cpu_list_text(got["p"]) == got["slot"]["cpus"]


_WORKER = """
import json, os, time
from solver import gpuslot
gpuslot.POLL_S = 0.05
gpuslot.select({spec!r})
start = time.time()
time.sleep(0.4)
print(json.dumps({{"gpu": os.environ["CUDA_VISIBLE_DEVICES"], "start": start, "end": time.time()}}))
"""


def _spawn(spec, tmp_path, n):
    env = dict(os.environ, TMPDIR=str(tmp_path), CUDA_VISIBLE_DEVICES="0,1,2,3",
               PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    env.pop("SLURM_JOB_ID", None)
    procs = [subprocess.Popen([sys.executable, "-c", _WORKER.format(spec=spec)], env=env, stdout=subprocess.PIPE,
                              text=True) for _ in range(n)]
    out = []
    for p in procs:
        stdout, _ = p.communicate(timeout=60)
        assert p.returncode == 0
        out.append(json.loads(stdout.strip().splitlines()[-1]))
    return out


def test_exclusive_processes_never_share_a_gpu(tmp_path):
    # ten timing processes started at once on a four-GPU host: at most four run at a time, each on
    # a GPU of its own, every GPU used
    runs = _spawn("exclusive", tmp_path, 10)
    assert {r["gpu"] for r in runs} == {"0", "1", "2", "3"}
    for i, r in enumerate(runs):
        for s in runs[i + 1:]:
            if r["gpu"] == s["gpu"]:
                assert r["end"] <= s["start"] or s["end"] <= r["start"], (r, s)
    moments = sorted(x for r in runs for x in (r["start"], r["end"]))
    assert max(sum(r["start"] <= m < r["end"] for r in runs) for m in moments) <= 4


def test_top_level_gpu_option(tmp_path):
    env = dict(os.environ, TMPDIR=str(tmp_path), CUDA_VISIBLE_DEVICES="0,1",
               PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    env.pop("SLURM_JOB_ID", None)
    r = subprocess.run([sys.executable, "-m", "solver", "--gpu", "exclusive:3", "info"], capture_output=True, text=True,
                       env=env)
    assert r.returncode == 2 and r.stderr.strip().splitlines() == \
        ["error: --gpu exclusive:3: 2 GPUs to choose from (0,1)"]
    # the record names the slot: run.json's gpu_slot and CUDA_VISIBLE_DEVICES
    r = subprocess.run([sys.executable, "-m", "solver", "--gpu", "exclusive", "info"], capture_output=True, text=True,
                       env=env)
    assert r.returncode == 0, r.stderr
    rec = json.loads(r.stdout)
    assert rec["threads"]["CUDA_VISIBLE_DEVICES"] == "0"
    assert rec["gpu_slot"]["mode"] == "exclusive" and rec["gpu_slot"]["gpus"] == "0"
    from solver.cli import command_words
    assert command_words(["--gpu", "exclusive", "bsp", "bench", "--case", "x"]) == ["bsp", "bench"]
    assert command_words(["--gpu=auto", "run", "c.yaml", "--out", "o"]) == ["run", "c.yaml"]


def test_bad_gpu_value_is_one_line(tmp_path):
    r = subprocess.run([sys.executable, "-m", "solver", "run", "--out", str(tmp_path / "o"), "--gpu", "first"],
                       capture_output=True, text=True)
    assert r.returncode != 0
    assert "--gpu must be 'auto', 'exclusive', 'exclusive:K' (K >= 1), 'own', 'slice' or a GPU index >= 0, got 'first'" \
        in r.stderr
    assert "Traceback" not in r.stderr
    r = subprocess.run([sys.executable, "-m", "solver", "--gpu", "exclusive:0", "info"], capture_output=True, text=True)
    assert r.returncode == 2 and "got 'exclusive:0'" in r.stderr and "Traceback" not in r.stderr


def test_rgf_workers_see_the_gpus_of_their_parent(monkeypatch):
    from solver.rgf.scaling import visible_device

    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert [visible_device(k) for k in range(2)] == ["0", "1"]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,3")  # --gpu exclusive:2, or SLURM's --gpus=2
    assert [visible_device(k) for k in range(2)] == ["2", "3"]
    with pytest.raises(ValueError, match="sees 2"):
        visible_device(2)


def test_a_zombie_holds_no_gpu():
    """A run that has ended but is not yet reaped (its parent busy waiting on another child) is
    dead to the registry: otherwise the waiting runs would wait for the parent's next wait()."""
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    import time
    for _ in range(200):  # ended, not reaped: a zombie
        with open(f"/proc/{p.pid}/stat", "rb") as f:
            if f.read().rsplit(b")", 1)[1].split()[0] == b"Z":
                break
        time.sleep(0.05)
    assert not gpuslot._alive(p.pid)
    assert gpuslot._alive(os.getpid())
    p.wait()
    assert not gpuslot._alive(p.pid)


def test_own_marks_its_gpu_without_waiting_for_its_shared_runs(tmp_path, sleepers):
    """--gpu own (iv.long_points_gpu): the GPU with the fewest shared runs among those not marked, granted at once
    with shared runs still on it; no new shared run goes there; a second own takes another GPU; where every GPU
    is marked it waits."""
    reg = str(tmp_path / "reg")
    a, b, c, o1, o2, d = sleepers[:6]
    assert [gpuslot.claim(2, reg, p) for p in (a, b, c)] == [["0"], ["1"], ["0"]]
    assert gpuslot.claim(2, reg, o1, exclusive=True, wait_auto=False, poll=0.01, timeout=0.5) == ["1"]
    assert f"{b}.a.1" in _entries(reg) and f"{o1}.x.1" in _entries(reg)  # b goes on beside it
    assert gpuslot.claim(2, reg, d) == ["0"]  # GPU 1 is marked
    assert gpuslot.claim(2, reg, o2, exclusive=True, wait_auto=False, poll=0.01, timeout=0.5) == ["0"]
    third = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        with pytest.raises(TimeoutError):  # both marked: a third own waits
            gpuslot.claim(2, reg, third.pid, exclusive=True, wait_auto=False, poll=0.01, timeout=0.1)
    finally:
        third.kill()
        third.wait()
    assert gpuslot.parse_spec("own") == ("own", 1) and gpuslot.gpu_option("own") == "own"
