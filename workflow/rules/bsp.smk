# Rules of the bsp study: papers 000 (Mantas & Vecil 2020) and 001 (Vecil, Mantas & Alonso-Jorda
# 2023).  Conventions: see common.smk and docs/developing.md; user guide: docs/workflow.md.
#
# One compute rule runs the solver (bsp_run on the CPU, bsp_run_gpu with the cupy backend); a run
# is named by its time span, mesh and variant:
#     results/<machine>/bsp/runs/<timespec>/<mesh>/<backend>_t<threads>/run.json
# timespec = steps<N> (timing) or ps<T> (convergence); mesh = N_sbn x NX x NZ x NW x NPHI written
# 6x65x65x300x48.  Runs shared by several studies (the reference mesh of the scaling and the timing
# mesh, ...) run once.  Tables and figures are local rules calling workflow/scripts/bsp_*.py, thin
# wrappers of solver.bsp.analysis and solver.bsp.docs.
#
# Items of ../shared/reproduction.md covered here:
#   doc:  Fig 1 (bsp_doc_geometry), Tables 8-9 of 001 and Table 1 of 000 (bsp_doc_tables),
#         Fig 4 of 001 (bsp_sturm, when solver.bsp.schrodinger provides schrodinger_matrix and
#         sturm_count);
#   data: Table 3 of 000 (bsp_calls: calls per step from the timers), Table 5, Figs 11-13, 15 of 000 and Fig 7, Tables 2-3, Figs 8-9 of 001 (bsp_phase_tables,
#         bsp_phase_figures); Fig 14 of 000, Figs 10-13 of 001 (bsp_scaling); Table 7 of 001
#         (bsp_grids); Fig 6 of 001 (bsp_convergence); the cross-machine table (bsp_compare).
#         Fig 6 of 000 (bsp_spy: the Newton matrix assembled by solver.bsp.poisson.NewtonSystem
#         from the final state of the baseline timing run);
#         Table 2 of 000 (bsp_table2: ILUT + 10 Krylov solvers on the captured Newton systems, solver.bsp.krylov);
#         Table 4 of 000 and Tables 5-6 of 001 (bsp_kernel_profile: counted flops and bytes over
#         measured time per BTE kernel, share of the measured ceilings; no hardware counters);
#         Tables 1 and 4 of 001 (bsp_iter_kernels, GPU only: IPIM kernels A/B per step for NZ = 33..129;
#         per-step time of every ITER CUDA kernel on the standard mesh);
#         Fig 10 of 000 (bsp_overlap, GPU only: the step with and without numerics.overlap, the
#         next stage's WENO_x on a second CUDA stream while ITER runs).
import importlib
import importlib.util
import shlex

import pandas as pd

from solver.bsp import analysis as bsp_analysis


if enabled("bsp"):
    validate(config["bsp"], "../schemas/bsp.schema.yaml")

BSP = section("bsp")


def _bsp_get(*keys, default=None):
    node = BSP
    for k in keys:
        if not isinstance(node, dict) or node.get(k) is None:
            return default
        node = node[k]
    return node


def bsp_table(path):
    """A sweep table (tab-separated, '#' comments) read as strings."""
    return pd.read_csv(path, sep="\t", comment="#", dtype=str).apply(lambda c: c.str.strip())


def bsp_meshes(path):
    t = bsp_table(path)
    return [bsp_analysis.mesh_name(*(r[d] for d in bsp_analysis.MESH_DIMS)) for _, r in t.iterrows()]


def bsp_variants():
    t = bsp_table(_bsp_get("variants", default="config/bsp/variants.tsv"))
    out = [bsp_analysis.variant_name(r["backend"], r["threads"]) for _, r in t.iterrows()]
    return [v for v in out if USE_GPU or not v.startswith("cupy")]


def bsp_run(timespec, mesh, variant, name="run.json"):
    return res("bsp", "runs", timespec, mesh, variant, name)


def bsp_steps(series):
    return f"steps{int(_bsp_get(series, 'steps', default=10))}"


