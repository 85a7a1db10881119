# Rules of the bsp study: papers 000 (Mantas & Vecil 2020) and 001 (Vecil, Mantas & Alonso-Jorda
# 2023).  Conventions: see common.smk (which also holds this study's helpers and run plan) and
# docs/developing.md; user guide: docs/workflow.md.
#
# One compute rule runs the solver (bsp_run on the CPU, bsp_run_gpu with the cupy backend); a run
# is named by its time span, mesh and variant:
#     results/<machine>/bsp/runs/<timespec>/<mesh>/<backend>_t<threads>/run.json
# timespec = steps<N> (timing) or ps<T> (convergence); mesh = N_sbn x NX x NZ x NW x NPHI written
# 6x65x65x300x48.  Runs shared by several studies (the reference mesh of the scaling and the timing
# mesh, ...) run once.  Tables and figures are local rules calling workflow/scripts/bsp_*.py, thin
# wrappers of solver.bsp.analysis and solver.bsp.docs; benchmarks call `python -m solver bsp ...`.
# A rule that makes one artifact is named after it and its paper, like its report caption
# (workflow/report/<rule>.rst).
#
# Items of ../shared/reproduction.md covered here:
#   doc:  Fig 1 (bsp_fig1_geometry), Tables 8-9 of 001 and Table 1 of 000 (bsp_doc_tables),
#         Fig 4 of 001 (bsp_fig4_001_sturm), Fig 6 of 000 (bsp_fig6_000_spy: the Newton matrix
#         assembled by solver.bsp.poisson.NewtonSystem from the final state of the baseline
#         timing run);
#   data: Table 3 of 000 (bsp_table3_000_calls: calls per step from the timers), Table 5, Figs
#         11-13, 15 of 000 and Fig 7, Tables 2-3, Figs 8-9 of 001 (bsp_phase_tables,
#         bsp_phase_figures); Fig 14 of 000, Figs 10-13 of 001 (bsp_scaling); Table 7 of 001
#         (bsp_table7_001_grids); Fig 6 of 001 (bsp_fig6_001_convergence); the cross-machine
#         table (bsp_compare);
#         Table 2 of 000 (bsp_table2_000_krylov: ILUT + 10 Krylov solvers on the captured Newton
#         systems, solver.bsp.krylov);
#         Table 4 of 000 and Tables 5-6 of 001 (bsp_table4_000_kernel_profile: counted flops and
#         bytes over measured time per BTE kernel, share of the measured ceilings);
#         Tables 1 and 4 of 001 (bsp_tables1_4_001_iter_kernels, GPU only: IPIM kernels A/B per
#         step for NZ = 33..129; per-step time of every ITER CUDA kernel on the standard mesh);
#         Fig 10 of 000 (bsp_fig10_000_overlap, GPU only: the step with and without
#         numerics.overlap, the next stage's WENO_x on a second CUDA stream while ITER runs);
#         Table 4 of 000 and Tables 5-6 of 001 with hardware counters (bsp_tables5_6_001_ncu,
#         GPU with Nsight Compute's ncu);
#   check: the coarse 0.1 ps validation against the authors' outputs (bsp_validate);
#   bench: the time step per (mesh, backend, threads) of config bsp.bench (bsp_bench).
# Tables and figures show the papers' printed numbers beside ours (solver.bsp.analysis PAPER_*,
# solver.bsp.profile PAPER_*), named with the paper's hardware.

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
# `threads:`, which is all cores for exclusive runs, or a slice's: config host_slices, common.smk).
_RUN_SHELL = ("OMP_NUM_THREADS={wildcards.nthreads} OPENBLAS_NUM_THREADS={wildcards.nthreads} "
              "MKL_NUM_THREADS={wildcards.nthreads} NUMBA_NUM_THREADS={wildcards.nthreads} "
              "{SOLVER_CPU_TIMING} run {input.cfg:q} --out {params.out:q} --backend {wildcards.backend} "
              "--threads {wildcards.nthreads} --no-progress {params.sets} > {log:q} 2>&1")

# the cupy runs: a GPU of their own on a host with several (solver/gpuslot.py; common.smk)
_RUN_SHELL_GPU = _RUN_SHELL.replace("{SOLVER_CPU_TIMING} run ", "{SOLVER_GPU} run ")
_RUN_WILDCARDS = dict(timespec=r"steps\d+|sections\d+|ps\d+(\.\d+)?(e-?\d+)?", mesh=r"\d+x\d+x\d+x\d+x\d+", nthreads=r"\d+")


