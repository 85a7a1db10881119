# Helpers shared by every study's rules.  Each study's .smk validates its own config section,
# writes under results/<machine>/<study>/ and appends its final targets to ALL_TARGETS.
import math
import os
import shlex
import sys
from pathlib import Path

from solver.backend import gpu_available
from solver.provenance import machine_tag

# The machine tag: from config, else detected (GPU name, else the CPU model).  Timing rules write
# under results/{machine}/ constrained to this tag, so results of another machine are never
# regenerated on the wrong hardware; comparison rules read every machine found under results/.
MACHINE = config.get("machine") or "auto"
if MACHINE == "auto":
    MACHINE = machine_tag()
RESULTS = config.get("results_dir", "results")
USE_GPU = config.get("gpu", "auto") is True or (config.get("gpu", "auto") == "auto" and gpu_available())
PY = sys.executable  # the interpreter running Snakemake, which has the solver installed
SOLVER = f"{PY} -m solver"

ALL_TARGETS = []


# ------------------------------------------------------------------------ GPUs of this host
# One GPU job per GPU (docs/workflow.md, "Several GPUs on one host").  Every GPU rule declares
# resources gpu=1 (cluster(gpu=1)) and runs its command with SOLVER_GPU = `python -m solver --gpu
# exclusive`: solver/gpuslot.py gives the process a GPU with no other run (it waits for one), so
# timings never share a GPU; the iv points run `--gpu auto` (many per GPU).  The local total of the
# gpu resource is how many GPU jobs run at once: profiles/default sets gpu=1 (one at a time);
# `--resources gpu=4` on a host with 4 GPUs runs four, one per GPU.  An exclusive GPU job holds
# GPU_THREADS = cores / GPU_JOBS cores, so the GPU jobs run side by side (each with its share of the
# host) while a CPU timing run (bsp.exclusive: every core) still runs alone.  Submitted to a cluster
# (profiles/slurm) or inside a submitted job, every job has a node's share of its own: GPU_JOBS = 1;
# a scheduler's CUDA_VISIBLE_DEVICES wins over gpuslot's choice.
from solver import gpuslot

HOST_GPUS = gpuslot.visible_gpus() if USE_GPU else 0


def _gpu_jobs():
    if not workflow.local_exec or workflow.remote_exec:
        return 1
    total = workflow.global_resources.get("gpu").value
    total = HOST_GPUS if total is None else int(total)
    return max(1, min(total, HOST_GPUS))


def _cores():
    try:
        return int(workflow.cores)
    except Exception:  # no --cores (some dry runs): Snakemake caps threads at run time anyway
        return 1 << 20


