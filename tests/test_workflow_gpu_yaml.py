"""The paper-scale plan of config/gpu.yaml (issue #15), from a dry run: every run it plans, the
NumPy baseline capped at a few steps, the checkpoint cadence of the timing runs, the validation."""
import re
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def dry(tmp_path_factory):
    if shutil.which("snakemake") is None:
        pytest.skip("snakemake not installed")
    out = tmp_path_factory.mktemp("gpu_yaml")
    r = subprocess.run(["snakemake", "-n", "--printshellcmds", "--configfile", "config/gpu.yaml", "--config",
                        f"results_dir={out}", "machine=nvidia-h200"], cwd=REPO, capture_output=True, text=True)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    return r.stdout


def _count(dry, rule):
    m = re.search(rf"^{rule}\s+(\d+)$", dry, re.M)
    return int(m.group(1)) if m else 0


def test_job_counts(dry):
    # timing: numpy + numba x5 (+ cupy); scaling: 5 doubled meshes x (numba x5 + cupy);
    # grids: 4 more grids x (numba x5 + cupy); convergence: 5 cupy runs at 0.1 ps
    assert _count(dry, "bsp_run") == 6 + 25 + 20
    assert _count(dry, "bsp_run_gpu") == 1 + 5 + 4 + 5
    for rule in ("bsp_validate", "bsp_bench", "bsp_table4_000_kernel_profile", "bsp_tables1_4_001_iter_kernels",
                 "bsp_fig10_000_overlap", "compare_ceilings"):
        assert _count(dry, rule) == 1, rule
    assert _count(dry, "compare_study") == 4


def test_run_lengths_and_checkpoints(dry):
    runs = set(re.findall(r"solver run \S+ --out \S+/runs/([\w.]+)/(\S+)/(\w+) .*", dry))
    by = {(m, v): ts for ts, m, v in runs if ts.startswith("steps")}
    assert by[("6x65x65x300x48", "numpy_t1")] == "steps4"
    assert by[("6x65x65x300x48", "numba_t1")] == "steps22" and by[("6x129x129x600x96", "numba_t16")] == "steps22"
    assert by[("6x129x129x600x96", "cupy_t1")] == "steps22"
    assert {m for ts, m, v in runs if ts == "ps0.1" and v == "cupy_t1"} == {"6x33x33x150x24", "6x49x49x225x36", "6x65x65x300x48",
                                                                  "6x97x97x450x72", "6x129x129x600x96"}
    for line in re.findall(r"solver run .*", dry):
        assert bool(re.search(r"output\.checkpoint_every_steps=5(?!\d)", line)) == ("/runs/steps" in line), line
