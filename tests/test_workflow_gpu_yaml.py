"""The paper-scale plan of config/gpu.yaml (issue #15), from a dry run: every run it plans, the
NumPy baseline capped at a few steps, the checkpoint cadence of the timing runs, the validation."""
import os
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
    # sections: numba x5 + cupy on the timing mesh with the Newton iteration ungraphed
    assert _count(dry, "bsp_run") == 6 + 25 + 20 + 5
    assert _count(dry, "bsp_run_gpu") == 1 + 5 + 4 + 5 + 1
    assert _count(dry, "bsp_bench_case") == 5 and _count(dry, "bsp_bench_case_gpu") == 9  # one job per bench case
    for rule in ("bsp_validate", "bsp_bench", "bsp_table4_000_kernel_profile", "bsp_tables1_4_001_iter_kernels",
                 "bsp_fig10_000_overlap", "compare_ceilings"):
        assert _count(dry, rule) == 1, rule
    assert _count(dry, "compare_study") == 4


def test_run_lengths_and_checkpoints(dry):
    runs = set(re.findall(r"solver (?:--gpu exclusive )?run \S+ --out \S+/runs/([\w.]+)/(\S+)/(\w+) .*", dry))
    by = {(m, v): ts for ts, m, v in runs if ts.startswith("steps")}
    assert by[("6x65x65x300x48", "numpy_t1")] == "steps4"
    assert by[("6x65x65x300x48", "numba_t1")] == "steps22" and by[("6x129x129x600x96", "numba_t16")] == "steps22"
    assert by[("6x129x129x600x96", "cupy_t1")] == "steps22"
    assert {m for ts, m, v in runs if ts == "ps0.1" and v == "cupy_t1"} == {"6x33x33x150x24", "6x49x49x225x36", "6x65x65x300x48",
                                                                  "6x97x97x450x72", "6x129x129x600x96"}
    for line in re.findall(r"solver (?:--gpu exclusive )?run .*", dry):
        assert bool(re.search(r"output\.checkpoint_every_steps=5(?!\d)", line)) == ("/runs/steps" in line or
                                                                                "/runs/sections" in line), line
        # the sections runs (and only they) time the Newton iteration ungraphed
        assert ("numerics.iter_graph=false" in line) == ("/runs/sections22/" in line), line
    assert {(m, v) for ts, m, v in runs if ts == "sections22"} == {
        ("6x65x65x300x48", v) for v in ("numba_t1", "numba_t2", "numba_t4", "numba_t8", "numba_t16", "cupy_t1")}