GPU_JOBS = _gpu_jobs()
GPU_THREADS = max(1, _cores() // GPU_JOBS)
# config host_slices (docs/workflow.md, "Host slices"): with several GPU jobs at a time, a host of
# n GPUs is n one-GPU hosts.  Every timing job, the CPU ones (numpy, numba, Krylov) included, takes a
# slice: a GPU of its own and that GPU's share of the cores, pinned (`--gpu slice`), so CPU and GPU
# timings run side by side instead of a CPU timing run holding the whole host alone.
HOST_SLICES = bool(config.get("host_slices", False)) and USE_GPU and GPU_JOBS > 1
SOLVER_GPU = f"{SOLVER} --gpu {'slice' if HOST_SLICES else 'exclusive'}"
SOLVER_CPU_TIMING = SOLVER_GPU if HOST_SLICES else SOLVER  # a CPU timing run: a slice, or the whole host
CPU_TIMING_GPU = 1 if HOST_SLICES else 0  # the gpu resource a CPU timing run holds (its slice's GPU)
if USE_GPU and workflow.local_exec and not workflow.remote_exec and HOST_GPUS > GPU_JOBS:
    print(f"note: {HOST_GPUS} GPUs visible, {GPU_JOBS} GPU job(s) at a time (resource gpu); "
          f"--resources gpu={HOST_GPUS} runs one per GPU (docs/workflow.md)", file=sys.stderr)


wildcard_constraints:
    machine=MACHINE.replace(".", r"\."),


def res(study, *parts, machine=MACHINE):
    """results/<machine>/<study>/<parts...>"""
    return str(Path(RESULTS, machine, study, *parts))


def logf(study, name):
    return str(Path(RESULTS, MACHINE, study, "logs", f"{name}.log"))


def bench(study, name):
    return str(Path(RESULTS, MACHINE, study, "benchmarks", f"{name}.tsv"))


def machines_with(study, filename):
    """Every machine tag under results/ that has <study>/<filename> (for cross-machine tables)."""
    root = Path(RESULTS)
    found = sorted({p.relative_to(root).parts[0] for p in root.glob(f"*/{study}/{filename}")})
    return found or [MACHINE]


def report_caption(name):
    return f"../report/{name}.rst"


def section(study):
    """The config section of a study ({} when absent)."""
    return config.get(study) or {}


def enabled(study):
    return bool(section(study).get("enabled", True))


# ------------------------------------------------------------------------------------ cluster
# Where each compute job runs on a cluster (profiles/slurm, docs/cluster.md).  Every rule that is
# not `localrule: True` declares `resources: **cluster(gpu=..., mem_mb=..., runtime=...)`: a job
# with gpu > 0 goes to the site's GPU partition with a GPU request (sbatch --gpus=[model:]n), any
# other to the CPU partition; cpus_per_task is the job's threads; mem_mb and runtime (minutes) come
# from the job's mesh or problem (the *_mem_mb / *_minutes estimates below).  Each value may be a
# function of the wildcards.  The site's names are read from profiles/slurm/site.yaml only; local
# runs ignore the slurm_* resources.  tests/test_profiles.py fails for a rule that is neither
# routed here nor local.
def _cluster_site():
    import yaml

    with open(Path(workflow.current_basedir, "..", "..", "profiles", "slurm", "site.yaml")) as f:
        return yaml.safe_load(f)


CLUSTER_SITE = _cluster_site()


def _per_job(value):
    return value if callable(value) else (lambda wildcards: value)


def cluster(gpu=0, mem_mb=1000, runtime=10):
    """Cluster resources of one rule (see above): gpu, slurm_partition, cpus_per_task, mem_mb,
    runtime, and slurm_account / gpu_model when the site sets them."""
    site = CLUSTER_SITE
    gpus, mem, minutes = _per_job(gpu), _per_job(mem_mb), _per_job(runtime)
    out = dict(
        gpu=lambda wildcards: int(gpus(wildcards)),
        slurm_partition=lambda wildcards: site["gpu_partition"] if gpus(wildcards) else site["cpu_partition"],
        cpus_per_task=lambda wildcards, threads: threads,
        mem_mb=lambda wildcards: int(math.ceil(mem(wildcards))),
        runtime=lambda wildcards: int(min(math.ceil(minutes(wildcards)), site["max_runtime_min"])),
    )
    if site.get("gpu_model"):
        out["gpu_model"] = lambda wildcards: site["gpu_model"] if gpus(wildcards) else None
    if site.get("account"):
        out["slurm_account"] = site["account"]
    return out


# ---------------------------------------------------------------------------------------- bsp
# Plain config and table reads for workflow/rules/bsp.smk (no solver import while the DAG is
# built, except bsp_check_runs, which validates the planned runs with the solver's own schema).
BSP_MESH_DIMS = ("N_sbn", "NX", "NZ", "NW", "NPHI")


def bsp_get(*keys, default=None):
    """config['bsp'][k1][k2]..., or default where a key is missing or null."""
    node = section("bsp")
    for k in keys:
        if not isinstance(node, dict) or node.get(k) is None:
            return default
        node = node[k]
    return node


def bsp_mesh_name(N_sbn, NX, NZ, NW, NPHI):
    """'6x65x65x300x48' (N_sbn x NX x NZ x NW x NPHI): the mesh part of a run path."""
    return "x".join(str(int(v)) for v in (N_sbn, NX, NZ, NW, NPHI))


def bsp_parse_mesh(name):
    return dict(zip(BSP_MESH_DIMS, map(int, str(name).split("x"))))


def bsp_double(mesh, dim):
    """The mesh with one dimension doubled (NX, NZ: 2 (N - 1) + 1 nodes)."""
    m = bsp_parse_mesh(mesh)
    m[dim] = 2 * (m[dim] - 1) + 1 if dim in ("NX", "NZ") else 2 * m[dim]
    return bsp_mesh_name(*m.values())


def bsp_table(path):
    """A sweep table (tab-separated, '#' comments) read as strings."""
    import pandas as pd

    return pd.read_csv(path, sep="\t", comment="#", dtype=str).apply(lambda c: c.str.strip())


def bsp_meshes(path):
    return [bsp_mesh_name(*(r[d] for d in BSP_MESH_DIMS)) for _, r in bsp_table(path).iterrows()]


def bsp_variant_table():
    """{BACKEND_tTHREADS: max_steps or None} of the variants table (optional column max_steps: the
    variant runs at most that many steps in every series, e.g. a few for the slow NumPy baseline);
    cupy rows only where the GPU is used."""
    t = bsp_table(bsp_get("variants", default="config/bsp/variants.tsv"))
    out = {}
    for _, r in t.iterrows():
        cap = r.get("max_steps")
        if r["backend"] != "cupy" or USE_GPU:
            out[f"{r['backend']}_t{int(r['threads'])}"] = int(cap) if isinstance(cap, str) and cap else None
    return out


def bsp_variants():
    """BACKEND_tTHREADS of the variants table; cupy rows only where the GPU is used."""
    return list(bsp_variant_table())


def bsp_run(timespec, mesh, variant, name="run.json"):
    return res("bsp", "runs", timespec, mesh, variant, name)


def bsp_steps(series, variant=None, prefix="steps"):
    """steps<N> (or another prefix: sections<N>) of a series' runs: bsp.<series>.steps, capped by
    the variant's max_steps."""
    steps = int(bsp_get(series, "steps", default=10))
    cap = BSP_STEP_CAPS.get(variant) if variant else None
    return f"{prefix}{min(steps, cap) if cap else steps}"


def bsp_set_options(sets):
    return " ".join(f"--set {shlex.quote(s)}" for s in sets)


def bsp_mesh_sets(mesh):
    """--set options of a mesh and the config's extra overrides (bsp.set)."""
    return bsp_set_options([f"mesh.{k}={v}" for k, v in bsp_parse_mesh(mesh).items()] + list(bsp_get("set", default=[])))


def bsp_bench_cases():
    """MESH:BACKEND:THREADS:STEPS:WARMUP of every row of bsp.bench.cases (cupy rows only with the GPU)."""
    out = []
    for group in bsp_get("bench", "cases", default=[]):
        if group["backend"] == "cupy" and not USE_GPU:
            continue
        for mesh in group["meshes"]:
            for t in group.get("threads", [1]):
                out.append(f"{mesh}:{group['backend']}:{int(t)}:{int(group.get('steps', 10))}:{int(group.get('warmup', 2))}")
    return out


if enabled("bsp"):
    validate(config["bsp"], "../schemas/bsp.schema.yaml")

BSP_EXCLUSIVE_THREADS = GPU_THREADS if HOST_SLICES else 1 << 20  # every core (Snakemake caps at --cores), or a slice's
BSP_EXCLUSIVE = BSP_EXCLUSIVE_THREADS if bsp_get("exclusive", default=True) else 1
# a GPU timing job holds its share of the host's cores (all of them with one GPU job at a time)
BSP_GPU_THREADS = GPU_THREADS if bsp_get("exclusive", default=True) else 1
BSP_RUN_CONFIG = bsp_get("run_config", default="config/bsp/dgmosfet.yaml")
BSP_STEP_CAPS = bsp_variant_table() if enabled("bsp") else {}
BSP_VARIANTS = list(BSP_STEP_CAPS)
BSP_BASELINE = bsp_get("baseline", default="numpy_t1")
BSP_TIMING_MESH = bsp_get("timing", "mesh", default="6x65x65x300x48")
BSP_SCALING_REF = bsp_get("scaling", "reference", default="6x65x65x300x48")
BSP_SCALING_DIMS = bsp_get("scaling", "dims", default=list(BSP_MESH_DIMS))
BSP_SCALING_VARIANTS = [v for v in (bsp_get("scaling", "variants") or BSP_VARIANTS) if v in BSP_VARIANTS]
BSP_GRID_VARIANTS = [v for v in (bsp_get("grids", "variants") or BSP_VARIANTS) if v in BSP_VARIANTS]
# bsp.sections: runs of the timing mesh with numerics.iter_graph=false, whose ITER sections (eigen,
# Frechet, construct_linsys, solve_linsys) are timed in every Newton iteration; the graphed
# iteration of the timing runs (iter_graph auto: cupy, numba) times ITER only.  Table 3 and Figs 8-9
# of 001, Fig 13 and the section columns of Table 5 of 000 take their sections from these runs.
BSP_SECTIONS_VARIANTS = [v for v in (bsp_get("sections", "variants") or []) if v in BSP_VARIANTS]
BSP_GRID_MESHES = bsp_meshes(bsp_get("grids", "table", default="config/bsp/grids.tsv")) if enabled("bsp") else []
# the coarse 0.1 ps validation against the authors' reference (rule bsp_validate): a run of the
# reference's mesh to 0.1 ps with bsp.validation.variant (the convergence sequence's run when it
# has the same mesh and variant), compared by `python -m solver bsp validate`
# hardware counters (rule bsp_tables5_6_001_ncu) with the GPU where ncu exists (bsp.profile.ncu: auto),
# or always (true: a missing ncu fails the rule), or never; without them the counted table stands
_ncu = bsp_get("profile", "ncu", default="auto")
BSP_NCU = USE_GPU and (_ncu is True or (_ncu == "auto" and __import__("shutil").which("ncu") is not None))
BSP_VALIDATION = bool(bsp_get("validation", "enabled", default=True))
BSP_VALIDATION_MESH = "6x33x33x150x24"
BSP_VALIDATION_VARIANT = bsp_get("validation", "variant", default="numpy_t1")
BSP_VALIDATION_REFERENCE = bsp_get("validation", "reference")
BSP_CONV_VARIANT = bsp_get("convergence", "variant", default="numpy_t1")
BSP_CONV_TIME = f"ps{float(bsp_get('convergence', 't_end_ps', default=0.1)):g}"
BSP_CONV_MESHES = bsp_meshes(bsp_get("convergence", "table", default="config/bsp/convergence.tsv")) if enabled("bsp") else []
for _key, _v in (("bsp.validation.variant", BSP_VALIDATION_VARIANT), ("bsp.convergence.variant", BSP_CONV_VARIANT)):
    if enabled("bsp") and _v.startswith("cupy") and not USE_GPU:
        raise ValueError(f"config key {_key!r}: {_v!r} needs the GPU (config key gpu is off or no GPU was found)")
for _key, _vs in (("bsp.scaling.variants", BSP_SCALING_VARIANTS), ("bsp.grids.variants", BSP_GRID_VARIANTS)):
    if enabled("bsp") and not _vs:
        raise ValueError(f"config key {_key!r}: none of {bsp_get(*_key.split('.')[1:])} is a variant of the table "
                         f"{bsp_get('variants')} ({BSP_VARIANTS})")
if enabled("bsp") and BSP_BASELINE not in BSP_VARIANTS:
    raise ValueError(f"config key 'bsp.baseline': {BSP_BASELINE!r} is not a variant of the table "
                     f"{bsp_get('variants')} ({BSP_VARIANTS})")


def bsp_series_runs(series):
    """run.json of every run of a series: timing, scaling, grids, sections."""
    if series == "timing":
        return [bsp_run(bsp_steps("timing", v), BSP_TIMING_MESH, v) for v in BSP_VARIANTS]
    if series == "scaling":
        meshes = [BSP_SCALING_REF] + [bsp_double(BSP_SCALING_REF, d) for d in BSP_SCALING_DIMS]
        return [bsp_run(bsp_steps("scaling", v), m, v) for m in meshes for v in BSP_SCALING_VARIANTS]
    if series == "grids":
        return [bsp_run(bsp_steps("grids", v), m, v) for m in BSP_GRID_MESHES for v in BSP_GRID_VARIANTS]
    if series == "sections":
        return [bsp_run(bsp_steps("sections", v, "sections"), BSP_TIMING_MESH, v) for v in BSP_SECTIONS_VARIANTS]
    raise ValueError(series)


def bsp_timespec_steps(timespec):
    """N of a run folder's steps<N> or sections<N>; None for ps<T> (a run to T ps)."""
    for prefix in ("steps", "sections"):
        if timespec.startswith(prefix):
            return int(timespec[len(prefix):])
    return None


def bsp_set_list(mesh, timespec):
    """KEY=VALUE overrides of one run: the mesh, the time span (sections<N>: N steps with the Newton
    iteration ungraphed, bsp.sections), then the config's extra overrides."""
    sets = [f"mesh.{k}={v}" for k, v in bsp_parse_mesh(mesh).items()]
    steps = bsp_timespec_steps(timespec)
    if steps is not None:
        sets += [f"time.steps={steps}", "time.t_end_ps=null"]
        if timespec.startswith("sections"):
            sets.append("numerics.iter_graph=false")
        if bsp_get("checkpoint_steps"):  # timing runs longer than a job's time slot resume from these
            sets.append(f"output.checkpoint_every_steps={int(bsp_get('checkpoint_steps'))}")
    else:
        sets += [f"time.t_end_ps={timespec[2:]}", "time.steps=null"]
    return sets + list(bsp_get("set", default=[]))


def bsp_check_runs():
    """Validate the run configuration with every planned mesh and time span before any job runs
    (solver.bsp.model.load: the message names the key)."""
    from solver.bsp import model as bsp_model

    plans = {tuple(Path(r).parts[-4:-2][::-1]) for s in ("timing", "scaling", "grids", "sections")
             for r in bsp_series_runs(s)}
    plans |= {(m, BSP_CONV_TIME) for m in BSP_CONV_MESHES}
    if BSP_VALIDATION:
        plans.add((BSP_VALIDATION_MESH, "ps0.1"))
    for mesh, ts in sorted(plans):
        try:
            bsp_model.load(BSP_RUN_CONFIG, bsp_set_list(mesh, ts))
        except Exception as exc:
            raise ValueError(f"bsp run {mesh} ({ts}) from {BSP_RUN_CONFIG} with config bsp.set "
                             f"{bsp_get('set', default=[])}: {exc}") from None


if enabled("bsp"):
    bsp_check_runs()


# -------------------------------------------------------------------- cluster size estimates
# Memory (MB) and wall time (minutes) of the compute jobs, for cluster(...) above: upper bounds
# from the problem size, each with the measurement it rests on.  Wall time is twice the estimate
# plus 10 minutes (start-up, file system), capped at the site's limit by cluster().
def _minutes(seconds):
    return 10 + 2 * seconds / 60


# bsp: the distribution function Phi (N_sbn x 3 valleys x NX x NW x NPHI doubles) dominates memory.
# A numpy run peaks at about 10 arrays of its size (max RSS of 1-step runs on 3x9x9x12x8,
# 6x33x33x150x24, 6x33x33x300x48: 117, 287, 790 MB); 16 copies + 1 GB leave a margin.
BSP_PHI_COPIES = 16
# Seconds per step and Phi element: numpy on one core 1.1e-6 (2.28 s per step on 6x33x33x150x24,
# results/cpu-amd-epyc/bsp/tables/timing_runs.csv), an upper bound for numba at any thread count;
# cupy 1.5e-9 (20.4 ms per step on 6x65x65x300x48, H200).  A run to T ps takes about
# 400 (NX - 1) T steps (1265 steps to 0.1 ps on the coarse mesh; 4 to 7 on the smoke meshes).
BSP_STEP_SECONDS = {"numpy": 1.1e-6, "numba": 1.1e-6, "cupy": 1.5e-9}
BSP_STARTUP_SECONDS = 60


def bsp_phi_elements(mesh):
    m = bsp_parse_mesh(mesh)
    return m["N_sbn"] * 3 * m["NX"] * m["NW"] * m["NPHI"]


def bsp_mem_mb(mesh, copies=BSP_PHI_COPIES):
    return 1000 + copies * 8 * bsp_phi_elements(mesh) / 2**20


def bsp_step_count(mesh, timespec):
    """Time steps of a run: steps<N> (sections<N>), or ps<T> estimated from the x mesh (CFL)."""
    steps = bsp_timespec_steps(timespec)
    if steps is not None:
        return steps
    return math.ceil(400 * (bsp_parse_mesh(mesh)["NX"] - 1) * float(timespec[2:]))


def bsp_seconds(mesh, steps, backend):
    return BSP_STARTUP_SECONDS + steps * BSP_STEP_SECONDS[backend] * bsp_phi_elements(mesh)


def bsp_run_minutes(wildcards):
    return _minutes(bsp_seconds(wildcards.mesh, bsp_step_count(wildcards.mesh, wildcards.timespec), wildcards.backend))


def bsp_run_mem_mb(wildcards):
    return bsp_mem_mb(wildcards.mesh)


def bsp_run_group(wildcards):
    """Runs estimated under 30 minutes share a submission (group bsp_small), the rest run alone."""
    return "bsp_small" if bsp_run_minutes(wildcards) < 30 else None


def bsp_krylov_minutes(mesh, steps):
    """The capture run on the krylov mesh, then the solver x preconditioner x thread benchmark on
    its Newton systems (N_sbn x NX x NZ unknowns, seconds per solve): 30 minutes."""
    return _minutes(bsp_seconds(mesh, int(steps), "numpy") + 1800)


def bsp_bench_case_dir(case):
    """results/<machine>/bsp/bench/cases/<mesh>_<backend>_t<threads>_s<steps>_w<warmup> of a case
    MESH:BACKEND:THREADS:STEPS:WARMUP (rules bsp_bench_case, bsp_bench_case_gpu)."""
    mesh, backend, threads, steps, warmup = case.split(":")
    return res("bsp", "bench", "cases", f"{mesh}_{backend}_t{threads}_s{steps}_w{warmup}")


def bsp_bench_case_minutes(wildcards):
    """One case of bsp.bench, cut at bsp.bench.timeout_s."""
    timeout = bsp_get("bench", "timeout_s")
    s = bsp_seconds(wildcards.mesh, int(wildcards.steps) + int(wildcards.warmup), wildcards.backend)
    return _minutes(min(s, timeout) if timeout else s)


# collision: the coefficient table grows as N^4.8 (HDF5 cache 0.18, 1.2, 4.8 MB at N = 8, 12, 16;
# max RSS 219, 226, 255 MB); the gain evaluation as N^8 (docs/performance-collision.md: 2.34 s per
# evaluation at 16^3 with numba on 16 cores, 0.009 s on an H100).  Per run: 30 CPU minutes or 1
# GPU minute at N = 16, scaled with N^8.
def collision_mem_mb(N):
    return 1000 + 4 * 5 * (int(N) / 16) ** 5


def collision_minutes(N, gpu):
    return 10 + (1 if gpu else 30) * (int(N) / 16) ** 8


# rgf: blocks of n = 20 ny nz orbitals (sp3d5s*, 2 atoms per layer and cross-section cell; 40 with
# spin-orbit), 4 blocks per unit cell; gL and gR keep N n^2 complex numbers (41.9 GB for the
# 8 x 16 x 100 wire, docs/performance-rgf.md), times the energies of a batch.  About 83 n^3
# flop per block and energy (5.6e14 flop per energy at full size), at 1e10 flop/s on one core
# and 3e13 on a GPU (19 s per energy on an H100).
def rgf_block(ny, nz, spin_orbit=False):
    return 20 * int(ny) * int(nz) * (2 if spin_orbit else 1)


def rgf_mem_mb(ny, nz, xuc, spin_orbit=False, batch=1):
    n = rgf_block(ny, nz, spin_orbit)
    return 1000 + 1.5 * 4 * int(xuc) * n * n * 16 * max(int(batch), 1) / 2**20


def rgf_seconds(ny, nz, xuc, energies, gpu, spin_orbit=False, workers=1):
    flop = 83 * 4 * int(xuc) * rgf_block(ny, nz, spin_orbit) ** 3 * energies
    return flop / (3e13 if gpu else 1e10) / workers


def rgf_minutes(ny, nz, xuc, energies, gpu, spin_orbit=False, workers=1):
    return _minutes(rgf_seconds(ny, nz, xuc, energies, gpu, spin_orbit, workers))


# vecops: three vectors of the largest size of any sweep (8 bytes: float64 at most); each point's
# timing stops at timing.(cpu_)max_seconds, so a sweep takes minutes: 30 per rule.
def vecops_mem_mb(device):
    v = section("vecops")
    sizes = [*v["axpy"]["sizes"], *v["dot"]["sizes"], v["dot"]["n_blocks_sweep"], v["crossover"]["nnz"],
             v["spmv_vector"]["rows"] * v["spmv_vector"]["nnz_per_row"],
             *(rows * per_row for rows, per_row in v["spmv_scalar"]["matrices"].values()),
             v["ceilings"]["copy_n" if device == "gpu" else "cpu_copy_n"]]
    return 1000 + 3 * 8 * max(sizes) / 2**20


VECOPS_MINUTES = 30


def collision_max_N(meshes):
    """The largest N of a comma-separated mesh list ("16,20,24")."""
    return max(int(n) for n in str(meshes).split(",") if n)


def collision_bench_minutes(meshes, gpu):
    """The benchmark evaluates every mesh of the list once per backend: the sum of their runs."""
    return sum(collision_minutes(n, gpu) for n in str(meshes).split(",") if n)


def _rgf_sections(sections):
    """(ny, nz) of each "NYxNZ" cross-section."""
    return [tuple(int(v) for v in s.split("x")) for s in sections]


def _rgf_xucs(sweep):
    return [int(x) for x in (sweep["xuc"] if isinstance(sweep["xuc"], list) else [sweep["xuc"]])]


def rgf_chunk_mem_mb(sweep):
    """One chunk of the rgf sweep (config rgf.sweep): the longest wire, a batch of energies."""
    return rgf_mem_mb(sweep["ny"], sweep["nz"], max(_rgf_xucs(sweep)), sweep["spin_orbit"], sweep["batch"])


def rgf_chunk_minutes(sweep, gpu):
    """Its energies (ne / n_chunks) on every wire length of the sweep."""
    energies = math.ceil(sweep["ne"] / sweep["n_chunks"])
    return _minutes(sum(rgf_seconds(sweep["ny"], sweep["nz"], x, energies, gpu, sweep["spin_orbit"])
                        for x in _rgf_xucs(sweep)))


def rgf_cost_mem_mb(sections, lengths):
    return max(rgf_mem_mb(ny, nz, max(lengths)) for ny, nz in _rgf_sections(sections))


def rgf_cost_minutes(sections, lengths):
    """The cost model times one energy per (section, length)."""
    return _minutes(sum(rgf_seconds(ny, nz, x, 1, False) for ny, nz in _rgf_sections(sections) for x in lengths))