def _run_sets(wildcards):
    return bsp_set_options(bsp_set_list(wildcards.mesh, wildcards.timespec))


rule bsp_run:
    """One solver run on the CPU (numpy or numba backend); threads from the variant."""
    input:
        cfg=BSP_RUN_CONFIG,
    output:
        **_RUN_OUTPUTS,
    wildcard_constraints:
        backend="numpy|numba",
        **_RUN_WILDCARDS,
    params:
        out=lambda wc, output: os.path.dirname(output.run),
        sets=_run_sets,
    # bsp.exclusive: a timing run holds every core (or its slice: host_slices), so no other job
    # disturbs its timers
    threads: lambda wc: max(BSP_EXCLUSIVE, int(wc.nthreads))
    resources:
        **cluster(gpu=CPU_TIMING_GPU, mem_mb=bsp_run_mem_mb, runtime=bsp_run_minutes),
    group:
        bsp_run_group
    log:
        logf("bsp", _RUN_NAME),
    benchmark:
        bench("bsp", _RUN_NAME)
    shell:
        _RUN_SHELL


rule bsp_run_gpu:
    """One solver run with the cupy backend on one GPU of its own (--gpu exclusive); with
    bsp.exclusive it holds its share of the cores, all of them with one GPU job at a time
    (launch-bound phases follow the host: a busy host would slow its timers)."""
    input:
        cfg=BSP_RUN_CONFIG,
    output:
        **_RUN_OUTPUTS,
    wildcard_constraints:
        backend="cupy",
        **_RUN_WILDCARDS,
    params:
        out=lambda wc, output: os.path.dirname(output.run),
        sets=_run_sets,
    threads: BSP_GPU_THREADS
    resources:
        **cluster(gpu=1, mem_mb=bsp_run_mem_mb, runtime=bsp_run_minutes),
    log:
        logf("bsp", _RUN_NAME),
    benchmark:
        bench("bsp", _RUN_NAME)
    shell:
        _RUN_SHELL_GPU


rule bsp_collect:
    """Tidy table of one series' runs: one row per run, mean seconds per step of every phase."""
    input:
        lambda wc: bsp_series_runs(wc.series),
    output:
        res("bsp", "tables", "{series}_runs.csv"),
    wildcard_constraints:
        series="timing|scaling|grids|sections",
    params:
        warmup=bsp_get("warmup_steps", default=1),
        machine=MACHINE,
    localrule: True
    log:
        logf("bsp", "collect_{series}"),
    script:
        "../scripts/bsp_collect.py"


def _caption(name, paper, subcategory):
    return dict(caption=report_caption(name), category=f"BSP paper {paper}", subcategory=subcategory)


rule bsp_phase_tables:
    """Table 5 of 000; Tables 2-3 of 001; speedups (Fig 15 of 000, Figs 7-9 of 001); weights.  The
    ITER sections come from the sections runs (bsp.sections) where the config has them."""
    input:
        timing=res("bsp", "tables", "timing_runs.csv"),
        sections=[res("bsp", "tables", "sections_runs.csv")] if BSP_SECTIONS_VARIANTS else [],
    output:
        table5=report(res("bsp", "tables", "table5_phases_000.csv"), **_caption("bsp_table5_000", "000", "phase timing")),
        table2=report(res("bsp", "tables", "table2_phases_001.csv"), **_caption("bsp_table2_001", "001", "phase timing")),
        table3=report(res("bsp", "tables", "table3_iter_001.csv"), **_caption("bsp_table3_001", "001", "phase timing")),
        speedups000=report(res("bsp", "tables", "fig15_speedups_000.csv"), **_caption("bsp_fig15_000", "000", "phase timing")),
        speedups001=report(res("bsp", "tables", "fig7_9_speedups_001.csv"), **_caption("bsp_fig7_001", "001", "phase timing")),
        weights=report(res("bsp", "tables", "fig11_13_weights_000.csv"), **_caption("bsp_fig11_000", "000", "phase timing")),
    params:
        baseline=BSP_BASELINE,
    localrule: True
    log:
        logf("bsp", "phase_tables"),
    script:
        "../scripts/bsp_phases.py"


