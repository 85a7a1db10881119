# Rules of the iv study: I-V characteristics at steady state (beyond the papers; docs/iv.md).
#
# One job per bias point (rule iv_point: `python -m solver run` with steady.enabled), so a cluster
# runs the points in parallel; rule iv_collect (local) writes the curves, figures, the
# figure-of-merit table and the current-versus-time traces:
#     results/<machine>/<folder>/runs/<mesh>/<backend>_t<threads>/<point>/   run.json, scalars.csv, ...
#     results/<machine>/<folder>/{points,curves,traces,figures_of_merit}.csv, idvg_log.png, idvg_linear.png,
#                                idvd.png, traces.png
# folder = iv.folder (default iv; config/iv_standard.yaml: iv_standard, the standard mesh).
# point = vg<V_G>_vds<V_DS> (vg<V_G>_vgb<bottom>_vds<V_DS> with iv.bottom_gate_V set).
# The DAG: with iv.continuation false every point starts fresh (all points side by side); with
# true each gate voltage is a chain along V_DS (a point starts from the final state of the point
# at the same V_G and the next lower V_DS; solver.bsp.iv.sources), the chains side by side.
# iv.on_fault record (the default): a point whose run ends on a numerical fault records it (output.on_fault)
# and its job passes (exit code 3 only); iv_collect marks it (status fault) and the study still finishes.
# A point continued from a faulted one (iv.continuation) records a fault of its own (phase continuation: the
# fault marker is no state to start from) and passes the same way.  iv.on_fault stop: the faulted point's job
# fails, and the points continued from it do not run.
import json

from solver.bsp import iv as bsp_iv

IV = section("iv")
IV_ON = bool(IV) and enabled("iv")  # a config without an iv section (config/gpu_quick.yaml) has no iv study
IV_MESH = IV.get("mesh", "6x33x33x150x24")
# results/<machine>/<iv.folder>/: a second study (config/iv_standard.yaml: the standard mesh) beside config/gpu.yaml's
IV_DIR = IV.get("folder", "iv")
IV_BACKEND = IV.get("backend", "numpy")
if IV_BACKEND == "auto":
    IV_BACKEND = "cupy" if USE_GPU else "numba"
IV_THREADS = 1 if IV_BACKEND == "cupy" else int(IV.get("threads", 1))
# on a host with several GPUs the points spread over them (solver/gpuslot.py; a scheduler's
# CUDA_VISIBLE_DEVICES wins)
IV_CUPY = IV_BACKEND == "cupy"
IV_GPU = "--gpu auto " if IV_CUPY else ""  # the seeds (short)
IV_VARIANT = f"{IV_BACKEND}_t{IV_THREADS}"
# iv.on_fault record: a faulted point's run records the fault and exits 3, which its job accepts (any other
# non-zero code fails it); iv_collect marks the point (solver.bsp.iv.fault_set_shell / fault_ok_shell; in the
# shell, not in params, so that changing iv.on_fault does not rerun finished points)
IV_FAULT_SET = bsp_iv.fault_set_shell(IV) if IV_ON else ""
IV_FAULT_OK = bsp_iv.fault_ok_shell(IV) if IV_ON else ""
IV_BOTTOM = IV.get("bottom_gate_V")
IV_SOURCES = {bsp_iv.point_name(g, d, IV_BOTTOM): bsp_iv.source_name(s, IV_BOTTOM)
              for (g, d), s in bsp_iv.sources(IV).items()} if IV_ON else {}
# seeds (iv.low_vg_seed_ps): short fresh runs that the low-V_G points start from (docs/iv.md §8)
IV_SEEDS = {bsp_iv.point_name(g, d, IV_BOTTOM): (g, d) for g, d in bsp_iv.seeds(IV)} if IV_ON else {}
IV_BIAS = {bsp_iv.point_name(g, d, IV_BOTTOM): (g, d) for g, d in bsp_iv.points(IV)} if IV_ON else {}
_IV_RUN = res(IV_DIR, "runs", IV_MESH, IV_VARIANT, "{point}")