# ------------------------------------------------------------------ several GPUs on one host
# A fake four-GPU host: CUDA_VISIBLE_DEVICES=0,1,2,3 (common.smk counts its entries, as gpuslot
# chooses among them), 64 cores.  docs/workflow.md, "Several GPUs on one host".
def _dry_multi(tmp_path_factory, *extra, config=()):
    if shutil.which("snakemake") is None:
        pytest.skip("snakemake not installed")
    out = tmp_path_factory.mktemp("gpu_yaml_multi")
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="0,1,2,3")
    r = subprocess.run(["snakemake", "-n", "--printshellcmds", "--cores", "64", *extra, "--configfile", "config/gpu.yaml",
                        "--config", f"results_dir={out}", "machine=nvidia-h200", *config], cwd=REPO,
                       capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    return r.stdout + r.stderr


def _jobs(text):
    """(rule, threads, gpu resource, shell command) of every job of a dry run."""
    jobs = []
    for line in text.splitlines():
        s = line.strip()
        m = re.match(r"^(?:local)?rule (\w+):$", s)
        if m:
            jobs.append({"rule": m.group(1), "threads": 1, "gpu": 0, "shell": ""})
        elif jobs and s.startswith("threads: "):
            jobs[-1]["threads"] = int(s.split()[1])
        elif jobs and s.startswith("resources: "):
            g = re.search(r"\bgpu=(\d+)", s)
            jobs[-1]["gpu"] = int(g.group(1)) if g else 0
        elif jobs and s.startswith("Shell command: "):
            jobs[-1]["shell"] = s
    return jobs


GPU_TIMING_RULES = {"bsp_run_gpu", "bsp_bench_case_gpu", "bsp_table4_000_kernel_profile",
                    "bsp_tables1_4_001_iter_kernels", "bsp_fig10_000_overlap", "collision_relax",
                    "collision_maxwellian", "collision_bkw", "collision_bench"}


@pytest.fixture(scope="module")
def dry4(tmp_path_factory):
    return _dry_multi(tmp_path_factory, "--resources", "gpu=4")


CPU_TIMING_RULES = {"bsp_run", "bsp_bench_case", "bsp_table2_000_krylov"}


def test_four_gpus_four_slices(dry4):
    # gpu.yaml's host_slices: the host is four one-GPU hosts; every timing job, CPU or GPU, takes
    # a slice (a GPU and a quarter of the cores, pinned: --gpu slice), so four run side by side
    jobs = _jobs(dry4)
    gpu_jobs = [j for j in jobs if j["gpu"]]
    assert {j["rule"] for j in gpu_jobs} >= GPU_TIMING_RULES | CPU_TIMING_RULES | {"iv_point", "rgf_scaling_run",
                                                                                   "vecops_table1"}
    for j in gpu_jobs:
        assert j["gpu"] == 1, j  # the local total (--resources gpu=4) = GPU jobs at once
        if j["rule"].startswith("iv_"):  # many bias points per GPU: shared
            assert " --gpu auto " in j["shell"] and "--gpu exclusive" not in j["shell"], j
        elif j["rule"] == "rgf_scaling_run":  # W workers take W GPUs
            assert re.search(r"-m solver --gpu exclusive:\d+ ", j["shell"]), j
        elif j["rule"] == "rgf_table3_fig7_cases":  # a timing job: a slice and its 16 threads, not the host's 64
            assert j["threads"] == 16 and re.search(r"NUMBA_NUM_THREADS=16 \S+ -m solver --gpu slice rgf ", j["shell"]), j
        else:
            assert re.search(r"-m solver --gpu slice ", j["shell"]), j
        if j["rule"] in GPU_TIMING_RULES | CPU_TIMING_RULES:
            assert j["threads"] == 16, j
    # the numba runs keep their own thread counts inside the slice
    assert re.search(r"NUMBA_NUM_THREADS=1 \S+ -m solver --gpu slice run \S+ --out \S+/numba_t1 --backend numba "
                     r"--threads 1 ", dry4)
    assert sum(j["rule"] == "bsp_bench_case_gpu" for j in jobs) == 9
    assert not [j for j in jobs if not j["gpu"] and "--gpu" in j["shell"]]


def test_four_gpus_without_slices_a_cpu_timing_run_holds_the_host(tmp_path_factory):
    jobs = _jobs(_dry_multi(tmp_path_factory, "--resources", "gpu=4", config=["host_slices=False"]))
    for j in jobs:
        if j["rule"] in GPU_TIMING_RULES:  # a GPU of their own, a quarter of the cores each
            assert j["threads"] == 16 and j["gpu"] == 1, j
            assert re.search(r"-m solver --gpu exclusive(:1)? ", j["shell"]), j
        if j["rule"] in CPU_TIMING_RULES:  # every core, no GPU
            assert j["threads"] == 64 and j["gpu"] == 0 and "--gpu" not in j["shell"], j
        if j["rule"] == "rgf_table3_fig7_cases":  # every core and a GPU (case 5), not pinned
            assert j["threads"] == 64 and re.search(r"NUMBA_NUM_THREADS=64 \S+ -m solver --gpu exclusive rgf ", j["shell"]), j
    assert "rgf_table3_fig7_cases" in {j["rule"] for j in jobs}


def test_four_gpus_one_gpu_job_at_a_time_by_default(tmp_path_factory):
    # profiles/default's gpu=1: one GPU job at a time, holding every core; the note says how to spread
    text = _dry_multi(tmp_path_factory)
    assert "note: 4 GPUs visible, 1 GPU job(s) at a time (resource gpu); --resources gpu=4 runs one per GPU" in text
    threads = {j["threads"] for j in _jobs(text) if j["rule"] in GPU_TIMING_RULES}
    assert threads == {64}