BSP_EXCLUSIVE_THREADS = 1 << 20  # Snakemake caps threads at --cores: "all of them"
BSP_VARIANTS = bsp_variants() if enabled("bsp") else []
BSP_BASELINE = _bsp_get("baseline", default="numpy_t1")
BSP_TIMING_MESH = _bsp_get("timing", "mesh", default="6x65x65x300x48")
BSP_SCALING_REF = _bsp_get("scaling", "reference", default="6x65x65x300x48")
BSP_SCALING_DIMS = _bsp_get("scaling", "dims", default=list(bsp_analysis.MESH_DIMS))
BSP_SCALING_VARIANTS = [v for v in (_bsp_get("scaling", "variants") or BSP_VARIANTS) if v in BSP_VARIANTS]
BSP_CONV_VARIANT = _bsp_get("convergence", "variant", default="numpy_t1")
BSP_CONV_TIME = f"ps{float(_bsp_get('convergence', 't_end_ps', default=0.1)):g}"
BSP_HAS_STURM = False
if importlib.util.find_spec("solver.bsp.schrodinger") is not None:
    try:
        _s = importlib.import_module("solver.bsp.schrodinger")
        BSP_HAS_STURM = hasattr(_s, "schrodinger_matrix") and hasattr(_s, "sturm_count")
    except Exception:  # the solver core is being written; leave Fig 4 out until it imports
        BSP_HAS_STURM = False
BSP_HAS_SPY = False
try:
    _p = importlib.import_module("solver.bsp.poisson")
    BSP_HAS_SPY = hasattr(_p, "NewtonSystem") and hasattr(_p, "frechet")
except Exception:
    BSP_HAS_SPY = False
if enabled("bsp") and BSP_BASELINE not in BSP_VARIANTS:
    raise ValueError(f"config key 'bsp.baseline': {BSP_BASELINE!r} is not a variant of the table "
                     f"{_bsp_get('variants')} ({BSP_VARIANTS})")


def bsp_series_runs(series):
    """run.json of every run of a series: timing, scaling, grids."""
    if series == "timing":
        return [bsp_run(bsp_steps("timing"), BSP_TIMING_MESH, v) for v in BSP_VARIANTS]
    if series == "scaling":
        meshes = [BSP_SCALING_REF] + [bsp_analysis.double(BSP_SCALING_REF, d) for d in BSP_SCALING_DIMS]
        return [bsp_run(bsp_steps("scaling"), m, v) for m in meshes for v in BSP_SCALING_VARIANTS]
    if series == "grids":
        return [bsp_run(bsp_steps("grids"), m, v)
                for m in bsp_meshes(_bsp_get("grids", "table", default="config/bsp/grids.tsv")) for v in BSP_VARIANTS]
    raise ValueError(series)


BSP_CONV_MESHES = bsp_meshes(_bsp_get("convergence", "table", default="config/bsp/convergence.tsv")) if enabled("bsp") else []


def bsp_set_list(mesh, timespec):
    """KEY=VALUE overrides of one run: the mesh, the time span, then the config's extra overrides."""
    sets = [f"mesh.{k}={v}" for k, v in bsp_analysis.parse_mesh(mesh).items()]
    if timespec.startswith("steps"):
        sets += [f"time.steps={int(timespec[5:])}", "time.t_end_ps=null"]
    else:
        sets += [f"time.t_end_ps={timespec[2:]}", "time.steps=null"]
    return sets + list(_bsp_get("set", default=[]))


def bsp_sets(wildcards):
    return " ".join(f"--set {shlex.quote(s)}" for s in bsp_set_list(wildcards.mesh, wildcards.timespec))


def bsp_check_runs():
    """Validate the run configuration with every planned mesh and time span before any job runs
    (solver.bsp.model.load: the message names the key)."""
    from solver.bsp import model as bsp_model

    plans = {(m, bsp_steps(s)) for s in ("timing", "scaling", "grids") for m in
             {r.split("/")[-3] for r in bsp_series_runs(s)}}
    plans |= {(m, BSP_CONV_TIME) for m in BSP_CONV_MESHES}
    cfg = _bsp_get("run_config", default="config/bsp/dgmosfet.yaml")
    for mesh, ts in sorted(plans):
        try:
            bsp_model.load(cfg, bsp_set_list(mesh, ts))
        except Exception as exc:
            raise ValueError(f"bsp run {mesh} ({ts}) from {cfg} with config bsp.set {_bsp_get('set', default=[])}: {exc}") from None