rule bsp_table3_000_calls:
    """Table 3 of 000: calls per time step of every timed kernel / function (the timers' counts)."""
    input:
        lambda wc: bsp_series_runs("timing"),
    output:
        report(res("bsp", "tables", "table3_calls_000.csv"), **_caption("bsp_table3_000_calls", "000", "phase timing")),
    params:
        variants=BSP_VARIANTS,
    localrule: True
    log:
        logf("bsp", "calls"),
    script:
        "../scripts/bsp_calls.py"


rule bsp_phase_figures:
    """Figs 11-13 and 15 of 000; Figs 7-9 of 001 (ITER sections as in bsp_phase_tables)."""
    input:
        timing=res("bsp", "tables", "timing_runs.csv"),
        sections=[res("bsp", "tables", "sections_runs.csv")] if BSP_SECTIONS_VARIANTS else [],
    output:
        fig11=report(res("bsp", "figures", "fig11_weights_000.png"), **_caption("bsp_fig11_000", "000", "phase timing")),
        fig12=report(res("bsp", "figures", "fig12_bte_kernels_000.png"), **_caption("bsp_fig12_000", "000", "phase timing")),
        fig13=report(res("bsp", "figures", "fig13_iter_steps_000.png"), **_caption("bsp_fig13_000", "000", "phase timing")),
        fig15=report(res("bsp", "figures", "fig15_speedups_000.png"), **_caption("bsp_fig15_000", "000", "phase timing")),
        fig7=report(res("bsp", "figures", "fig7_speedups_001.png"), **_caption("bsp_fig7_001", "001", "phase timing")),
        fig8_9=report(res("bsp", "figures", "fig8_9_iter_speedups_001.png"), **_caption("bsp_figs8_9_001", "001", "phase timing")),
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
        table=report(res("bsp", "tables", "fig14_mesh_scaling_000.csv"), **_caption("bsp_fig14_000", "000", "mesh scaling")),
        fig=report(res("bsp", "figures", "fig14_mesh_scaling_000.png"), **_caption("bsp_fig14_000", "000", "mesh scaling")),
        speedup=report(res("bsp", "tables", "figs10_13_iter_speedup_001.csv"), **_caption("bsp_figs10_13_001", "001", "mesh scaling")),
        speedup_fig=report(res("bsp", "figures", "figs10_13_iter_speedup_001.png"), **_caption("bsp_figs10_13_001", "001", "mesh scaling")),
    params:
        reference=BSP_SCALING_REF,
        dims=BSP_SCALING_DIMS,
        baseline=BSP_BASELINE,
    localrule: True
    log:
        logf("bsp", "scaling"),
    script:
        "../scripts/bsp_scaling.py"


rule bsp_table7_001_grids:
    """Table 7 of 001: iter speedup of every variant along the grid sequence."""
    input:
        res("bsp", "tables", "grids_runs.csv"),
    output:
        table=report(res("bsp", "tables", "table7_iter_speedup_001.csv"), **_caption("bsp_table7_001_grids", "001", "mesh scaling")),
        fig=report(res("bsp", "figures", "table7_iter_speedup_001.png"), **_caption("bsp_table7_001_grids", "001", "mesh scaling")),
    params:
        baseline=BSP_BASELINE,
        meshes=BSP_GRID_MESHES,
    localrule: True
    log:
        logf("bsp", "grids"),
    script:
        "../scripts/bsp_grids.py"


rule bsp_fig6_001_convergence:
    """Fig 6 of 001: N_s(x) and j(x) at t_end on every mesh of the sequence vs the finest one,
    with the relative errors and the observed orders."""
    input:
        profiles=[bsp_run(BSP_CONV_TIME, m, BSP_CONV_VARIANT, "profiles.csv") for m in BSP_CONV_MESHES],
    output:
        table=report(res("bsp", "tables", "fig6_convergence_001.csv"), **_caption("bsp_fig6_001_convergence", "001", "convergence")),
        fig=report(res("bsp", "figures", "fig6_convergence_001.png"), **_caption("bsp_fig6_001_convergence", "001", "convergence")),
    params:
        meshes=BSP_CONV_MESHES,
        t_ps=bsp_get("convergence", "t_end_ps", default=0.1),
    localrule: True
    log:
        logf("bsp", "convergence"),
    script:
        "../scripts/bsp_convergence.py"


