"""Routing of the SLURM profile (profiles/slurm, docs/cluster.md): every job that would be submitted
goes where its resources say, and no rule falls through to defaults.

The DAGs come from Snakemake's own command line with `--profile profiles/slurm` (so the workflow
profile profiles/default is applied too, as for a user) through tests/cluster/dag_jobs.py, which
also records the sbatch options the SLURM executor plugin builds for each job.  The real submission
to a localhost SLURM is tests/cluster/slurm_smoke.sh.
"""
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
SITE = yaml.safe_load((ROOT / "profiles" / "slurm" / "site.yaml").read_text())
ROUTING = {"slurm_partition", "cpus_per_task", "mem_mb", "runtime", "gpu"}

# DAG -> command line.  -F: every job, whatever results/ already holds.
DAGS = {
    "smoke": ["--configfile", "config/smoke.yaml"],
    "gpu-on": ["--configfile", "config/gpu.yaml", "--config", "gpu=True"],
    "full-gpu-on": ["--configfile", "config/config.yaml", "--config", "gpu=True"],
    "full-gpu-off": ["--configfile", "config/config.yaml", "--config", "gpu=False"],
}
# Rules that need a GPU once the GPU is on (config gpu=True): each must be in the GPU partition.
GPU_RULES = {
    "gpu-on": {"bsp_run_gpu", "bsp_bench_case_gpu", "bsp_table4_000_kernel_profile", "bsp_tables1_4_001_iter_kernels",
            "bsp_fig10_000_overlap"},
    "full-gpu-on": {"bsp_run_gpu", "bsp_bench_case_gpu", "bsp_table4_000_kernel_profile", "bsp_tables1_4_001_iter_kernels",
                 "bsp_fig10_000_overlap", "vecops_bench_gpu", "vecops_ceilings_gpu", "vecops_table1",
                 "collision_relax", "collision_maxwellian", "collision_bkw", "collision_bench", "collision_rates",
                 "collision_relax_rk2", "collision_bkw_mesh", "collision_maxwellian_mesh", "rgf_sweep_chunk",
                 "rgf_scaling_run"},
}


_DAGS = {}


def dag(name, tmp_path_factory):
    if name in _DAGS:
        return _DAGS[name]
    out = tmp_path_factory.mktemp(name) / "jobs.json"
    cmd = [sys.executable, str(ROOT / "tests" / "cluster" / "dag_jobs.py"), str(out), "-n", "-F", "--quiet", "all",
           "--profile", "profiles/slurm", *DAGS[name]]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, f"{' '.join(cmd)}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    _DAGS[name] = json.loads(out.read_text())
    return _DAGS[name]


@pytest.fixture(scope="module", params=list(DAGS))
def jobs(request, tmp_path_factory):
    return request.param, dag(request.param, tmp_path_factory)


def option(sbatch, flag):
    """Value of an sbatch option ('-p', '--mem', '-t', '--cpus-per-task', '--gpus'), None when absent."""
    m = re.search(rf"(?:^|\s){re.escape(flag)}[=\s](\S+)", sbatch)
    return m.group(1) if m else None


def violations(job):
    """What is wrong with one submitted job (single or group): [] when it is routed as promised."""
    res, sbatch, bad = job["resources"], job["sbatch"], []
    for m in job["members"]:
        missing = ROUTING - set(m["resources"])
        if missing:
            bad.append(f"rule {m['rule']} is not routed (no {sorted(missing)}): declare resources: **cluster(...) "
                       f"or localrule: True")
    gpu = int(res.get("gpu", 0))
    want = SITE["gpu_partition"] if gpu else SITE["cpu_partition"]
    if option(sbatch, "-p") != want:
        bad.append(f"gpu={gpu} but partition {option(sbatch, '-p')!r}, not {want!r}")
    gpus = option(sbatch, "--gpus")
    want_gpus = (f"{SITE['gpu_model']}:{gpu}" if SITE.get("gpu_model") else str(gpu)) if gpu else None
    if gpus != want_gpus:
        bad.append(f"gpu={gpu} but sbatch --gpus={gpus}, not {want_gpus}")
    if option(sbatch, "--cpus-per-task") != str(job["threads"]):
        bad.append(f"--cpus-per-task={option(sbatch, '--cpus-per-task')} for {job['threads']} threads")
    if option(sbatch, "--mem") != str(res.get("mem_mb")) or option(sbatch, "-t") != str(res.get("runtime")):
        bad.append(f"--mem {option(sbatch, '--mem')} -t {option(sbatch, '-t')} for mem_mb={res.get('mem_mb')} "
                   f"runtime={res.get('runtime')}")
    if SITE.get("account") and option(sbatch, "-A") is None:
        bad.append("no -A although profiles/slurm/site.yaml sets an account")
    return [f"{job['name']}: {b}" for b in bad]