if enabled("bsp"):
    bsp_check_runs()


_RUN = res("bsp", "runs", "{timespec}", "{mesh}", "{backend}_t{nthreads}")
_RUN_NAME = "run_{timespec}_{mesh}_{backend}_t{nthreads}"
_RUN_OUTPUTS = dict(
    run=f"{_RUN}/run.json",
    timers=f"{_RUN}/timers.csv",
    profiles=f"{_RUN}/profiles.csv",
    scalars=f"{_RUN}/scalars.csv",
    fields=f"{_RUN}/fields.h5",
)
# The solver writes every file atomically and run.json last; a killed run leaves its
# checkpoint.h5 (not a declared output, so Snakemake keeps it when it clears an incomplete job's
# outputs) and resumes from it.  profiles_t0.csv is written only by a fresh start (not on resume),
# so it is not declared either.
# Thread pools are pinned to the variant's thread count explicitly (Snakemake's own pinning follows
# `threads:`, which is all cores for exclusive runs).
_RUN_SHELL = ("OMP_NUM_THREADS={wildcards.nthreads} OPENBLAS_NUM_THREADS={wildcards.nthreads} "
              "MKL_NUM_THREADS={wildcards.nthreads} NUMBA_NUM_THREADS={wildcards.nthreads} "
              "{SOLVER} run {input.cfg:q} --out {params.out:q} --backend {wildcards.backend} "
              "--threads {wildcards.nthreads} --no-progress {params.sets} > {log:q} 2>&1")

_RUN_WILDCARDS = dict(timespec=r"steps\d+|ps\d+(\.\d+)?(e-?\d+)?", mesh=r"\d+x\d+x\d+x\d+x\d+", nthreads=r"\d+")


rule bsp_run:
    """One solver run on the CPU (numpy or numba backend); threads from the variant."""
    input:
        cfg=_bsp_get("run_config", default="config/bsp/dgmosfet.yaml"),
    output:
        **_RUN_OUTPUTS,
    wildcard_constraints:
        backend="numpy|numba",
        **_RUN_WILDCARDS,
    params:
        out=lambda wc, output: os.path.dirname(output.run),
        sets=bsp_sets,
    # bsp.exclusive: a timing run holds every core, so no other job disturbs its timers
    threads: lambda wc: BSP_EXCLUSIVE_THREADS if _bsp_get("exclusive", default=True) else int(wc.nthreads)
    log:
        logf("bsp", _RUN_NAME),
    benchmark:
        bench("bsp", _RUN_NAME)
    shell:
        _RUN_SHELL


rule bsp_run_gpu:
    """One solver run with the cupy backend on one GPU."""
    input:
        cfg=_bsp_get("run_config", default="config/bsp/dgmosfet.yaml"),
    output:
        **_RUN_OUTPUTS,
    wildcard_constraints:
        backend="cupy",
        **_RUN_WILDCARDS,
    params:
        out=lambda wc, output: os.path.dirname(output.run),
        sets=bsp_sets,
    threads: 1
    resources:
        gpu=1,
    log:
        logf("bsp", _RUN_NAME),
    benchmark:
        bench("bsp", _RUN_NAME)
    shell:
        _RUN_SHELL


rule bsp_collect:
    """Tidy table of one series' runs: one row per run, mean seconds per step of every phase."""
    input:
        lambda wc: bsp_series_runs(wc.series),
    output:
        res("bsp", "tables", "{series}_runs.csv"),
    wildcard_constraints:
        series="timing|scaling|grids",
    params:
        warmup=_bsp_get("warmup_steps", default=1),
        machine=MACHINE,
    localrule: True
    log:
        logf("bsp", "collect_{series}"),
    script:
        "../scripts/bsp_collect.py"