rule bsp_validate:
    """The coarse 0.1 ps validation against the authors' reference outputs (mean current, N_s(x),
    j(x), mass within 1 %, steps within one): python -m solver bsp validate on the run of the
    reference's mesh 6x33x33x150x24 to 0.1 ps with bsp.validation.variant; fails when a check fails."""
    input:
        run=bsp_run("ps0.1", BSP_VALIDATION_MESH, BSP_VALIDATION_VARIANT),
        profiles=bsp_run("ps0.1", BSP_VALIDATION_MESH, BSP_VALIDATION_VARIANT, "profiles.csv"),
    output:
        report(res("bsp", "tables", "validation_coarse.csv"), **_caption("bsp_validate", "001", "convergence")),
    params:
        run_dir=lambda wc, input: os.path.dirname(input.run),
        reference=f"--reference {shlex.quote(str(BSP_VALIDATION_REFERENCE))}" if BSP_VALIDATION_REFERENCE else "",
    localrule: True
    log:
        logf("bsp", "validate"),
    shell:
        "{SOLVER} bsp validate {params.run_dir:q} {params.reference} --csv {output:q} > {log:q} 2>&1"


rule bsp_fig1_geometry:
    """Fig 1 of 000/001: geometry, doping, oxide and gates from the run configuration."""
    input:
        cfg=BSP_RUN_CONFIG,
    output:
        report(res("bsp", "doc", "fig1_geometry.png"), **_caption("bsp_fig1_geometry", "000", "model")),
    params:
        mesh=BSP_TIMING_MESH,
        sets=bsp_get("set", default=[]),
    localrule: True
    log:
        logf("bsp", "doc_geometry"),
    script:
        "../scripts/bsp_doc.py"


rule bsp_doc_tables:
    """Tables 8 and 9 of 001 (constants, Kane factors, masses), the scales, Table 1 of 000 (layouts)."""
    input:
        cfg=BSP_RUN_CONFIG,
    output:
        table8=report(res("bsp", "doc", "table8_constants_001.csv"), **_caption("bsp_table8_001", "001", "model")),
        table9=report(res("bsp", "doc", "table9_valleys_001.csv"), **_caption("bsp_table9_001", "001", "model")),
        scales=report(res("bsp", "doc", "scales.csv"), **_caption("bsp_scales", "001", "model")),
        table1=report(res("bsp", "doc", "table1_layout_000.csv"), **_caption("bsp_table1_000", "000", "model")),
    params:
        mesh=BSP_TIMING_MESH,
        sets=bsp_get("set", default=[]),
    localrule: True
    log:
        logf("bsp", "doc_tables"),
    script:
        "../scripts/bsp_doc.py"


_BASELINE_FINAL = dict(fields=bsp_run(bsp_steps("timing", BSP_BASELINE), BSP_TIMING_MESH, BSP_BASELINE, "fields.h5"),
                       run=bsp_run(bsp_steps("timing", BSP_BASELINE), BSP_TIMING_MESH, BSP_BASELINE, "run.json"))


rule bsp_fig4_001_sturm:
    """Fig 4 of 001: Sturm count of a Schroedinger matrix built from the final potential of the
    baseline timing run, with its eigenvalues."""
    input:
        **_BASELINE_FINAL,
    output:
        fig=report(res("bsp", "doc", "fig4_sturm_001.png"), **_caption("bsp_fig4_001_sturm", "001", "model")),
        table=res("bsp", "doc", "fig4_sturm_001.csv"),
    params:
        nu=bsp_get("sturm", "nu", default=2),
        x_index=bsp_get("sturm", "x_index"),
        n_eig=bsp_get("sturm", "n_eig", default=6),
    localrule: True
    log:
        logf("bsp", "sturm"),
    script:
        "../scripts/bsp_sturm.py"


rule bsp_fig6_000_spy:
    """Fig 6 of 000: sparsity pattern of the Newton matrix from the baseline timing run's final state."""
    input:
        **_BASELINE_FINAL,
    output:
        fig=report(res("bsp", "doc", "fig6_newton_spy_000.png"), **_caption("bsp_fig6_000_spy", "000", "model")),
        table=res("bsp", "doc", "fig6_newton_spy_000.csv"),
    localrule: True
    log:
        logf("bsp", "spy"),
    script:
        "../scripts/bsp_spy.py"


