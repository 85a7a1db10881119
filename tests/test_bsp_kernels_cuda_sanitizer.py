"""compute-sanitizer over every CUDA kernel of the solver for one coarse step (issue #17):
memcheck (out-of-bounds and misaligned accesses, invalid frees) and racecheck (shared-memory
hazards) must report 0 errors and 0 hazards.  GPU only; the logs of the committed run are under
results/nvidia-h200/bsp/device/sanitizer_*.log."""
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
# one coarse step with the default config: start-up (INITCOND, THERMEQUIL) and the three RK stages
# run every kernel of the cupy table (WENO x/w/phi, scattering, RK, eigen NR + bisection + ipim,
# Frechet, Newton construct/solve/glue)
RUN = ["-m", "solver", "run", "config/coarse.yaml", "--set", "time.steps=1", "--set", "time.t_end_ps=null",
       "--set", "output.checkpoint_every_steps=0", "--no-progress"]


@pytest.mark.gpu
@pytest.mark.parametrize("tool", ["memcheck", "racecheck"])
def test_compute_sanitizer_one_coarse_step(cupy_backend, tool, tmp_path):
    exe = shutil.which("compute-sanitizer")
    if exe is None:
        pytest.skip("compute-sanitizer not on PATH")
    log = tmp_path / f"sanitizer_{tool}.log"
    cmd = [exe, "--tool", tool, "--log-file", str(log), sys.executable, *RUN, "--out", str(tmp_path / "run")]
    r = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=900,
                       env=dict(os.environ, PYTHONPATH=str(REPO)))
    text = log.read_text()
    keep = os.environ.get("BSP_SANITIZER_LOGS")  # a folder to keep the logs in (device sessions)
    if keep:
        shutil.copy(log, Path(keep) / log.name)
    assert r.returncode == 0, (r.stderr[-2000:], text[-2000:])
    assert sanitizer_clean(tool, text), text[-4000:]


def sanitizer_clean(tool: str, text: str) -> bool:
    """memcheck ends with 'ERROR SUMMARY: N errors', racecheck with 'RACECHECK SUMMARY: N hazards
    displayed (E errors, W warnings)'; clean = that line is there and every count is 0."""
    if tool == "racecheck":
        m = re.findall(r"RACECHECK SUMMARY: (\d+) hazards? displayed \((\d+) errors?, (\d+) warnings?\)", text)
    else:
        m = re.findall(r"ERROR SUMMARY: (\d+) errors?", text)
    return bool(m) and all(int(v) == 0 for v in (m[-1] if isinstance(m[-1], tuple) else (m[-1],)))


def test_sanitizer_summary_parsing():
    """The summary lines as compute-sanitizer 2025.3 writes them (H200, 2026-11-24), clean and not."""
    assert sanitizer_clean("memcheck", "========= ERROR SUMMARY: 0 errors\n")
    assert not sanitizer_clean("memcheck", "========= ERROR SUMMARY: 2 errors\n")
    assert not sanitizer_clean("memcheck", "========= COMPUTE-SANITIZER\n")
    assert sanitizer_clean("racecheck", "========= RACECHECK SUMMARY: 0 hazards displayed (0 errors, 0 warnings)\n")
    assert not sanitizer_clean("racecheck", "========= RACECHECK SUMMARY: 3 hazards displayed (1 error, 2 warnings)\n")
    assert not sanitizer_clean("racecheck", "========= ERROR SUMMARY: 0 errors\n")