rule bsp_phase_tables:
    """Table 5 of 000; Tables 2-3 of 001; speedups (Fig 15 of 000, Figs 7-9 of 001); weights."""
    input:
        res("bsp", "tables", "timing_runs.csv"),
    output:
        table5=report(res("bsp", "tables", "table5_phases_000.csv"), caption="../report/bsp_table5.rst", category="BSP paper 000", subcategory="phase timing"),
        table2=report(res("bsp", "tables", "table2_phases_001.csv"), caption="../report/bsp_table2.rst", category="BSP paper 001", subcategory="phase timing"),
        table3=report(res("bsp", "tables", "table3_iter_001.csv"), caption="../report/bsp_table3.rst", category="BSP paper 001", subcategory="phase timing"),
        speedups000=report(res("bsp", "tables", "fig15_speedups_000.csv"), caption="../report/bsp_fig15.rst", category="BSP paper 000", subcategory="phase timing"),
        speedups001=report(res("bsp", "tables", "fig7_9_speedups_001.csv"), caption="../report/bsp_fig7.rst", category="BSP paper 001", subcategory="phase timing"),
        weights=res("bsp", "tables", "fig11_13_weights_000.csv"),
    params:
        baseline=BSP_BASELINE,
    localrule: True
    log:
        logf("bsp", "phase_tables"),
    script:
        "../scripts/bsp_phases.py"


rule bsp_calls:
    """Table 3 of 000: calls per time step of every timed kernel / function (the timers' counts)."""
    input:
        lambda wc: bsp_series_runs("timing"),
    output:
        report(res("bsp", "tables", "table3_calls_000.csv"), caption="../report/bsp_table3_000.rst", category="BSP paper 000", subcategory="phase timing"),
    params:
        variants=BSP_VARIANTS,
    localrule: True
    log:
        logf("bsp", "calls"),
    script:
        "../scripts/bsp_calls.py"


rule bsp_phase_figures:
    """Figs 11-13 and 15 of 000; Figs 7-9 of 001."""
    input:
        res("bsp", "tables", "timing_runs.csv"),
    output:
        fig11=report(res("bsp", "figures", "fig11_weights_000.png"), caption="../report/bsp_fig11.rst", category="BSP paper 000", subcategory="phase timing"),
        fig12=report(res("bsp", "figures", "fig12_bte_kernels_000.png"), caption="../report/bsp_fig12.rst", category="BSP paper 000", subcategory="phase timing"),
        fig13=report(res("bsp", "figures", "fig13_iter_steps_000.png"), caption="../report/bsp_fig13.rst", category="BSP paper 000", subcategory="phase timing"),
        fig15=report(res("bsp", "figures", "fig15_speedups_000.png"), caption="../report/bsp_fig15.rst", category="BSP paper 000", subcategory="phase timing"),
        fig7=report(res("bsp", "figures", "fig7_speedups_001.png"), caption="../report/bsp_fig7.rst", category="BSP paper 001", subcategory="phase timing"),
        fig8_9=report(res("bsp", "figures", "fig8_9_iter_speedups_001.png"), caption="../report/bsp_fig8.rst", category="BSP paper 001", subcategory="phase timing"),
    params:
        baseline=BSP_BASELINE,
        mesh=BSP_TIMING_MESH,
    localrule: True
    log:
        logf("bsp", "phase_figures"),
    script:
        "../scripts/bsp_phase_figures.py"