def iv_run(point, name="run.json"):
    return res(IV_DIR, "runs", IV_MESH, IV_VARIANT, point, name)


def _iv_source(wc):
    s = IV_SOURCES[wc.point]
    return [] if s is None else [iv_run(s, "final_state.h5")]


def _iv_sets_list(point):
    g, d = IV_BIAS[point]
    sets = bsp_iv.point_sets(IV, g, d)
    s = IV_SOURCES[point]
    if s is not None:
        sets.append(f"continuation.init_from={os.path.dirname(iv_run(s))}")
    return sets


def _iv_gpu(wc):
    """--gpu of a point: auto (shared), or own for the long points with iv.long_points_gpu own (bsp_iv.gpu_mode)."""
    return f"--gpu {bsp_iv.gpu_mode(IV, IV_BIAS[wc.point][0])} " if IV_CUPY else ""


def _iv_sets(wc):
    return bsp_set_options(_iv_sets_list(wc.point))


def _iv_seed_sets_list(point):
    g, d = IV_SEEDS[point]
    return bsp_iv.seed_sets(IV, g, d) + bsp_iv.mesh_sets(IV) + [str(x) for x in IV.get("set", [])]


def _iv_minutes(wc):
    t_ps = bsp_iv.t_max_ps(IV, (IV_BIAS.get(wc.point) or IV_SEEDS.get(wc.point) or (0.0,))[0])
    return _minutes(bsp_seconds(IV_MESH, bsp_step_count(IV_MESH, f"ps{t_ps}"), IV_BACKEND))


def _iv_priority(wc):
    """A point's: longest first (solver.bsp.iv.start_priority)."""
    return bsp_iv.start_priority(IV, *IV_BIAS[wc.point])


def _iv_seed_priority(wc):
    """A seed's: just above the highest point it seeds."""
    fed = [q for q, s in IV_SOURCES.items() if s == "seed_" + wc.point]
    return max(bsp_iv.start_priority(IV, *IV_BIAS[q]) for q in fed) + 1


def iv_check_runs():
    """Validate every point's run configuration before any job runs (the message names the key)."""
    from solver.bsp import model as bsp_model

    for p in IV_BIAS:
        try:
            bsp_model.load(IV.get("run_config", "config/bsp/dgmosfet.yaml"), _iv_sets_list(p))
        except Exception as exc:
            raise ValueError(f"iv point {p}: {exc}") from None
    for p in IV_SEEDS:
        try:
            bsp_model.load(IV.get("run_config", "config/bsp/dgmosfet.yaml"), _iv_seed_sets_list(p))
        except Exception as exc:
            raise ValueError(f"iv seed {p}: {exc}") from None


