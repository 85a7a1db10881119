"""Shared infrastructure: config validation messages, atomic output, timers, provenance."""
import json

import numpy as np
import pytest

from solver import config as C
from solver import io, provenance
from solver.backend import get_backend
from solver.timing import PhaseTimer

SCHEMA = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "mesh": {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "NPHI": {"type": "integer", "minimum": 4, "multipleOf": 2, "default": 48,
                          "description": "even integer >= 4"},
                "NX": {"type": "integer", "minimum": 5, "default": 65},
            },
        },
        "cfl": {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1, "default": 0.6},
    },
}


def test_defaults_filled():
    cfg = C.validate({}, SCHEMA)
    assert cfg == {"mesh": {"NPHI": 48, "NX": 65}, "cfl": 0.6}


@pytest.mark.parametrize(
    "cfg, key, words",
    [
        ({"mesh": {"NPHI": 47}}, "mesh.NPHI", "even integer"),
        ({"cfl": 1.5}, "cfl", "< 1"),
        ({"mesh": {"NX": -3}}, "mesh.NX", ">= 5"),
        ({"mesh": {"NQ": 3}}, "mesh", "allowed keys: NPHI, NX"),
    ],
)
def test_bad_values_name_the_key(cfg, key, words):
    with pytest.raises(C.ConfigError) as exc:
        C.validate(cfg, SCHEMA)
    msg = str(exc.value)
    assert f"'{key}'" in msg and words in msg


def test_overrides_parse_yaml_scalars():
    cfg = C.apply_overrides({"mesh": {"NX": 65}}, ["mesh.NX=33", "cfl=0.5", "name=abc"])
    assert cfg == {"mesh": {"NX": 33}, "cfl": 0.5, "name": "abc"}
    with pytest.raises(C.ConfigError):
        C.apply_overrides({}, ["novalue"])


def test_missing_config_file(tmp_path):
    with pytest.raises(C.ConfigError, match="does not exist"):
        C.load_yaml(tmp_path / "nope.yaml")


def test_atomic_write_leaves_nothing_on_failure(tmp_path):
    target = tmp_path / "a.json"
    with pytest.raises(RuntimeError):
        with io.atomic_path(target) as tmp:
            tmp.write_text("partial")
            raise RuntimeError("boom")
    assert not target.exists() and list(tmp_path.iterdir()) == []
    io.write_json(target, {"x": np.float64(1.5), "a": np.arange(3)})
    assert json.loads(target.read_text()) == {"x": 1.5, "a": [0, 1, 2]}


def test_hdf5_units(tmp_path):
    h5py = pytest.importorskip("h5py")
    io.write_hdf5(tmp_path / "f.h5", {"V": np.ones((2, 3))}, attrs={"cfg": {"a": 1}}, units={"V": "V"})
    with h5py.File(tmp_path / "f.h5") as f:
        assert f["V"].attrs["units"] == "V" and f["V"].shape == (2, 3)
        assert json.loads(f.attrs["cfg"]) == {"a": 1}


def test_phase_timer_nesting_and_counts():
    t = PhaseTimer(get_backend("numpy"))
    for _ in range(3):
        with t.phase("BTE"):
            with t.phase("WENO_x"):
                sum(range(1000))
        step = t.end_step()
        assert set(step) == {"BTE", "BTE/WENO_x"}
        assert step["BTE"] >= step["BTE/WENO_x"] > 0
    s = t.summary()
    assert s["steps"] == 3 and s["calls"]["BTE/WENO_x"] == 3


def test_provenance_record():
    rec = provenance.collect({"a": 1}, get_backend("numpy"))
    for key in ("date_utc", "git", "libraries", "cpu", "threads", "device", "config_hash", "machine_tag"):
        assert key in rec
    assert rec["libraries"]["numpy"] == np.__version__
    assert rec["machine_tag"]


def test_without_jsonschema_unknown_keys_still_caught(monkeypatch, capsys):
    import sys

    monkeypatch.setitem(sys.modules, "jsonschema", None)  # import now raises ImportError
    assert C.validate({"mesh": {"NX": 33}}, SCHEMA) == {"mesh": {"NPHI": 48, "NX": 33}, "cfl": 0.6}
    with pytest.raises(C.ConfigError, match="'mesh.NQ': unknown; allowed keys: NPHI, NX"):
        C.validate({"mesh": {"NQ": 1}}, SCHEMA)
    assert "jsonschema is not installed" in capsys.readouterr().err