rule bsp_scaling:
    """Fig 14 of 000 (cost per phase, each dimension doubled) and Figs 10-13 of 001 (iter speedup
    on the doubled meshes)."""
    input:
        res("bsp", "tables", "scaling_runs.csv"),
    output:
        table=report(res("bsp", "tables", "fig14_mesh_scaling_000.csv"), caption="../report/bsp_fig14.rst", category="BSP paper 000", subcategory="mesh scaling"),
        fig=report(res("bsp", "figures", "fig14_mesh_scaling_000.png"), caption="../report/bsp_fig14.rst", category="BSP paper 000", subcategory="mesh scaling"),
        speedup=report(res("bsp", "tables", "figs10_13_iter_speedup_001.csv"), caption="../report/bsp_fig10.rst", category="BSP paper 001", subcategory="mesh scaling"),
        speedup_fig=report(res("bsp", "figures", "figs10_13_iter_speedup_001.png"), caption="../report/bsp_fig10.rst", category="BSP paper 001", subcategory="mesh scaling"),
    params:
        reference=BSP_SCALING_REF,
        dims=BSP_SCALING_DIMS,
        baseline=BSP_BASELINE,
    localrule: True
    log:
        logf("bsp", "scaling"),
    script:
        "../scripts/bsp_scaling.py"


rule bsp_grids:
    """Table 7 of 001: iter speedup of every variant along the grid sequence."""
    input:
        res("bsp", "tables", "grids_runs.csv"),
    output:
        table=report(res("bsp", "tables", "table7_iter_speedup_001.csv"), caption="../report/bsp_table7.rst", category="BSP paper 001", subcategory="mesh scaling"),
        fig=report(res("bsp", "figures", "table7_iter_speedup_001.png"), caption="../report/bsp_table7.rst", category="BSP paper 001", subcategory="mesh scaling"),
    params:
        baseline=BSP_BASELINE,
        meshes=lambda wc: bsp_meshes(_bsp_get("grids", "table", default="config/bsp/grids.tsv")),
    localrule: True
    log:
        logf("bsp", "grids"),
    script:
        "../scripts/bsp_grids.py"


rule bsp_convergence:
    """Fig 6 of 001: N_s(x) and j(x) at t_end on every mesh of the sequence vs the finest one,
    with the relative errors and the observed orders."""
    input:
        profiles=[bsp_run(BSP_CONV_TIME, m, BSP_CONV_VARIANT, "profiles.csv") for m in BSP_CONV_MESHES],
    output:
        table=report(res("bsp", "tables", "fig6_convergence_001.csv"), caption="../report/bsp_fig6.rst", category="BSP paper 001", subcategory="convergence"),
        fig=report(res("bsp", "figures", "fig6_convergence_001.png"), caption="../report/bsp_fig6.rst", category="BSP paper 001", subcategory="convergence"),
    params:
        meshes=BSP_CONV_MESHES,
        t_ps=_bsp_get("convergence", "t_end_ps", default=0.1),
    localrule: True
    log:
        logf("bsp", "convergence"),
    script:
        "../scripts/bsp_convergence.py"


rule bsp_doc_geometry:
    """Fig 1 of 000/001: geometry, doping, oxide and gates from the run configuration."""
    input:
        cfg=_bsp_get("run_config", default="config/bsp/dgmosfet.yaml"),
    output:
        report(res("bsp", "doc", "fig1_geometry.png"), caption="../report/bsp_fig1.rst", category="BSP paper 000", subcategory="model"),
    params:
        mesh=BSP_TIMING_MESH,
        sets=_bsp_get("set", default=[]),
    localrule: True
    log:
        logf("bsp", "doc_geometry"),
    script:
        "../scripts/bsp_doc.py"


rule bsp_doc_tables:
    """Tables 8 and 9 of 001 (constants, Kane factors, masses), the scales, Table 1 of 000 (layouts)."""
    input:
        cfg=_bsp_get("run_config", default="config/bsp/dgmosfet.yaml"),
    output:
        table8=report(res("bsp", "doc", "table8_constants_001.csv"), caption="../report/bsp_table8.rst", category="BSP paper 001", subcategory="model"),
        table9=report(res("bsp", "doc", "table9_valleys_001.csv"), caption="../report/bsp_table9.rst", category="BSP paper 001", subcategory="model"),
        scales=report(res("bsp", "doc", "scales.csv"), caption="../report/bsp_scales.rst", category="BSP paper 001", subcategory="model"),
        table1=report(res("bsp", "doc", "table1_layout_000.csv"), caption="../report/bsp_table1.rst", category="BSP paper 000", subcategory="model"),
    params:
        mesh=BSP_TIMING_MESH,
        sets=_bsp_get("set", default=[]),
    localrule: True
    log:
        logf("bsp", "doc_tables"),
    script:
        "../scripts/bsp_doc.py"


