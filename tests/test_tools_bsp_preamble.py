"""tools/bsp/_preamble.sh, the common start of the current device scripts, run dry (BSP_PREAMBLE_DRY=1:
the settings printed, the script stopped before anything of its own runs; no GPU): each script that
sources it gets the same environment, its own OUT default and its SOLVER_SOURCE_COMMIT rule."""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TOOLS = ROOT / "tools" / "bsp"
# script -> (OUT default or None: OUT required, SOLVER_SOURCE_COMMIT rule: None, "git" or "require")
SCRIPTS = {
    "device_run.sh": ("/tmp/bsp_out", None),
    "profile_device.sh": ("/tmp/bsp_profile_out", None),
    "iv_device.sh": ("/tmp/iv_out", None),
    "iv_campaign_device.sh": ("/tmp/iv_out", None),
    "gpu_yaml_device.sh": ("<cwd>/out", "require"),
    "session_device.sh": (None, None),
    "probe_device.sh": (None, None),
    "resolve_device.sh": (None, "git"),
    "overlap_device.sh": (None, "git"),
    "iv_step_probe.sh": (None, "require"),
    "iv_fault_probe.sh": (None, "require"),
    "iv_racecheck_device.sh": ("/tmp/iv_out", "require"),
    "tile_hold_device.sh": (None, "require"),
    "point_checks_device.sh": (None, "require"),
    "racecheck_probe_device.sh": (None, "require"),
    "stop_resume_device.sh": (None, "require"),
}


def dry(script, cwd, **env):
    """Run ``script`` dry in ``cwd``: (exit status, the preamble's settings as a dict, stdout + stderr)."""
    e = {k: v for k, v in os.environ.items() if k not in ("OUT", "PYTHONPATH", "SOLVER_SOURCE_COMMIT", "PY")}
    e.update(BSP_PREAMBLE_DRY="1", **env)
    p = subprocess.run(["bash", str(TOOLS / script)], cwd=cwd, env=e, capture_output=True, text=True, timeout=60)
    line = [x for x in p.stdout.splitlines() if x.startswith("preamble: OUT=")]
    settings = dict(kv.split("=", 1) for kv in line[-1][len("preamble: "):].split(" ")) if line else {}
    return p.returncode, settings, p.stdout + p.stderr


def test_the_current_scripts_source_the_preamble():
    sourcing = sorted(f.name for f in TOOLS.glob("*.sh") if f.name != "_preamble.sh" and '_preamble.sh"' in f.read_text())
    assert sourcing == sorted(SCRIPTS)


@pytest.mark.parametrize("script", sorted(SCRIPTS))
def test_dry_preamble(script, tmp_path):
    out = tmp_path / "out" / "deeper"
    rc, s, text = dry(script, ROOT, OUT=str(out), PYTHONPATH="/x/site", SOLVER_SOURCE_COMMIT="abc123")
    assert rc == 0, text
    assert s == {"OUT": str(out), "PY": "python3", "PYTHONPATH": f"{ROOT}:/x/site", "SOLVER_SOURCE_COMMIT": "abc123",
                 "MPLBACKEND": "Agg", "PYTHONUNBUFFERED": "1"}
    assert out.is_dir()
    # the tree already on PYTHONPATH (not first): left as it is
    rc, s, text = dry(script, ROOT, OUT=str(out), PYTHONPATH=f"/x/site:{ROOT}", SOLVER_SOURCE_COMMIT="abc123")
    assert rc == 0 and s["PYTHONPATH"] == f"/x/site:{ROOT}", text


@pytest.mark.parametrize("script", sorted(SCRIPTS))
def test_dry_preamble_out_and_commit_rules(script, tmp_path):
    default, commit = SCRIPTS[script]
    rc, s, text = dry(script, tmp_path, OUT=str(tmp_path / "o"))  # no SOLVER_SOURCE_COMMIT; run from elsewhere
    if commit == "require":
        assert rc == 2 and "set SOLVER_SOURCE_COMMIT" in text and not (tmp_path / "o").exists()
    else:
        assert rc == 0, text
        assert s["PYTHONPATH"] == str(tmp_path)  # the working directory, not the script's folder
        if commit == "git":
            head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=tmp_path, capture_output=True, text=True)
            assert s["SOLVER_SOURCE_COMMIT"] == (head.stdout.strip() if head.returncode == 0 else "unknown")
        else:
            assert s["SOLVER_SOURCE_COMMIT"] == ""
    if default is None:
        rc, s, text = dry(script, tmp_path, SOLVER_SOURCE_COMMIT="abc")
        assert rc != 0 and "set OUT" in text and not s
    elif default.startswith("<cwd>"):
        rc, s, text = dry(script, tmp_path, SOLVER_SOURCE_COMMIT="abc")
        assert rc == 0 and s["OUT"] == str(tmp_path / "out") and (tmp_path / "out").is_dir(), text
    else:  # a fixed folder under /tmp (made by the dry run too: mkdir -p of an empty folder)
        rc, s, text = dry(script, tmp_path, SOLVER_SOURCE_COMMIT="abc")
        assert rc == 0 and s["OUT"] == default, text


def test_dry_preamble_wheels(tmp_path):
    """BSP_WHL scripts with a .whl folder would install it (the dry run says so and installs nothing);
    the others do not look at it."""
    (tmp_path / ".whl").mkdir()
    for script, _ in SCRIPTS.items():
        rc, s, text = dry(script, tmp_path, OUT=str(tmp_path / "o"), SOLVER_SOURCE_COMMIT="abc")
        assert rc == 0, text
        whl = 'BSP_WHL=1; . "$(dirname "$0")/_preamble.sh"' in (TOOLS / script).read_text()
        assert ("would install .whl/*.whl into /tmp/site" in text) == whl, script
    assert [s for s in SCRIPTS if "BSP_WHL=1" in (TOOLS / s).read_text()] == \
        ["device_run.sh", "profile_device.sh", "iv_device.sh"]


def test_preamble_refuses_an_unknown_commit_rule(tmp_path):
    script = tmp_path / "x.sh"
    script.write_text(f'BSP_COMMIT=always; . "{TOOLS}/_preamble.sh"\necho ran\n')
    p = subprocess.run(["bash", str(script)], cwd=tmp_path, env={**os.environ, "OUT": str(tmp_path)},
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 2 and "BSP_COMMIT is require, git or unset" in p.stderr and "ran" not in p.stdout
