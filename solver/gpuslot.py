"""Which GPU a process takes on a host with several (``python -m solver [--gpu SPEC] COMMAND ...``,
also ``python -m solver run ... --gpu SPEC``).

A workflow on one host with several GPUs starts GPU jobs side by side; without a choice every
process would open GPU 0.  SPEC:

``N``            pin the process to GPU N.
``auto``         shared: the GPU with the fewest live ``auto`` runs (ties: the lowest index), among
                 the GPUs that no ``exclusive`` process holds or waits for (many runs per GPU: the
                 ``iv`` bias points); where every GPU is held exclusively, it waits.
``exclusive``    a GPU of its own (timings): the GPU with the fewest ``auto`` runs among those that
                 no other ``exclusive`` process holds or waits for; it marks that GPU at once (so
                 no new ``auto`` run goes there) and waits until the ``auto`` runs still on it have
                 ended; where every GPU is marked, it waits.  ``exclusive:K`` takes K GPUs at once
                 (``rgf scaling-run`` with K workers); CUDA_VISIBLE_DEVICES lists them.
``own``          a GPU to itself from now on, without waiting (a long I-V point, ``iv.long_points_gpu``): the GPU
                 with the fewest ``auto`` runs among those no ``exclusive``, ``slice`` or ``own`` process holds;
                 marked as ``exclusive`` marks it (no new ``auto`` run goes there), but granted at once, while
                 the ``auto`` runs already there go on to their end; where every GPU is marked, it waits.
``slice``        a slice of the host (config ``host_slices``, docs/workflow.md): a GPU as with
                 ``exclusive``, and the process pinned (CPU affinity) to that GPU's share of its
                 CPUs: GPU i of n takes the i-th n-th of them, in the order of sockets and cores, SMT
                 siblings together (``cpu_share``).  A host with n GPUs becomes n one-GPU hosts:
                 CPU timing runs take a slice too (holding its GPU idle), so timings run side by
                 side without sharing cores.

The registry is a folder under the temporary folder, per user (and per SLURM job): one empty file
per process and GPU, ``<pid>.a.<gpu>`` (auto) or ``<pid>.x.<gpu>`` (exclusive), guarded by a file
lock; entries of dead processes are dropped, so a killed run frees its GPU.  A run holds its GPU
as long as its process lives (child processes inherit CUDA_VISIBLE_DEVICES).  Everything works
by setting CUDA_VISIBLE_DEVICES before CUDA starts, so the process sees its GPU as device 0.

A scheduler's choice wins: where CUDA_VISIBLE_DEVICES is already set (SLURM's ``--gpus``: every
job gets GPUs of its own) and names no more GPUs than the process wants, ``auto``,
``exclusive`` and ``slice`` leave it alone (and pin no CPUs: the scheduler's own); where it names
more (a workflow started inside an allocation of several GPUs), they choose among its entries,
never outside them.  With one GPU or none they do nothing (a one-GPU host is one slice).  Waiting
is a poll (every ``POLL_S`` seconds); the workflow's ``gpu`` resource keeps it short (at most one
GPU job per GPU, docs/workflow.md).

Placement only: the numerics, the configuration and its hash do not depend on it (runs on GPUs of
the same model are bitwise identical).  ``SOLVER_GPU_SLOT`` (JSON: mode, GPUs, host GPUs, seconds
waited, a slice's ``cpus``) is set for the process and its children; run.json records it as
``gpu_slot`` beside CUDA_VISIBLE_DEVICES (``threads``) and the device's PCI bus id (``device.pci_bus_id``).
"""
from __future__ import annotations

import glob
import json
import os
import sys
import tempfile
import time
from urllib.parse import quote, unquote

ENV = "CUDA_VISIBLE_DEVICES"
SLOT_ENV = "SOLVER_GPU_SLOT"
POLL_S = 1.0


def host_gpus() -> int:
    """Number of NVIDIA GPUs this process can open: the /dev/nvidia<N> device files (no CUDA
    start, no subprocess)."""
    return len(glob.glob("/dev/nvidia[0-9]*"))


def registry_dir() -> str:
    job = os.environ.get("SLURM_JOB_ID")
    return os.path.join(tempfile.gettempdir(), f"solver-gpu-slots-{os.getuid()}" + (f"-job{job}" if job else ""))


