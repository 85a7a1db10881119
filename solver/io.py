"""Atomic output (temporary file, then rename): JSON, CSV, HDF5 with units as attributes.

Files get the mode a plain ``open`` would give them (0666 less the umask), and
:func:`check_out_dir` refuses an output folder that cannot be one before any work starts."""
from __future__ import annotations

import json
import os
import tempfile
from contextlib import contextmanager
from pathlib import Path

import numpy as np


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def check_out_dir(path, option: str = "--out") -> Path:
    """Refuse an output folder that is a file, lies under something that is not a folder or is not
    writable, or is the root of a git working tree (outputs belong in a folder of their own).
    Creates nothing."""
    from solver.config import ConfigError

    path = Path(path)
    if path.exists() and not path.is_dir():
        raise ConfigError(f"{option} {str(path)!r} is a file; allowed: a folder (existing or new)")
    if (path / ".git").exists():
        raise ConfigError(f"{option} {str(path)!r} is the root of a git working tree; allowed: a folder for "
                          "the outputs, e.g. results/runs/<name>")
    probe = path.absolute()
    while not probe.exists():
        probe = probe.parent
    if not probe.is_dir():
        raise ConfigError(f"{option} {str(path)!r}: {str(probe)!r} is a file; allowed: a folder (existing or new)")
    try:  # os.access says yes to root even where nothing can be written (read-only mounts, /proc)
        fd, tmp = tempfile.mkstemp(prefix=".solver-probe.", dir=probe)
    except OSError as exc:
        raise ConfigError(f"{option} {str(path)!r}: cannot write in {str(probe)!r} ({exc.strerror}); "
                          "allowed: a writable folder") from None
    os.close(fd)
    os.unlink(tmp)
    return path


@contextmanager
def atomic_path(path: str | os.PathLike):
    """Yield a temporary path beside ``path``; rename it onto ``path`` only on success, with the
    mode 0666 less the umask (mkstemp creates 0600)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        yield Path(tmp)
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def _jsonable(o):
    if isinstance(o, np.generic):
        return o.item()
    if isinstance(o, np.ndarray):
        return o.tolist()
    if isinstance(o, Path):
        return str(o)
    if isinstance(o, (set, tuple)):
        return list(o)
    return str(o)


def write_json(path, obj) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(json.dumps(obj, indent=2, sort_keys=False, default=_jsonable) + "\n")


def read_json(path):
    return json.loads(Path(path).read_text())


def write_csv(df, path, **kw) -> None:
    """Write a pandas DataFrame atomically (no index by default)."""
    kw.setdefault("index", False)
    with atomic_path(path) as tmp:
        df.to_csv(tmp, **kw)


def write_hdf5(path, datasets: dict, attrs: dict | None = None, units: dict | None = None) -> None:
    """Write ``{name: array}`` to HDF5 atomically.

    ``units[name]`` becomes the dataset attribute ``units``; ``attrs`` go on the root group
    (nested dicts are stored as JSON strings)."""
    import h5py

    units = units or {}
    with atomic_path(path) as tmp:
        with h5py.File(tmp, "w") as f:
            for name, arr in datasets.items():
                d = f.create_dataset(name, data=np.asarray(arr))
                if name in units:
                    d.attrs["units"] = units[name]
            for k, v in (attrs or {}).items():
                f.attrs[k] = json.dumps(v, default=_jsonable) if isinstance(v, (dict, list)) else v


def save_figure(fig, path, **kw) -> None:
    """Save a matplotlib figure atomically (format from the suffix)."""
    path = Path(path)
    kw.setdefault("dpi", 150)
    kw.setdefault("bbox_inches", "tight")
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format=path.suffix.lstrip(".") or "png", **kw)