if IV_ON:
    iv_check_runs()

    rule iv_point:
        """One bias point run to steady state (or to iv.steady.t_max_ps), or to a numerical fault that
        iv.on_fault record lets pass (exit code 3, the fault recorded in its outputs)."""
        input:
            cfg=IV.get("run_config", "config/bsp/dgmosfet.yaml"),
            source=_iv_source,
        output:
            run=f"{_IV_RUN}/run.json",
            scalars=f"{_IV_RUN}/scalars.csv",
            state=f"{_IV_RUN}/final_state.h5",
        wildcard_constraints:
            point=r"vg-?[0-9.]+(_vgb-?[0-9.]+)?_vds-?[0-9.]+",
        params:
            out=lambda wc, output: os.path.dirname(output.run),
            sets=_iv_sets,
            gpu=_iv_gpu,
            backend=IV_BACKEND,
            nthreads=IV_THREADS,
        threads: IV_THREADS
        priority: _iv_priority
        resources:
            **cluster(gpu=1 if IV_BACKEND == "cupy" else 0, mem_mb=lambda wc: bsp_mem_mb(IV_MESH), runtime=_iv_minutes),
        log:
            logf(IV_DIR, "point_{point}"),
        benchmark:
            bench(IV_DIR, "point_{point}")
        shell:
            "OMP_NUM_THREADS={params.nthreads} OPENBLAS_NUM_THREADS={params.nthreads} "
            "NUMBA_NUM_THREADS={params.nthreads} "
            "{SOLVER} run {input.cfg:q} --out {params.out:q} --backend {params.backend} --threads {params.nthreads} "
            "{params.gpu}--no-progress {params.sets}{IV_FAULT_SET} > {log:q} 2>&1{IV_FAULT_OK}"

    rule iv_seed:
        """A short fresh run (iv.low_vg_seed_ps) that the points below iv.low_vg_from start from."""
        input:
            cfg=IV.get("run_config", "config/bsp/dgmosfet.yaml"),
        output:
            run=res(IV_DIR, "runs", IV_MESH, IV_VARIANT, "seed_{point}", "run.json"),
            state=res(IV_DIR, "runs", IV_MESH, IV_VARIANT, "seed_{point}", "final_state.h5"),
        wildcard_constraints:
            point=r"vg-?[0-9.]+(_vgb-?[0-9.]+)?_vds-?[0-9.]+",
        params:
            out=lambda wc, output: os.path.dirname(output.run),
            sets=lambda wc: bsp_set_options(_iv_seed_sets_list(wc.point)),
            backend=IV_BACKEND,
            nthreads=IV_THREADS,
        threads: IV_THREADS
        priority: _iv_seed_priority
        resources:
            **cluster(gpu=1 if IV_BACKEND == "cupy" else 0, mem_mb=lambda wc: bsp_mem_mb(IV_MESH), runtime=_iv_minutes),
        log:
            logf(IV_DIR, "seed_{point}"),
        shell:
            "OMP_NUM_THREADS={params.nthreads} OPENBLAS_NUM_THREADS={params.nthreads} "
            "NUMBA_NUM_THREADS={params.nthreads} "
            "{SOLVER} run {input.cfg:q} --out {params.out:q} --backend {params.backend} --threads {params.nthreads} "
            "{IV_GPU}--no-progress {params.sets} > {log:q} 2>&1"

    def _iv_caption(name):
        return dict(caption=report_caption(name), category="I-V characteristics", subcategory="steady state")

    rule iv_collect:
        """Curves, figures, figures of merit and traces of every point."""
        input:
            runs=[iv_run(p) for p in IV_BIAS],
            scalars=[iv_run(p, "scalars.csv") for p in IV_BIAS],
        output:
            points=report(res(IV_DIR, "points.csv"), **_iv_caption("iv_points")),
            curves=res(IV_DIR, "curves.csv"),
            traces=res(IV_DIR, "traces.csv"),
            fom=report(res(IV_DIR, "figures_of_merit.csv"), **_iv_caption("iv_figures_of_merit")),
            idvg_log=report(res(IV_DIR, "idvg_log.png"), **_iv_caption("iv_idvg")),
            idvg_lin=report(res(IV_DIR, "idvg_linear.png"), **_iv_caption("iv_idvg")),
            idvd=report(res(IV_DIR, "idvd.png"), **_iv_caption("iv_idvd")),
            traces_fig=report(res(IV_DIR, "traces.png"), **_iv_caption("iv_traces")),
        params:
            dirs=lambda wc, input: " ".join(shlex.quote(os.path.dirname(r)) for r in input.runs),
            study=json.dumps({k: IV[k] for k in ("vg", "idvg_vds", "idvd_vg", "vds", "vth_current_A_per_m")}
                             | {"bottom_gate_V": IV_BOTTOM}),
            out=res(IV_DIR),
        localrule: True
        log:
            logf(IV_DIR, "collect"),
        shell:
            "{SOLVER} bsp iv collect {params.dirs} --study {params.study:q} --out {params.out:q} > {log:q} 2>&1"

    ALL_TARGETS.append(res(IV_DIR, "figures_of_merit.csv"))
