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
    summary = re.findall(r"ERROR SUMMARY: (\d+) error", text)
    assert summary, text[-2000:]
    assert int(summary[-1]) == 0, text[-4000:]
    if tool == "racecheck":
        hazards = re.findall(r"RACECHECK SUMMARY: (\d+) hazard", text)
        assert not hazards or int(hazards[-1]) == 0, text[-4000:]