def test_git_info_records_the_source_commit_of_a_copied_tree(monkeypatch):
    from solver import provenance

    monkeypatch.delenv("SOLVER_SOURCE_COMMIT", raising=False)
    assert "source_commit" not in provenance.git_info()
    monkeypatch.setenv("SOLVER_SOURCE_COMMIT", "abc123")
    info = provenance.git_info()
    assert info["source_commit"] == "abc123" and "commit" in info


def test_tree_id_is_the_git_tree_of_the_folder(tmp_path):
    """provenance.tree_id computes without git what `git rev-parse HEAD:<folder>` says for a folder
    holding exactly its tracked files: nested folders, an executable, a symlink, bytes that are not
    text; bytecode and numba cache files (git-ignored) and empty folders do not count."""
    import os
    import subprocess

    repo = tmp_path / "repo"
    pkg = repo / "pkg"
    (pkg / "sub" / "deeper").mkdir(parents=True)
    (pkg / "a.py").write_text("x = 1\n")
    (pkg / "sub" / "b.cu").write_text("__global__ void k() {}\n")
    (pkg / "sub" / "deeper" / "c.bin").write_bytes(bytes(range(256)))
    (pkg / "run.sh").write_text("#!/bin/sh\necho hi\n")
    os.chmod(pkg / "run.sh", 0o755)
    os.symlink("a.py", pkg / "link.py")
    (pkg / "sub-x.py").write_text("# sorts between 'sub/' and 'sub.x'\n")
    (pkg / "sub.x").write_text("y\n")
    (repo / ".gitignore").write_text("__pycache__/\n*.pyc\n")

    def git(*a):
        return subprocess.run(["git", *a], cwd=repo, capture_output=True, text=True, check=True).stdout.strip()

    git("init", "-q")
    git("add", "-A")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "t")
    (pkg / "__pycache__").mkdir()
    (pkg / "__pycache__" / "a.cpython-311.pyc").write_bytes(b"\0\1")
    (pkg / "sub" / "k.nbi").write_bytes(b"numba")
    (pkg / "empty").mkdir()
    assert provenance.tree_id(pkg) == git("rev-parse", "HEAD:pkg")
    (pkg / "a.py").write_text("x = 2\n")  # an edit: another tree
    assert provenance.tree_id(pkg) != git("rev-parse", "HEAD:pkg")
    info = provenance.git_info()
    assert len(info["solver_tree"]) == 40
    # this checkout: the commit holds the package's files unless they are edited (then: dirty)
    assert info["commit_has_this_solver"] == (not git_status_touches_solver())


def git_status_touches_solver():
    import subprocess
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    st = subprocess.run(["git", "status", "--porcelain", "--untracked-files=normal", "solver"], cwd=root,
                        capture_output=True, text=True).stdout
    return bool(st.strip())


def test_dispatch_missing_package_vs_broken_install():
    """Only the optional package itself missing means "no fast path"; a missing submodule of an
    installed one (a broken install) or any other import error propagates."""
    from solver.dispatch import Registry

    def missing():
        raise ModuleNotFoundError("No module named 'cupy'", name="cupy")

    def broken():
        raise ModuleNotFoundError("No module named 'cupy.cublas'", name="cupy.cublas")

    def ours():
        raise ModuleNotFoundError("No module named 'solver.bsp.kernels.cuda.nope'", name="solver.bsp.kernels.cuda.nope")

    assert Registry("t", {"cupy": missing}).table("cupy") == {}
    for loader in (broken, ours):
        with pytest.raises(ModuleNotFoundError):
            Registry("t", {"cupy": loader}).table("cupy")


def test_code_id_names_the_code_not_a_stale_git():
    from solver.provenance import code_id

    assert code_id({"commit": "abc", "dirty": False, "solver_tree": "t" * 40, "commit_has_this_solver": True}) == "abc"
    assert code_id({"commit": "abc", "dirty": True, "solver_tree": "t" * 40}) == "abc-dirty"
    # the sender's name wins; a .git older than the files is not named
    assert code_id({"commit": "abc", "dirty": True, "source_commit": "def"}) == "def"
    assert code_id({"commit": "abc", "dirty": True, "solver_tree": "0123456789abcdef" * 2 + "01234567",
                    "commit_has_this_solver": False}) == "tree:0123456789ab"
    assert code_id({}) == "unknown"