def _alive(pid: int) -> bool:
    """Whether the process runs: a zombie (ended, not yet reaped by its parent, e.g. a scheduler
    busy waiting on another child) holds no GPU."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process with this pid: alive
        return True
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            state = f.read().rsplit(b")", 1)[1].split()[0]
        return state not in (b"Z", b"X")
    except (OSError, IndexError):  # no /proc (not Linux): kill's answer
        return True


def _entry(label: str, pid: int, exclusive: bool) -> str:
    return f"{pid}.{'x' if exclusive else 'a'}.{quote(str(label), safe='')}"


def _parse(name: str):
    """(gpu label, pid, exclusive) of a registry entry, or None for anything else (the lock)."""
    parts = name.split(".", 2)
    if len(parts) != 3 or not parts[0].isdigit() or parts[1] not in ("a", "x") or not parts[2]:
        return None
    return unquote(parts[2]), int(parts[0]), parts[1] == "x"


def _labels(gpus) -> list[str]:
    return [str(g) for g in (range(gpus) if isinstance(gpus, int) else gpus)]


def _locked_attempt(gpus, k: int, exclusive: bool, registry: str, pid: int, wait_auto: bool = True):
    """One attempt under the registry's lock.  Drops dead entries and this process's own, counts
    the others on the candidate GPUs ``gpus`` (labels, in order of preference on ties), and
    registers this process: returns (GPUs taken, granted).  Exclusive: the k GPUs marked (granted
    once no auto run is left on them, or at once without ``wait_auto``: mode own) or ([], False) where fewer
    than k are free of other exclusive processes.  Auto: ([gpu], True), or ([], False) where every GPU is
    exclusive."""
    import fcntl

    os.makedirs(registry, exist_ok=True)
    order = {g: i for i, g in enumerate(gpus)}
    with open(os.path.join(registry, "lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        shared, marked, before = dict.fromkeys(gpus, 0), dict.fromkeys(gpus, False), set()
        for name in os.listdir(registry):
            entry = _parse(name)
            if entry is None:
                continue
            gpu, owner, excl = entry
            if owner == pid and excl:
                before.add(gpu)
            if owner != pid and _alive(owner):
                if gpu in order:
                    if excl:
                        marked[gpu] = True
                    else:
                        shared[gpu] += 1
                continue
            try:
                os.remove(os.path.join(registry, name))
            except FileNotFoundError:
                pass
        free = [g for g in gpus if not marked[g]]
        if exclusive:
            if len(free) < k:
                return [], False
            # fewest auto runs; a waiting process keeps its GPUs on ties
            take = sorted(free, key=lambda g: (shared[g], g not in before, order[g]))[:k]
            take.sort(key=order.get)
            for g in take:
                open(os.path.join(registry, _entry(g, pid, True)), "w").close()
            return take, not wait_auto or all(shared[g] == 0 for g in take)
        if not free:
            return [], False
        gpu = min(free, key=lambda g: (shared[g], order[g]))
        open(os.path.join(registry, _entry(gpu, pid, False)), "w").close()
        return [gpu], True


def claim(gpus, registry: str | None = None, pid: int | None = None, exclusive: bool = False,
          k: int = 1, poll: float | None = None, timeout: float | None = None, log=None,
          wait_auto: bool = True) -> list[str]:
    """Register ``pid`` (default: this process) on GPUs among ``gpus`` (a count: GPUs 0..n-1, or a
    list of CUDA_VISIBLE_DEVICES entries; see the module's doc) and return their labels, waiting (a
    poll every ``poll`` seconds) until they are granted.  ``timeout`` (seconds, None = no limit):
    TimeoutError after it, the process's entries removed.  ``exclusive`` without ``wait_auto``: mode
    own (marked, granted without waiting for the auto runs on it)."""
    gpus = _labels(gpus)
    registry = registry or registry_dir()
    pid = os.getpid() if pid is None else pid
    poll = POLL_S if poll is None else poll
    if exclusive and k > len(gpus):
        from solver.config import ConfigError

        raise ConfigError(f"--gpu exclusive:{k}: {len(gpus)} GPUs to choose from ({','.join(gpus)})")
    t0 = time.monotonic()
    said = False
    while True:
        got, granted = _locked_attempt(gpus, k, exclusive, registry, pid, wait_auto)
        if granted:
            return got
        if timeout is not None and time.monotonic() - t0 > timeout:
            release(registry, pid)
            raise TimeoutError(f"no {'free' if exclusive else 'shared'} GPU after {timeout} s")
        if log is not None and not said:
            print(f"gpuslot: waiting for {k if exclusive else 1} GPU(s) of {','.join(gpus)} "
                  f"({'exclusive' if exclusive else 'shared'}; registry {registry})", file=log, flush=True)
            said = True
        time.sleep(poll)


def release(registry: str | None = None, pid: int | None = None) -> None:
    """Remove the entries of ``pid`` (default: this process); a process that ends needs not."""
    registry = registry or registry_dir()
    pid = os.getpid() if pid is None else pid
    for name in os.listdir(registry) if os.path.isdir(registry) else []:
        entry = _parse(name)
        if entry is not None and entry[1] == pid:
            try:
                os.remove(os.path.join(registry, name))
            except FileNotFoundError:
                pass


def parse_spec(spec: str) -> tuple[str, int]:
    """('pin', N), ('auto', 1), ('exclusive', K), ('own', 1) or ('slice', 1) of a --gpu value (checked by
    gpu_option)."""
    if spec in ("auto", "slice", "own"):
        return spec, 1
    if spec == "exclusive":
        return "exclusive", 1
    if spec.startswith("exclusive:"):
        return "exclusive", int(spec.split(":", 1)[1])
    return "pin", int(spec)


def _visible_list() -> list[str] | None:
    """The entries of CUDA_VISIBLE_DEVICES, None where it is not set."""
    v = os.environ.get(ENV)
    if v is None:
        return None
    return [e.strip() for e in v.split(",") if e.strip()]


def select(spec: str | None) -> str | None:
    """Apply ``--gpu`` (None, 'auto', 'exclusive[:K]', 'own', 'slice' or an index >= 0): set CUDA_VISIBLE_DEVICES
    (and SOLVER_GPU_SLOT) and return the value set, or None where nothing was set.  Call it before
    CUDA starts; it may wait (see the module's doc).  Where CUDA_VISIBLE_DEVICES is set, auto and
    exclusive choose among its entries (a scheduler's or the user's list), and leave it alone where
    it names one GPU (or none)."""
    if spec is None:
        return None
    mode, k = parse_spec(spec)
    if mode == "pin":
        os.environ[ENV] = str(k)
        os.environ[SLOT_ENV] = json.dumps({"mode": "pin", "gpus": os.environ[ENV]})
        return os.environ[ENV]
    given = _visible_list()
    if given is not None and (len(given) == k or len(given) <= 1 and k == 1):
        # a scheduler's (or the user's) choice of this process's GPUs: it wins
        os.environ[SLOT_ENV] = json.dumps({"mode": mode, "gpus": os.environ[ENV], "by": ENV})
        return None
    candidates = given if given is not None else host_gpus()
    n = len(candidates) if given is not None else candidates
    if n <= 1 and k <= 1:
        return None
    t0 = time.monotonic()
    gpus = claim(candidates, exclusive=mode != "auto", k=k, log=sys.stderr, wait_auto=mode != "own")
    os.environ[ENV] = ",".join(gpus)
    rec = {"mode": mode, "gpus": os.environ[ENV], "host_gpus": n, "wait_s": round(time.monotonic() - t0, 3)}
    if given is not None:
        rec["among"] = ",".join(given)
    if mode == "slice":
        share = cpu_share(os.sched_getaffinity(0), _labels(candidates).index(gpus[0]), n)
        os.sched_setaffinity(0, share)  # threads started later (numba, BLAS, CUDA's) inherit it
        rec["cpus"] = cpu_list_text(share)
    os.environ[SLOT_ENV] = json.dumps(rec)
    return os.environ[ENV]


def cpu_topology(cpu: int) -> tuple[int, int]:
    """(socket, core) of a logical CPU from sysfs; (0, cpu) where sysfs does not say."""
    base = f"/sys/devices/system/cpu/cpu{cpu}/topology/"
    try:
        with open(base + "physical_package_id") as f:
            package = int(f.read())
        with open(base + "core_id") as f:
            core = int(f.read())
    except (OSError, ValueError):
        return 0, cpu
    return package, core


def cpu_share(cpus, position: int, n: int, topology=None) -> list[int]:
    """The CPUs of slice ``position`` of ``n``: the CPUs ``cpus`` ordered by (socket, core, CPU),
    so that SMT siblings and sockets stay together, cut into n parts of equal size (+-1); with
    fewer CPUs than slices, every slice gets all of them."""
    topology = topology or cpu_topology
    order = sorted(cpus, key=lambda c: (*topology(c), c))
    m = len(order)
    if m < n:
        return sorted(order)
    return sorted(order[position * m // n:(position + 1) * m // n])


def cpu_list_text(cpus) -> str:
    """'0-7,32-39' of a set of CPU numbers."""
    runs = []  # [first, last] of each run of consecutive numbers
    for c in sorted(cpus):
        if runs and c == runs[-1][1] + 1:
            runs[-1][1] = c
        else:
            runs.append([c, c])
    return ",".join(f"{a}-{b}" if b != a else str(a) for a, b in runs)


def slot_record() -> dict | None:
    """The SOLVER_GPU_SLOT of this process (for run.json), or None."""
    text = os.environ.get(SLOT_ENV)
    if not text:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return {"raw": text}


def gpu_option(text: str) -> str:
    """argparse type of ``--gpu``: 'auto', 'exclusive', 'exclusive:K' (K >= 1), 'own', 'slice' or an
    integer >= 0, with a one-line error otherwise."""
    import argparse

    if text in ("auto", "exclusive", "own", "slice") or (text.isdigit() and int(text) >= 0):
        return text
    if text.startswith("exclusive:") and text[10:].isdigit() and int(text[10:]) >= 1:
        return text
    raise argparse.ArgumentTypeError(
        f"--gpu must be 'auto', 'exclusive', 'exclusive:K' (K >= 1), 'own', 'slice' or a GPU index >= 0, got {text!r}")


def visible_gpus() -> int:
    """GPUs this process may use: the entries of CUDA_VISIBLE_DEVICES where set, else host_gpus()."""
    v = os.environ.get(ENV)
    if v is not None:
        return len([e for e in v.split(",") if e.strip() and e.strip() != "-1"])
    return host_gpus()