rule bsp_sturm:
    """Fig 4 of 001: Sturm count of a Schroedinger matrix built from the final potential of the
    baseline timing run, with its eigenvalues."""
    input:
        fields=bsp_run(bsp_steps("timing"), BSP_TIMING_MESH, BSP_BASELINE, "fields.h5"),
        run=bsp_run(bsp_steps("timing"), BSP_TIMING_MESH, BSP_BASELINE, "run.json"),
    output:
        fig=report(res("bsp", "doc", "fig4_sturm_001.png"), caption="../report/bsp_fig4.rst", category="BSP paper 001", subcategory="model"),
        table=res("bsp", "doc", "fig4_sturm_001.csv"),
    params:
        nu=_bsp_get("sturm", "nu", default=2),
        x_index=_bsp_get("sturm", "x_index"),
        n_eig=_bsp_get("sturm", "n_eig", default=6),
    localrule: True
    log:
        logf("bsp", "sturm"),
    script:
        "../scripts/bsp_sturm.py"


rule bsp_spy:
    """Fig 6 of 000: sparsity pattern of the Newton matrix from the baseline timing run's final state."""
    input:
        fields=bsp_run(bsp_steps("timing"), BSP_TIMING_MESH, BSP_BASELINE, "fields.h5"),
        run=bsp_run(bsp_steps("timing"), BSP_TIMING_MESH, BSP_BASELINE, "run.json"),
    output:
        fig=report(res("bsp", "doc", "fig6_newton_spy_000.png"), caption="../report/bsp_fig6_000.rst", category="BSP paper 000", subcategory="model"),
        table=res("bsp", "doc", "fig6_newton_spy_000.csv"),
    localrule: True
    log:
        logf("bsp", "spy"),
    script:
        "../scripts/bsp_spy.py"


def bsp_krylov_cmd():
    """python -m solver bsp krylov arguments from config bsp.krylov (Table 2 of 000)."""
    k = _bsp_get("krylov", default={}) or {}
    mesh = k.get("mesh", "6x65x65x40x12")
    sets = [f"mesh.{d}={v}" for d, v in bsp_analysis.parse_mesh(mesh).items()] + list(_bsp_get("set", default=[]))
    args = [f"--set {shlex.quote(s)}" for s in sets]
    args += [f"--steps {int(k.get('steps', 3))}",
             "--solvers " + ",".join(k.get("solvers") or ["bicg", "bicgstab", "gpbicg", "bicgsafe", "idr", "bicr", "crs", "bicrstab", "gpbicr", "bicrsafe"]),
             "--precond " + ",".join(k.get("precond") or ["ilut"]),
             "--threads " + ",".join(str(int(t)) for t in (k.get("threads") or [1, 16])),
             f"--tol {float(k.get('tol', 1e-8)):g}", f"--maxiter {int(k.get('maxiter', 1000))}",
             f"--drop-tol {float(k.get('drop_tol', 1e-3)):g}", f"--fill-factor {float(k.get('fill_factor', 5.0)):g}"]
    return " ".join(args)