_KRYLOV = {"mesh": "6x65x65x40x12", "steps": 3, "solvers": ["bicg", "bicgstab", "gpbicg", "bicgsafe", "idr", "bicr", "crs",
           "bicrstab", "gpbicr", "bicrsafe"], "precond": ["ilut"], "threads": [1, 16], "tol": 1e-8, "maxiter": 1000,
           "drop_tol": 1e-3, "fill_factor": 5.0} | (bsp_get("krylov", default={}) or {})


rule bsp_table2_000_krylov:
    """Table 2 of 000: cost per time step of the Newton linear systems with ILUT + the ten Krylov
    solvers of LIS (numba SpMV / vector operations at each thread count, scipy one-thread, SuperLU),
    on the systems captured from a short run on the krylov mesh (systems.h5 beside, not committed)."""
    input:
        cfg=BSP_RUN_CONFIG,
    output:
        table=report(res("bsp", "krylov", "table2_krylov.csv"), **_caption("bsp_table2_000_krylov", "000", "linear solvers")),
        systems=res("bsp", "krylov", "table2_krylov_systems.csv"),
        run=res("bsp", "krylov", "run.json"),
    params:
        out=lambda wc, output: os.path.dirname(output.table),
        sets=bsp_mesh_sets(_KRYLOV["mesh"]),
        solvers=",".join(_KRYLOV["solvers"]),
        precond=",".join(_KRYLOV["precond"]),
        threads=",".join(str(int(t)) for t in _KRYLOV["threads"]),
    threads: max(BSP_EXCLUSIVE, *(int(t) for t in _KRYLOV["threads"]))
    resources:
        **cluster(gpu=CPU_TIMING_GPU, mem_mb=bsp_mem_mb(_KRYLOV["mesh"]), runtime=bsp_krylov_minutes(_KRYLOV["mesh"], _KRYLOV["steps"])),
    log:
        logf("bsp", "table2_krylov"),
    benchmark:
        bench("bsp", "table2_krylov")
    shell:
        "OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 MKL_NUM_THREADS=1 "
        "{SOLVER_CPU_TIMING} bsp krylov {input.cfg:q} --out {params.out:q} --systems {params.out:q}/systems.h5 {params.sets} "
        f"--steps {int(_KRYLOV['steps'])} --solvers {{params.solvers}} --precond {{params.precond}} "
        f"--threads {{params.threads}} --tol {float(_KRYLOV['tol']):g} --maxiter {int(_KRYLOV['maxiter'])} "
        f"--drop-tol {float(_KRYLOV['drop_tol']):g} --fill-factor {float(_KRYLOV['fill_factor']):g} > {{log:q}} 2>&1"


rule bsp_table4_000_kernel_profile:
    """Table 4 of 000 and Tables 5-6 of 001: per BTE kernel (WENO x/w/phi, scattering gain/loss)
    on the timing mesh, time per step, counted GFLOP/s and GB/s over the measured time and their
    share of this machine's measured ceilings (copy; FP64 FMA on the GPU, FP64 GEMM on the CPU),
    for the array code and the fast paths (CUDA with a GPU, else numba at 1 thread and all cores)."""
    input:
        cfg=BSP_RUN_CONFIG,
    output:
        table=report(res("bsp", "kernels", "kernel_profile.csv"), **_caption("bsp_table4_000_kernel_profile", "000", "kernels")),
        ceilings=res("bsp", "kernels", "kernel_profile_ceilings.csv"),
        run=res("bsp", "kernels", "kernel_profile.run.json"),
    params:
        backend="cupy" if USE_GPU else "numba",
        sets=bsp_mesh_sets(BSP_TIMING_MESH),
        mesh=BSP_TIMING_MESH,
        reps=bsp_get("profile", "reps", default=5),
        copy_mib=bsp_get("profile", "copy_mib", default=1024),
        gemm=f"--gemm-n {bsp_get('profile', 'gemm_n')}" if bsp_get("profile", "gemm_n") else "",
        solver=SOLVER_GPU if USE_GPU else SOLVER,
    threads: GPU_THREADS if USE_GPU else BSP_EXCLUSIVE_THREADS
    resources:
        **cluster(gpu=1 if USE_GPU else 0,
                  mem_mb=bsp_mem_mb(BSP_TIMING_MESH) + 2 * bsp_get("profile", "copy_mib", default=1024),
                  runtime=_minutes(bsp_seconds(BSP_TIMING_MESH, 4 * bsp_get("profile", "reps", default=5), "numpy"))),
    log:
        logf("bsp", "kernel_profile"),
    benchmark:
        bench("bsp", "kernel_profile")
    shell:
        "NUMBA_NUM_THREADS={threads} {params.solver} bsp kernel-profile {input.cfg:q} --backend {params.backend} "
        "{params.sets} --mesh {params.mesh} --threads 1,all --reps {params.reps} --copy-mib {params.copy_mib} "
        "{params.gemm} --out {output.table:q} > {log:q} 2>&1"


