# Helpers shared by every study's rules.  Each study's .smk validates its own config section,
# writes under results/<machine>/<study>/ and appends its final targets to ALL_TARGETS.
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


def bsp_variants():
    """BACKEND_tTHREADS of the variants table; cupy rows only where the GPU is used."""
    t = bsp_table(bsp_get("variants", default="config/bsp/variants.tsv"))
    out = [f"{r['backend']}_t{int(r['threads'])}" for _, r in t.iterrows()]
    return [v for v in out if USE_GPU or not v.startswith("cupy")]


def bsp_run(timespec, mesh, variant, name="run.json"):
    return res("bsp", "runs", timespec, mesh, variant, name)


def bsp_steps(series):
    return f"steps{int(bsp_get(series, 'steps', default=10))}"


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

BSP_EXCLUSIVE_THREADS = 1 << 20  # Snakemake caps threads at --cores: "all of them"
BSP_EXCLUSIVE = BSP_EXCLUSIVE_THREADS if bsp_get("exclusive", default=True) else 1
BSP_RUN_CONFIG = bsp_get("run_config", default="config/bsp/dgmosfet.yaml")
BSP_VARIANTS = bsp_variants() if enabled("bsp") else []
BSP_BASELINE = bsp_get("baseline", default="numpy_t1")
BSP_TIMING_MESH = bsp_get("timing", "mesh", default="6x65x65x300x48")
BSP_SCALING_REF = bsp_get("scaling", "reference", default="6x65x65x300x48")
BSP_SCALING_DIMS = bsp_get("scaling", "dims", default=list(BSP_MESH_DIMS))
BSP_SCALING_VARIANTS = [v for v in (bsp_get("scaling", "variants") or BSP_VARIANTS) if v in BSP_VARIANTS]
BSP_GRID_MESHES = bsp_meshes(bsp_get("grids", "table", default="config/bsp/grids.tsv")) if enabled("bsp") else []
BSP_CONV_VARIANT = bsp_get("convergence", "variant", default="numpy_t1")
BSP_CONV_TIME = f"ps{float(bsp_get('convergence', 't_end_ps', default=0.1)):g}"
BSP_CONV_MESHES = bsp_meshes(bsp_get("convergence", "table", default="config/bsp/convergence.tsv")) if enabled("bsp") else []
if enabled("bsp") and BSP_BASELINE not in BSP_VARIANTS:
    raise ValueError(f"config key 'bsp.baseline': {BSP_BASELINE!r} is not a variant of the table "
                     f"{bsp_get('variants')} ({BSP_VARIANTS})")


def bsp_series_runs(series):
    """run.json of every run of a series: timing, scaling, grids."""
    if series == "timing":
        return [bsp_run(bsp_steps("timing"), BSP_TIMING_MESH, v) for v in BSP_VARIANTS]
    if series == "scaling":
        meshes = [BSP_SCALING_REF] + [bsp_double(BSP_SCALING_REF, d) for d in BSP_SCALING_DIMS]
        return [bsp_run(bsp_steps("scaling"), m, v) for m in meshes for v in BSP_SCALING_VARIANTS]
    if series == "grids":
        return [bsp_run(bsp_steps("grids"), m, v) for m in BSP_GRID_MESHES for v in BSP_VARIANTS]
    raise ValueError(series)


def bsp_set_list(mesh, timespec):
    """KEY=VALUE overrides of one run: the mesh, the time span, then the config's extra overrides."""
    sets = [f"mesh.{k}={v}" for k, v in bsp_parse_mesh(mesh).items()]
    if timespec.startswith("steps"):
        sets += [f"time.steps={int(timespec[5:])}", "time.t_end_ps=null"]
    else:
        sets += [f"time.t_end_ps={timespec[2:]}", "time.steps=null"]
    return sets + list(bsp_get("set", default=[]))


def bsp_check_runs():
    """Validate the run configuration with every planned mesh and time span before any job runs
    (solver.bsp.model.load: the message names the key)."""
    from solver.bsp import model as bsp_model

    plans = {(m, bsp_steps(s)) for s in ("timing", "scaling", "grids") for m in
             {r.split("/")[-3] for r in bsp_series_runs(s)}}
    plans |= {(m, BSP_CONV_TIME) for m in BSP_CONV_MESHES}
    for mesh, ts in sorted(plans):
        try:
            bsp_model.load(BSP_RUN_CONFIG, bsp_set_list(mesh, ts))
        except Exception as exc:
            raise ValueError(f"bsp run {mesh} ({ts}) from {BSP_RUN_CONFIG} with config bsp.set "
                             f"{bsp_get('set', default=[])}: {exc}") from None


if enabled("bsp"):
    bsp_check_runs()