rule bsp_table2:
    """Table 2 of 000: cost per time step of the Newton linear systems with ILUT + the ten Krylov
    solvers of LIS (numba SpMV / vector operations at each thread count, scipy one-thread, SuperLU),
    on the systems captured from a short run on the krylov mesh (systems.h5 beside, not committed)."""
    input:
        cfg=_bsp_get("run_config", default="config/bsp/dgmosfet.yaml"),
    output:
        table=report(res("bsp", "krylov", "table2_krylov.csv"), caption="../report/bsp_table2_000.rst", category="BSP paper 000", subcategory="linear solvers"),
        systems=res("bsp", "krylov", "table2_krylov_systems.csv"),
        run=res("bsp", "krylov", "run.json"),
    params:
        out=lambda wc, output: os.path.dirname(output.table),
        args=bsp_krylov_cmd(),
        nthreads=max(int(t) for t in (_bsp_get("krylov", "threads") or [1, 16])),
    threads: lambda wc: BSP_EXCLUSIVE_THREADS if _bsp_get("exclusive", default=True) else max(int(t) for t in (_bsp_get("krylov", "threads") or [1, 16]))
    log:
        logf("bsp", "table2_krylov"),
    benchmark:
        bench("bsp", "table2_krylov")
    shell:
        "OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 MKL_NUM_THREADS=1 "
        "{SOLVER} bsp krylov {input.cfg:q} --out {params.out:q} --systems {params.out:q}/systems.h5 "
        "{params.args} > {log:q} 2>&1"


def bsp_profile_sets():
    """--set options of the kernel profile: the timing mesh and the config's extra overrides."""
    sets = [f"mesh.{k}={v}" for k, v in bsp_analysis.parse_mesh(BSP_TIMING_MESH).items()]
    return " ".join(f"--set {shlex.quote(s)}" for s in sets + list(_bsp_get("set", default=[])))


rule bsp_kernel_profile:
    """Table 4 of 000 and Tables 5-6 of 001: per BTE kernel (WENO x/w/phi, scattering gain/loss)
    on the timing mesh, time per step, counted GFLOP/s and GB/s over the measured time and their
    share of this machine's measured ceilings (copy; FP64 FMA on the GPU, FP64 GEMM on the CPU),
    for the array code and the fast paths (CUDA with a GPU, else numba at 1 thread and all cores)."""
    input:
        cfg=_bsp_get("run_config", default="config/bsp/dgmosfet.yaml"),
    output:
        table=report(res("bsp", "kernels", "kernel_profile.csv"), caption="../report/bsp_kernel_profile.rst", category="BSP paper 000", subcategory="kernels"),
        ceilings=res("bsp", "kernels", "kernel_profile_ceilings.csv"),
        run=res("bsp", "kernels", "kernel_profile.run.json"),
    params:
        backend="cupy" if USE_GPU else "numba",
        sets=bsp_profile_sets(),
        work=lambda wc, output: os.path.join(os.path.dirname(output.table), "profile_work"),
        script=f"{workflow.basedir}/workflow/scripts/bsp_kernel_profile.py",
        mesh=BSP_TIMING_MESH,
    threads: BSP_EXCLUSIVE_THREADS
    resources:
        gpu=1 if USE_GPU else 0,
    log:
        logf("bsp", "kernel_profile"),
    benchmark:
        bench("bsp", "kernel_profile")
    shell:
        "NUMBA_NUM_THREADS={threads} {PY} {params.script} --backend {params.backend} --config {input.cfg:q} "
        "{params.sets} --mesh {params.mesh} --threads 1,all --reps 5 --copy-mib 1024 --work {params.work:q} "
        "--out {output.table:q} > {log:q} 2>&1"


rule bsp_iter_kernels:
    """Tables 1 and 4 of 001 (GPU only): the IPIM kernels A (matrix from global memory) and B
    (shared memory) per call x eigen calls per step for NZ = 33, 49, 65, 97, 129 (NX 65, N_sbn 6,
    NW 300, NPHI 48), and every ITER CUDA kernel's time per step on the standard mesh (per call on
    the arguments of a real run's last call, CUDA events; x calls per step counted in that run)."""
    input:
        cfg=_bsp_get("run_config", default="config/bsp/dgmosfet.yaml"),
    output:
        table1=report(res("bsp", "tables", "table1_ipim_001.csv"), caption="../report/bsp_iter_kernels.rst", category="BSP paper 001", subcategory="kernels"),
        table4=report(res("bsp", "tables", "table4_iter_kernels_001.csv"), caption="../report/bsp_iter_kernels.rst", category="BSP paper 001", subcategory="kernels"),
        run=res("bsp", "tables", "iter_kernels_001.run.json"),
    params:
        sets=" ".join(f"--set {shlex.quote(s)}" for s in _bsp_get("set", default=[])),
        script=f"{workflow.basedir}/workflow/scripts/bsp_iter_kernels.py",
    threads: BSP_EXCLUSIVE_THREADS
    resources:
        gpu=1,
    log:
        logf("bsp", "iter_kernels"),
    benchmark:
        bench("bsp", "iter_kernels")
    shell:
        "{PY} {params.script} --config {input.cfg:q} {params.sets} --nz 33,49,65,97,129 --nx 65 --nsbn 6 "
        "--nw 300 --nphi 48 --steps 5 --reps 100 --table1 {output.table1:q} --table4 {output.table4:q} > {log:q} 2>&1"