rule bsp_tables5_6_001_ncu:
    """Table 4 of 000 and Tables 5-6 of 001 with hardware counters (GPU with Nsight Compute's ncu;
    config bsp.profile.ncu): every CUDA kernel of the last of bsp.profile.ncu_steps time steps of a
    cupy run on the timing mesh (python -m solver bsp ncu-profile): GFLOP/s, DRAM GB/s and its share
    of the copy bandwidth measured by bsp_table4_000_kernel_profile, L2 hit rate, global-load
    efficiency, memory and SM throughput per kernel and averaged per phase, beside the papers'."""
    input:
        cfg=BSP_RUN_CONFIG,
        ceilings=rules.bsp_table4_000_kernel_profile.output.ceilings,
    output:
        table=report(res("bsp", "kernels", "ncu_kernels.csv"), **_caption("bsp_tables5_6_001_ncu", "001", "kernels")),
        phases=report(res("bsp", "kernels", "ncu_kernels_phases.csv"), **_caption("bsp_tables5_6_001_ncu", "001", "kernels")),
        raw=res("bsp", "kernels", "ncu_kernels_raw.csv"),
        run=res("bsp", "kernels", "ncu_kernels.run.json"),
    params:
        sets=bsp_mesh_sets(BSP_TIMING_MESH),
        steps=bsp_get("profile", "ncu_steps", default=2),
    threads: GPU_THREADS
    resources:
        **cluster(gpu=1, mem_mb=bsp_mem_mb(BSP_TIMING_MESH), runtime=60),
    log:
        logf("bsp", "ncu"),
    benchmark:
        bench("bsp", "ncu")
    shell:
        "{SOLVER_GPU} bsp ncu-profile {input.cfg:q} {params.sets} --steps {params.steps} --ceilings {input.ceilings:q} "
        "--out {output.table:q} > {log:q} 2>&1"


rule bsp_tables1_4_001_iter_kernels:
    """Tables 1 and 4 of 001 (GPU only): the IPIM kernels A (matrix from global memory) and B
    (shared memory) per call x eigen calls per step for NZ = 33, 49, 65, 97, 129 (NX 65, N_sbn 6,
    NW 300, NPHI 48), and every ITER CUDA kernel's time per step on the standard mesh (per call on
    the arguments of a real run's last call, CUDA events; x calls per step counted in that run)."""
    input:
        cfg=BSP_RUN_CONFIG,
    output:
        table1=report(res("bsp", "tables", "table1_ipim_001.csv"), **_caption("bsp_tables1_4_001_iter_kernels", "001", "kernels")),
        table4=report(res("bsp", "tables", "table4_iter_kernels_001.csv"), **_caption("bsp_tables1_4_001_iter_kernels", "001", "kernels")),
        run=res("bsp", "tables", "iter_kernels_001.run.json"),
    params:
        sets=bsp_set_options(bsp_get("set", default=[])),
    threads: GPU_THREADS
    resources:
        **cluster(gpu=1, mem_mb=bsp_mem_mb("6x65x129x300x48"), runtime=_minutes(5 * bsp_seconds("6x65x129x300x48", 105, "cupy"))),
    log:
        logf("bsp", "iter_kernels"),
    benchmark:
        bench("bsp", "iter_kernels")
    shell:
        "{SOLVER_GPU} bsp iter-kernels {input.cfg:q} {params.sets} --nz 33,49,65,97,129 --nx 65 --nsbn 6 --nw 300 "
        "--nphi 48 --steps 5 --reps 100 --table1 {output.table1:q} --table4 {output.table4:q} "
        "--run-json {output.run:q} > {log:q} 2>&1"