def test_every_submitted_job_is_routed(jobs):
    name, d = jobs
    submitted = [j for j in d["jobs"] if not j["local"]]
    assert submitted, f"{name}: no job would be submitted"
    bad = [v for j in submitted for v in violations(j)]
    assert not bad, f"{name}:\n" + "\n".join(bad)


def test_every_rule_is_routed_or_local(jobs):
    """Also the rules outside this DAG: each declares its cluster resources or is a local rule."""
    name, d = jobs
    bad = [r["rule"] for r in d["rules"] if not r["local"] and not ROUTING <= set(r["declared"])]
    assert not bad, f"{name}: rules neither routed by cluster() nor local: {bad}"


def test_gpu_rules_reach_the_gpu_partition(jobs):
    name, d = jobs
    on_gpu = {m["rule"] for j in d["jobs"] if not j["local"] and option(j["sbatch"], "--gpus") for m in j["members"]}
    if name in GPU_RULES:
        assert GPU_RULES[name] <= on_gpu, f"{name}: GPU rules not sent to the GPU partition: {GPU_RULES[name] - on_gpu}"
    else:
        assert not on_gpu, f"{name} (gpu off): jobs sent to the GPU partition: {on_gpu}"


def test_small_jobs_are_grouped(tmp_path_factory):
    """The sweeps of small jobs are submitted as groups (group-components in the profile); the smoke
    DAG's solver runs are all small."""
    d = dag("smoke", tmp_path_factory)
    groups = {j["group"]: len(j["members"]) for j in d["jobs"] if j["group"]}
    assert {"bsp_small", "rgf_small", "rgf_sweep", "vecops_cpu"} <= set(groups), groups
    assert all(n > 1 for n in groups.values()), groups


def test_memory_follows_the_mesh(tmp_path_factory):
    """mem_mb of a solver run grows with its mesh: Phi (N_sbn x 3 x NX x NW x NPHI doubles)."""
    d = dag("full-gpu-off", tmp_path_factory)
    runs = {m["wildcards"]["mesh"]: m["resources"]["mem_mb"] for j in d["jobs"] for m in j["members"]
            if m["rule"] == "bsp_run"}
    assert runs["6x129x129x600x96"] > 8 * (runs["6x65x65x300x48"] - 1000), runs
    assert runs["6x65x65x300x48"] > runs["6x33x33x150x24"], runs


def test_checker_catches_a_gpu_job_in_the_cpu_partition():
    """violations() is what the routing tests rely on: it must flag a misrouted GPU job."""
    res = {"gpu": 1, "slurm_partition": SITE["cpu_partition"], "cpus_per_task": 1, "mem_mb": 1000, "runtime": 10}
    job = {"name": "x", "threads": 1, "resources": res, "members": [{"rule": "x", "resources": res}],
           "sbatch": f"sbatch -p {SITE['cpu_partition']} -t 10 --mem 1000 --ntasks=1 --cpus-per-task=1"}
    found = violations(job)
    assert any("partition" in v for v in found) and any("--gpus" in v for v in found), found
    job["members"][0]["resources"] = {"mem_mb": 1000}
    assert any("not routed" in v for v in violations(job))


def test_readme_dry_run():
    """The README's cluster command works right after `pip install -e .[all]` (plugin included)."""
    cmd = [sys.executable, "-m", "snakemake", "-n", "--profile", "profiles/slurm", "--configfile", "config/smoke.yaml"]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]


def test_profile_sets_no_routing_defaults():
    """A rule without cluster() must not be routed silently by a profile default."""
    for profile in ("slurm", "default"):
        cfg = yaml.safe_load((ROOT / "profiles" / profile / "config.yaml").read_text())
        defaults = {str(item).split("=")[0] for item in cfg.get("default-resources") or []}
        assert not defaults & (ROUTING | {"slurm_account", "gpu_model"}), (profile, defaults)