rule bsp_overlap:
    """Fig 10 of 000 (section 3.4, GPU only): time per step on the timing mesh with and without
    numerics.overlap (the next stage's x-derivative on a second CUDA stream during ITER); both
    runs must end bit-identical."""
    input:
        cfg=_bsp_get("run_config", default="config/bsp/dgmosfet.yaml"),
    output:
        csv=report(res("bsp", "tables", "fig10_overlap_000.csv"), caption="../report/bsp_overlap.rst", category="BSP paper 000", subcategory="phase timing"),
        fig=report(res("bsp", "figures", "fig10_overlap_000.png"), caption="../report/bsp_overlap.rst", category="BSP paper 000", subcategory="phase timing"),
        run=res("bsp", "tables", "fig10_overlap_000.run.json"),
    params:
        sets=bsp_profile_sets(),
        script=f"{workflow.basedir}/workflow/scripts/bsp_overlap.py",
        mesh=BSP_TIMING_MESH,
        steps=int(_bsp_get("timing", "steps", default=10)) + 1,
    threads: BSP_EXCLUSIVE_THREADS
    resources:
        gpu=1,
    log:
        logf("bsp", "overlap"),
    benchmark:
        bench("bsp", "overlap")
    shell:
        "{PY} {params.script} --config {input.cfg:q} {params.sets} --mesh {params.mesh} --steps {params.steps} "
        "--csv {output.csv:q} --fig {output.fig:q} > {log:q} 2>&1"


def bsp_compare_inputs(wildcards):
    machines = sorted(set(machines_with("bsp", "tables/timing_runs.csv")) | {MACHINE})
    return [res("bsp", "tables", "timing_runs.csv", machine=m) for m in machines]


rule bsp_compare:
    """Cross-machine table: Table 5 of 000 (per mesh and variant) of every machine found under
    results/, one column per machine."""
    input:
        bsp_compare_inputs,
    output:
        report(res("bsp", "tables", "compare_machines.csv"), caption="../report/bsp_compare.rst", category="BSP comparison"),
    localrule: True
    log:
        logf("bsp", "compare"),
    script:
        "../scripts/bsp_compare.py"


BSP_TARGETS = []
if enabled("bsp"):
    BSP_TARGETS += [
        rules.bsp_doc_geometry.output[0],
        *rules.bsp_doc_tables.output,
        *rules.bsp_phase_tables.output,
        *rules.bsp_phase_figures.output,
        rules.bsp_calls.output[0],
        *rules.bsp_scaling.output,
        *rules.bsp_grids.output,
        *rules.bsp_convergence.output,
        rules.bsp_compare.output[0],
        *rules.bsp_table2.output,
        *rules.bsp_kernel_profile.output,
    ]
    if BSP_HAS_STURM:
        BSP_TARGETS += list(rules.bsp_sturm.output)
    if BSP_HAS_SPY:
        BSP_TARGETS += list(rules.bsp_spy.output)
    if USE_GPU:
        BSP_TARGETS += list(rules.bsp_iter_kernels.output)
        BSP_TARGETS += list(rules.bsp_overlap.output)
    ALL_TARGETS += BSP_TARGETS


rule bsp_all:
    """Every bsp target (snakemake bsp_all --cores N): the tables and figures of papers 000 and 001."""
    input:
        BSP_TARGETS,
    localrule: True
