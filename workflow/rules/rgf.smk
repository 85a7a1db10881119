# Rules of the rgf study (paper 002: recursive Green's function transport in a [100] Si nanowire).
# Conventions: see common.smk.  Bulk/wire gap tables pin the Hamiltonian; T(E)/LDOS(E) run as one
# job per chunk of energies (rgf_sweep_chunk; several lengths share the leads of one energy);
# Fig 8a comes from timed parallel runs (rgf_scaling_run: `solver rgf scaling-run` launches the
# same `solver rgf sweep --chunk c --n-chunks C` command as rgf_sweep_chunk, at most W chunk
# processes at a time, one per GPU through CUDA_VISIBLE_DEVICES when USE_GPU, else one per core).
# Table 3 / Fig 7 cases 1-4 run on this machine's CPU (numba), case 5 only when USE_GPU.
# The full-size wire (X-UC = 100, 8 x 16), the 8 x 16 Fig 8b/8c sweep, the batching benchmark and
# the 1- and 2-GPU Fig 8a were run by hand on the device machines: tools/rgf/ (tools/README.md).
if enabled("rgf"):
    validate(config["rgf"], "../schemas/rgf.schema.yaml")
    RGF = config["rgf"]
    _RS = RGF["sweep"]
    RGF_CHUNKS = list(range(_RS["n_chunks"]))
    _RC = RGF["cases"]
    RGF_CASES = [c for c in _RC["cases"] if c != 5 or USE_GPU]
    _RK = RGF["cost"]
    _RSC = RGF["scaling"]
    RGF_SCALING = [(w, c) for w in _RSC["workers"] for c in _RSC["chunks"] if c >= w]
    _RGF_XUC = ",".join(map(str, _RS["xuc"] if isinstance(_RS["xuc"], list) else [_RS["xuc"]]))
    _RGF_BACKEND = _RS["backend"] if _RS["backend"] != "auto" else ("cupy" if USE_GPU else "numpy")

    rule rgf_bulk:
        output:
            csv=report(res("rgf", "bulk_gaps.csv"), caption=report_caption("rgf_bands"), category="paper 002"),
            fig=report(res("rgf", "bulk_bands.png"), caption=report_caption("rgf_bands"), category="paper 002"),
        log:
            logf("rgf", "bulk"),
        benchmark:
            bench("rgf", "bulk")
        threads: 1
        resources:
            **cluster(),
        group:
            "rgf_small"
        shell:
            "{SOLVER} rgf bulk --out {output.csv} --fig {output.fig} > {log} 2>&1"

    rule rgf_wire_gaps:
        output:
            csv=report(res("rgf", "wire_gaps.csv"), caption=report_caption("rgf_bands"), category="paper 002"),
        params:
            sizes=",".join(map(str, RGF["wire_gaps"]["sizes"])),
            tbset=RGF["wire_gaps"]["set"],
            shift=RGF["wire_gaps"]["shift"],
        log:
            logf("rgf", "wire_gaps"),
        benchmark:
            bench("rgf", "wire_gaps")
        threads: 2
        resources:
            **cluster(mem_mb=rgf_mem_mb(max(RGF["wire_gaps"]["sizes"]), max(RGF["wire_gaps"]["sizes"]), 1)),
        group:
            "rgf_small"
        shell:
            "{SOLVER} rgf wire-gaps --out {output.csv} --sizes {params.sizes} --set {params.tbset} "
            "--shift {params.shift} > {log} 2>&1"

    rule rgf_sweep_chunk:
        output:
            csv=res("rgf", "sweep", "chunk{chunk}.csv"),
            rec=res("rgf", "sweep", "chunk{chunk}.run.json"),
        params:
            so="--spin-orbit" if _RS["spin_orbit"] else "",
            backend=_RGF_BACKEND,
            solver=SOLVER_GPU if _RGF_BACKEND == "cupy" else SOLVER,
        log:
            logf("rgf", "sweep_chunk{chunk}"),
        benchmark:
            bench("rgf", "sweep_chunk{chunk}")
        threads: 1
        resources:
            **cluster(gpu=1 if _RGF_BACKEND == "cupy" else 0, mem_mb=rgf_chunk_mem_mb(_RS),
                      runtime=rgf_chunk_minutes(_RS, _RGF_BACKEND == "cupy")),
        group:
            None if _RGF_BACKEND == "cupy" else "rgf_sweep"
        shell:
            "OMP_NUM_THREADS={threads} OPENBLAS_NUM_THREADS={threads} MKL_NUM_THREADS={threads} "
            "{params.solver} rgf sweep --out {output.csv} --ny {_RS[ny]} --nz {_RS[nz]} --xuc {_RGF_XUC} --batch {_RS[batch]} "
            "--emin {_RS[emin]} --emax {_RS[emax]} --ne {_RS[ne]} --chunk {wildcards.chunk} "
            "--n-chunks {_RS[n_chunks]} --set {_RS[set]} {params.so} --eta {_RS[eta]} "
            "--backend {params.backend} > {log} 2>&1"

    rule rgf_fig8bc:
        input:
            expand(res("rgf", "sweep", "chunk{chunk}.csv"), chunk=RGF_CHUNKS),
        output:
            report(res("rgf", "fig8bc_transmission_ldos.png"), caption=report_caption("rgf_figures"), category="paper 002"),
        params:
            title=f"{_RS['ny']}x{_RS['nz']} x ({_RGF_XUC}) UC",
        localrule: True
        log:
            logf("rgf", "fig8bc"),
        shell:
            "{SOLVER} rgf plot-sweep --out {output} --title '{params.title}' {input} > {log} 2>&1"

    rule rgf_scaling_run:
        output:
            csv=res("rgf", "scaling", "w{workers}_c{chunks}.csv"),
            rec=res("rgf", "scaling", "w{workers}_c{chunks}.run.json"),
        wildcard_constraints:
            workers=r"\d+",
            chunks=r"\d+",
        params:
            devices="gpu" if USE_GPU else "cpu",
            backend="cupy" if USE_GPU else "numpy",
            chunk_dir=lambda wc: res("rgf", "scaling", f"w{wc.workers}_c{wc.chunks}"),
            # W GPUs of its own (the workers see them as 0..W-1; solver/rgf/scaling.py)
            gpu=lambda wc: f"--gpu exclusive:{int(wc.workers)} " if USE_GPU else "",
        log:
            logf("rgf", "scaling_w{workers}_c{chunks}"),
        threads: lambda wc: int(wc.workers)
        resources:
            **cluster(gpu=lambda wc: int(wc.workers) if USE_GPU else 0,
                      mem_mb=lambda wc: int(wc.workers) * rgf_mem_mb(_RSC["ny"], _RSC["nz"], _RSC["xuc"]),
                      runtime=lambda wc: rgf_minutes(_RSC["ny"], _RSC["nz"], _RSC["xuc"], _RSC["ne"], USE_GPU,
                                                     workers=int(wc.workers))),
        shell:
            "{SOLVER} {params.gpu}rgf scaling-run --workers {wildcards.workers} --chunks {wildcards.chunks} "
            "--devices {params.devices} --out {output.csv} --chunk-dir {params.chunk_dir} -- "
            "--ny {_RSC[ny]} --nz {_RSC[nz]} --xuc {_RSC[xuc]} --emin {_RSC[emin]} --emax {_RSC[emax]} "
            "--ne {_RSC[ne]} --set {_RS[set]} --eta {_RS[eta]} --backend {params.backend} > {log} 2>&1"

    rule rgf_fig8a:
        input:
            [res("rgf", "scaling", f"w{w}_c{c}.csv") for w, c in RGF_SCALING],
        output:
            csv=report(res("rgf", "fig8a_strong_scaling.csv"), caption=report_caption("rgf_figures"), category="paper 002"),
            fig=report(res("rgf", "fig8a_strong_scaling.png"), caption=report_caption("rgf_figures"), category="paper 002"),
        params:
            title=f"{_RSC['ny']}x{_RSC['nz']} x {_RSC['xuc']} UC, {_RSC['ne']} energies",
        localrule: True
        log:
            logf("rgf", "fig8a"),
        shell:
            "{SOLVER} rgf scaling-measured --out {output.csv} --fig {output.fig} --title '{params.title}' "
            "{input} > {log} 2>&1"

    rule rgf_table3_fig7_cases:
        output:
            csv=report(res("rgf", "table3_cases.csv"), caption=report_caption("rgf_figures"), category="paper 002"),
            fig=report(res("rgf", "fig7_cases.png"), caption=report_caption("rgf_figures"), category="paper 002"),
        params:
            cases=",".join(map(str, RGF_CASES)),
            # a timing job like bsp_run: case 5 on a GPU of its own, 1-4 on every core of a one-GPU host; with
            # host_slices a slice (its GPU, its cores pinned, that many threads), as on a one-GPU host
            # (2026-11-27 the whole 64-vCPU host with 64 threads made cases 1-4 2-11x slower than 16 threads)
            solver=SOLVER_GPU if 5 in RGF_CASES else SOLVER_CPU_TIMING,
        log:
            logf("rgf", "cases"),
        benchmark:
            bench("rgf", "cases")
        threads: GPU_THREADS if HOST_SLICES else workflow.cores
        resources:
            **cluster(gpu=1 if 5 in RGF_CASES else CPU_TIMING_GPU, mem_mb=rgf_mem_mb(_RC["ny"], _RC["nz"], _RC["xuc"]),
                      runtime=rgf_minutes(_RC["ny"], _RC["nz"], _RC["xuc"], 10 * len(RGF_CASES), False)),
        shell:
            "NUMBA_NUM_THREADS={threads} {params.solver} rgf cases --out {output.csv} --fig {output.fig} "
            "--cases {params.cases} --ny {_RC[ny]} --nz {_RC[nz]} --xuc {_RC[xuc]} --energy {_RC[energy]} > {log} 2>&1"

    rule rgf_fig2_cost:
        output:
            csv=report(res("rgf", "fig2_cost.csv"), caption=report_caption("rgf_figures"), category="paper 002"),
            fig=report(res("rgf", "fig2_cost.png"), caption=report_caption("rgf_figures"), category="paper 002"),
        params:
            lengths=",".join(map(str, _RK["lengths"])),
            sections=",".join(_RK["sections"]),
        log:
            logf("rgf", "cost"),
        benchmark:
            bench("rgf", "cost")
        threads: 1
        resources:
            **cluster(mem_mb=rgf_cost_mem_mb(_RK["sections"], _RK["lengths"]),
                      runtime=rgf_cost_minutes(_RK["sections"], _RK["lengths"])),
        group:
            "rgf_small"
        shell:
            "OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 MKL_NUM_THREADS=1 "
            "{SOLVER} rgf cost --out {output.csv} --fig {output.fig} --lengths {params.lengths} "
            "--sections {params.sections} --base-length {_RK[base_length]} --base-section {_RK[base_section]} "
            "--energy {_RK[energy]} > {log} 2>&1"

    rule rgf_table1:
        output:
            report(res("rgf", "table1_thread_efficiency.csv"), caption=report_caption("rgf_table1"), category="paper 002"),
        localrule: True
        log:
            logf("rgf", "table1"),
        shell:
            "{SOLVER} rgf table1 --out {output} --rows {RGF[table1][rows]} --threads {RGF[table1][threads]} > {log} 2>&1"

    rule rgf_all:
        input:
            res("rgf", "bulk_gaps.csv"),
            res("rgf", "wire_gaps.csv"),
            res("rgf", "fig8bc_transmission_ldos.png"),
            res("rgf", "fig8a_strong_scaling.png"),
            res("rgf", "fig7_cases.png"),
            res("rgf", "fig2_cost.png"),
            res("rgf", "table1_thread_efficiency.csv"),

    ALL_TARGETS.extend(rules.rgf_all.input)