rule bsp_fig10_000_overlap:
    """Fig 10 of 000 (section 3.4, GPU only): time per step on the timing mesh with and without
    numerics.overlap (the next stage's x-derivative on a second CUDA stream during ITER); both
    runs must end bit-identical."""
    input:
        cfg=BSP_RUN_CONFIG,
    output:
        csv=report(res("bsp", "tables", "fig10_overlap_000.csv"), **_caption("bsp_fig10_000_overlap", "000", "phase timing")),
        fig=report(res("bsp", "figures", "fig10_overlap_000.png"), **_caption("bsp_fig10_000_overlap", "000", "phase timing")),
        run=res("bsp", "tables", "fig10_overlap_000.run.json"),
    params:
        sets=bsp_mesh_sets(BSP_TIMING_MESH),
        mesh=BSP_TIMING_MESH,
        steps=int(bsp_get("timing", "steps", default=10)) + 1,
    threads: GPU_THREADS
    resources:
        **cluster(gpu=1, mem_mb=2 * bsp_mem_mb(BSP_TIMING_MESH),
                  runtime=_minutes(2 * bsp_seconds(BSP_TIMING_MESH, int(bsp_get("timing", "steps", default=10)) + 1, "cupy"))),
    log:
        logf("bsp", "overlap"),
    benchmark:
        bench("bsp", "overlap")
    shell:
        "{SOLVER_GPU} bsp overlap {input.cfg:q} {params.sets} --mesh {params.mesh} --steps {params.steps} "
        "--csv {output.csv:q} --fig {output.fig:q} > {log:q} 2>&1"


# the step benchmark: every case of bsp.bench one job (rule bsp_bench_case on the CPU, holding every
# core or a slice; bsp_bench_case_gpu on a GPU of its own with its share of the cores), so that the GPU cases
# spread over the GPUs of a host; rule bsp_bench merges them in the config's order
_BENCH_CASE = res("bsp", "bench", "cases", "{mesh}_{backend}_t{nthreads}_s{steps}_w{warmup}")
_BENCH_CASE_OUTPUTS = dict(steps=f"{_BENCH_CASE}/steps.csv", spread=f"{_BENCH_CASE}/steps_spread.csv",
                           run=f"{_BENCH_CASE}/run.json")
_BENCH_CASE_WILDCARDS = dict(mesh=r"\d+x\d+x\d+x\d+x\d+", nthreads=r"\d+", steps=r"\d+", warmup=r"\d+")
_BENCH_NAME = "bench_{mesh}_{backend}_t{nthreads}_s{steps}_w{warmup}"
# a failed case (non-zero exit, time-out) still writes its row with empty times: the job succeeds
_BENCH_SHELL = ("{params.solver} bsp bench {input.cfg:q} {params.sets} "
                "--case {wildcards.mesh}:{wildcards.backend}:{wildcards.nthreads}:{wildcards.steps}:{wildcards.warmup} "
                "{params.timeout} --out {params.out:q} > {log:q} 2>&1 || [ -f {output.steps:q} ]")
_BENCH_PARAMS = dict(
    out=lambda wc, output: os.path.dirname(output.steps),
    sets=bsp_set_options(bsp_get("set", default=[])),
    timeout=f"--timeout {bsp_get('bench', 'timeout_s')}" if bsp_get("bench", "timeout_s") else "",
)


rule bsp_bench_case:
    """One CPU case of config bsp.bench (python -m solver bsp bench --case ...), holding every core
    (or a slice of the host: config host_slices)."""
    input:
        cfg=BSP_RUN_CONFIG,
    output:
        **_BENCH_CASE_OUTPUTS,
    wildcard_constraints:
        backend="numpy|numba",
        **_BENCH_CASE_WILDCARDS,
    params:
        **_BENCH_PARAMS,
        solver=SOLVER_CPU_TIMING,
    threads: BSP_EXCLUSIVE_THREADS
    resources:
        **cluster(gpu=CPU_TIMING_GPU, mem_mb=lambda wc: bsp_mem_mb(wc.mesh), runtime=bsp_bench_case_minutes),
    log:
        logf("bsp", _BENCH_NAME),
    shell:
        _BENCH_SHELL


