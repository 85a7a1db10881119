"""Provenance recorded with every result (after benchopt's sys_info): git commit, resolved
config, device, driver, library versions, CPU, threads, date."""
from __future__ import annotations

import datetime as _dt
import hashlib
import json
import os
import platform
import re
import subprocess
from pathlib import Path

from solver.backend import cpu_model, gpu_available

# distribution names (importlib.metadata), so nothing is imported just to read a version
LIBRARIES = ("numpy", "scipy", "pandas", "h5py", "matplotlib", "numba", "cupy-cuda13x", "cupy-cuda12x",
             "snakemake", "pyyaml", "jsonschema")


def git_info(cwd: str | os.PathLike | None = None) -> dict:
    cwd = cwd or Path(__file__).resolve().parent
    def _git(*args):
        return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, timeout=10).stdout.strip()
    try:
        commit = _git("rev-parse", "--verify", "-q", "HEAD")
        dirty = bool(_git("status", "--porcelain", "--untracked-files=no"))
        out = {"commit": commit or None, "dirty": dirty}
    except Exception:
        out = {"commit": None, "dirty": None}
    # a copied working tree (the device machine) may carry an older .git: the sender names the
    # commit it copied from
    if os.environ.get("SOLVER_SOURCE_COMMIT"):
        out["source_commit"] = os.environ["SOLVER_SOURCE_COMMIT"]
    return out


def library_versions() -> dict:
    import importlib.metadata  # ~30 ms: only where a record is written, not at every start-up

    out = {"python": platform.python_version()}
    for name in LIBRARIES:
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            out[name] = None
    return out


def thread_settings() -> dict:
    keys = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "NUMBA_NUM_THREADS", "NUMBA_THREADING_LAYER",
            "CUDA_VISIBLE_DEVICES")
    out = {"cpu_count": os.cpu_count()}
    try:
        out["affinity"] = len(os.sched_getaffinity(0))
    except AttributeError:
        pass
    out.update({k: os.environ.get(k) for k in keys})
    return out


def config_hash(config) -> str:
    blob = json.dumps(config, sort_keys=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:16]


def collect(config=None, backend=None, extra: dict | None = None) -> dict:
    """The ``run.json`` record of one run."""
    rec = {
        "date_utc": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "hostname": platform.node(),
        "platform": platform.platform(),
        "cpu": cpu_model(),
        "machine_tag": machine_tag(backend),
        "git": git_info(),
        "libraries": library_versions(),
        "threads": thread_settings(),
    }
    if backend is not None:
        rec["device"] = backend.device_info()
    if config is not None:
        rec["config"] = config
        rec["config_hash"] = config_hash(config)
    if extra:
        rec.update(extra)
    return rec


def slug(text: str) -> str:
    text = re.sub(r"\(r\)|\(tm\)|cpu @.*$", "", text.lower())
    return re.sub(r"[^a-z0-9]+", "-", text).strip("-")


def machine_tag(backend=None) -> str:
    """Name of this machine for ``results/<machine>/``: $SOLVER_MACHINE, else the GPU name
    (e.g. ``nvidia-h200``), else the CPU model."""
    env = os.environ.get("SOLVER_MACHINE")
    if env:
        return env
    if (backend is None or backend.is_gpu) and gpu_available():
        import cupy

        name = cupy.cuda.runtime.getDeviceProperties(0)["name"]
        name = name.decode() if isinstance(name, bytes) else str(name)
        name = re.sub(r"\b(\d+gb|hbm\d*e?|sxm\d*|pcie|nvl)\b", "", name.lower())
        return slug(name)
    return "cpu-" + slug(cpu_model())
