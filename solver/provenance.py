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
    # and, with or without .git, the code itself: the git tree id of the solver package as it is on
    # disk.  `git rev-parse COMMIT:solver` gives the same id for the commit whose package this is
    # (tools/which_commit.sh finds it), so a result names its code even from a copy.
    try:
        out["solver_tree"] = tree_id(Path(__file__).resolve().parent)
    except OSError:
        out["solver_tree"] = None
    # whether ``commit`` holds this code: False where the .git is older than the files (a copy)
    if out.get("commit") and out.get("solver_tree"):
        try:
            out["commit_has_this_solver"] = _git("rev-parse", "-q", "--verify", "HEAD:solver") == out["solver_tree"]
        except Exception:
            pass
    return out


# files a working tree holds that git does not track (.gitignore): bytecode, numba's cache, packaging
_UNTRACKED_DIRS = {"__pycache__", ".pytest_cache"}
_UNTRACKED_SUFFIXES = (".pyc", ".pyo", ".nbi", ".nbc", ".egg-info", ".h5", ".hdf5")


def tree_id(folder) -> str:
    """Git's object id (SHA-1) of the tree of ``folder`` as it is on disk, computed as git does
    (blobs "blob <size>\\0<bytes>", entries "<mode> <name>\\0<id>" sorted with folders as "<name>/",
    modes 100644 / 100755 / 120000 / 40000, empty folders left out), without git: equal to
    ``git rev-parse HEAD:<folder>`` when the folder holds exactly the tracked files of HEAD."""
    entries = []
    with os.scandir(folder) as it:
        for e in it:
            if (e.name in _UNTRACKED_DIRS or e.name.endswith(_UNTRACKED_SUFFIXES) or e.name == ".git"
                    or e.name.startswith(".tmp")):
                continue
            if e.is_symlink():
                mode, oid = "120000", _object_id(b"blob", os.readlink(e.path).encode())
            elif e.is_dir():
                sub = tree_id(e.path)
                if sub is None:
                    continue
                mode, oid = "40000", sub
            else:
                with open(e.path, "rb") as f:
                    data = f.read()
                mode = "100755" if os.access(e.path, os.X_OK) else "100644"
                oid = _object_id(b"blob", data)
            entries.append((e.name + "/" if mode == "40000" else e.name, mode, e.name, oid))
    if not entries:
        return None
    body = b"".join(f"{mode} {name}".encode() + b"\0" + bytes.fromhex(oid)
                    for _, mode, name, oid in sorted(entries, key=lambda t: t[0].encode()))
    return _object_id(b"tree", body)


def _object_id(kind: bytes, data: bytes) -> str:
    return hashlib.sha1(kind + b" " + str(len(data)).encode() + b"\0" + data).hexdigest()


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


def _gpu_slot():
    from solver.gpuslot import slot_record

    return slot_record()


# keys left out of config_hash: they never change a result, so a run folder (its checkpoint, fields and snapshots)
# stays the same configuration's when only they change.  output.on_fault changes what a run writes when it fails:
# a point that faulted with stop resumes from its checkpoint with record (the I-V workflow's).
# numerics.wenox_kernel chooses between two kernels with the same bits (walk, tile; docs/performance-bte-kernels.md
# section 20.5): its default changed from walk to tile, and checkpoints written before (with or without the key) resume.
# output.checkpoint_every_s (a wall-clock checkpoint interval) decides only where checkpoints fall, never a result.
HASH_NEUTRAL = (("output", "on_fault"), ("numerics", "wenox_kernel"), ("output", "checkpoint_every_s"),
                ("numerics", "bte_speculate"))


def config_hash(config) -> str:
    """Short hash of a (resolved) configuration, less the HASH_NEUTRAL keys."""
    for section, key in HASH_NEUTRAL:
        if isinstance(config, dict) and isinstance(config.get(section), dict) and key in config[section]:
            config = {**config, section: {k: v for k, v in config[section].items() if k != key}}
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
    slot = _gpu_slot()
    if slot is not None:  # which GPU of a host with several (solver/gpuslot.py)
        rec["gpu_slot"] = slot
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


def code_id(g: dict) -> str:
    """One name for the code of a run's ``git`` record: the sender's commit of a copied tree, else
    the commit ('-dirty' when modified), else (no .git, or one older than the files) the solver
    package's tree id as 'tree:<id>' (tools/which_commit.sh finds its commit); 'unknown' without
    any of them."""
    if g.get("source_commit"):
        return str(g["source_commit"])
    if g.get("commit") and g.get("commit_has_this_solver", True) is not False:
        return f"{g['commit']}-dirty" if g.get("dirty") else str(g["commit"])
    if g.get("solver_tree"):
        return f"tree:{g['solver_tree'][:12]}"
    return "unknown"