rule bsp_bench_case_gpu:
    """One cupy case of config bsp.bench on a GPU of its own (--gpu exclusive), with its share of
    the cores (all of them with one GPU job at a time)."""
    input:
        cfg=BSP_RUN_CONFIG,
    output:
        **_BENCH_CASE_OUTPUTS,
    wildcard_constraints:
        backend="cupy",
        **_BENCH_CASE_WILDCARDS,
    params:
        **_BENCH_PARAMS,
        solver=SOLVER_GPU,
    threads: GPU_THREADS
    resources:
        **cluster(gpu=1, mem_mb=lambda wc: bsp_mem_mb(wc.mesh), runtime=bsp_bench_case_minutes),
    log:
        logf("bsp", _BENCH_NAME),
    shell:
        _BENCH_SHELL


rule bsp_bench:
    """The time step of every (mesh, backend, threads) case of config bsp.bench, each case in its
    own process and job (rules bsp_bench_case, bsp_bench_case_gpu: python -m solver bsp bench),
    merged in the config's order (python -m solver bsp bench-merge): medians over the timed steps
    after the warm-up, start-up time, Newton iterations per step; a failed case is a row with empty
    times (its error in steps_spread.csv); run.json holds every case's record with its GPU."""
    input:
        [f"{bsp_bench_case_dir(c)}/steps.csv" for c in bsp_bench_cases()],
    output:
        steps=report(res("bsp", "bench", "steps.csv"), caption=report_caption("bsp_bench"), category="BSP benchmarks"),
        spread=res("bsp", "bench", "steps_spread.csv"),
        run=res("bsp", "bench", "run.json"),
    params:
        dirs=lambda wc, input: " ".join(shlex.quote(os.path.dirname(f)) for f in input),
        out=lambda wc, output: os.path.dirname(output.steps),
    localrule: True
    log:
        logf("bsp", "bench"),
    shell:
        "{SOLVER} bsp bench-merge {params.dirs} --out {params.out:q} > {log:q} 2>&1"


def _compare_inputs(wildcards):
    machines = sorted(set(machines_with("bsp", "tables/timing_runs.csv")) | {MACHINE})
    return [res("bsp", "tables", "timing_runs.csv", machine=m) for m in machines]


rule bsp_compare:
    """Cross-machine table: Table 5 of 000 (per mesh and variant) of every machine found under
    results/, one column per machine."""
    input:
        _compare_inputs,
    output:
        report(res("bsp", "tables", "compare_machines.csv"), caption=report_caption("bsp_compare"), category="BSP comparison"),
    localrule: True
    log:
        logf("bsp", "compare"),
    script:
        "../scripts/bsp_compare.py"


BSP_TARGETS = []
if enabled("bsp"):
    BSP_TARGETS += [
        *rules.bsp_fig1_geometry.output,
        *rules.bsp_doc_tables.output,
        *rules.bsp_fig4_001_sturm.output,
        *rules.bsp_fig6_000_spy.output,
        *rules.bsp_phase_tables.output,
        *rules.bsp_phase_figures.output,
        *rules.bsp_table3_000_calls.output,
        *rules.bsp_scaling.output,
        *rules.bsp_table7_001_grids.output,
        *rules.bsp_fig6_001_convergence.output,
        *(rules.bsp_validate.output if BSP_VALIDATION else []),
        *rules.bsp_compare.output,
        *rules.bsp_table2_000_krylov.output,
        *rules.bsp_table4_000_kernel_profile.output,
    ]
    if bsp_bench_cases():
        BSP_TARGETS += list(rules.bsp_bench.output)
    if BSP_NCU:
        BSP_TARGETS += list(rules.bsp_tables5_6_001_ncu.output)
    if USE_GPU:
        BSP_TARGETS += list(rules.bsp_tables1_4_001_iter_kernels.output)
        BSP_TARGETS += list(rules.bsp_fig10_000_overlap.output)
    ALL_TARGETS += BSP_TARGETS


rule bsp_all:
    """Every bsp target (snakemake bsp_all --cores N): the tables and figures of papers 000 and 001."""
    input:
        BSP_TARGETS,
    localrule: True
