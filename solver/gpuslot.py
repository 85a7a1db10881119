"""Which GPU a run takes on a host with several (``python -m solver run --gpu auto|N``).

A study of many independent runs (the ``iv`` bias points, a sweep) on one host with several GPUs
starts them side by side; without a choice every process would open GPU 0. ``--gpu N`` pins the
run to GPU N; ``--gpu auto`` gives it the GPU with the fewest live ``--gpu auto`` runs of this user
on this host (ties: the lowest index), counted in a small registry under the temporary folder:
one empty file ``<gpu>-<pid>`` per run, guarded by a file lock, entries of dead processes
dropped. Both work by setting CUDA_VISIBLE_DEVICES before CUDA starts, so the run sees its GPU as
device 0. A scheduler's choice wins: where CUDA_VISIBLE_DEVICES is already set (SLURM's
``--gpus``), ``auto`` leaves it alone. With one GPU or none, ``auto`` does nothing.

Placement only: the numerics, the configuration and its hash do not depend on it (runs on GPUs of
the same model are bitwise identical); run.json's environment records CUDA_VISIBLE_DEVICES.
"""
from __future__ import annotations

import glob
import os
import tempfile

ENV = "CUDA_VISIBLE_DEVICES"


def host_gpus() -> int:
    """Number of NVIDIA GPUs this process can open: the /dev/nvidia<N> device files (no CUDA
    start, no subprocess)."""
    return len(glob.glob("/dev/nvidia[0-9]*"))


def registry_dir() -> str:
    return os.path.join(tempfile.gettempdir(), f"solver-gpu-slots-{os.getuid()}")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process with this pid: alive
        return True
    return True


def claim(n_gpus: int, registry: str | None = None, pid: int | None = None) -> int:
    """Register ``pid`` (default: this process) on the least-used of ``n_gpus`` GPUs and return
    its index."""
    import fcntl

    registry = registry or registry_dir()
    pid = os.getpid() if pid is None else pid
    os.makedirs(registry, exist_ok=True)
    with open(os.path.join(registry, "lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        load = [0] * n_gpus
        for name in os.listdir(registry):
            gpu, sep, owner = name.partition("-")
            if not (sep and gpu.isdigit() and owner.isdigit()):
                continue
            if _alive(int(owner)) and int(owner) != pid and int(gpu) < n_gpus:
                load[int(gpu)] += 1
            else:
                try:
                    os.remove(os.path.join(registry, name))
                except FileNotFoundError:
                    pass
        gpu = min(range(n_gpus), key=lambda g: (load[g], g))
        open(os.path.join(registry, f"{gpu}-{pid}"), "w").close()
    return gpu


def select(spec: str | None) -> str | None:
    """Apply ``--gpu`` (None, 'auto' or an index >= 0): set CUDA_VISIBLE_DEVICES and return the
    value set, or None where nothing was set. Call it before CUDA starts."""
    if spec is None:
        return None
    if spec != "auto":
        os.environ[ENV] = str(int(spec))
        return os.environ[ENV]
    if os.environ.get(ENV) is not None:
        return None
    n = host_gpus()
    if n <= 1:
        return None
    os.environ[ENV] = str(claim(n))
    return os.environ[ENV]


def gpu_option(text: str) -> str:
    """argparse type of ``--gpu``: 'auto' or an integer >= 0, with a one-line error otherwise."""
    import argparse

    if text == "auto" or (text.isdigit() and int(text) >= 0):
        return text
    raise argparse.ArgumentTypeError(f"--gpu must be 'auto' or a GPU index >= 0, got {text!r}")
