# Rules of the collision study (paper 004).  Conventions: see common.smk.
from snakemake.utils import validate as _coll_validate

if enabled("collision"):
    _coll_validate(config["collision"], "../schemas/collision.schema.yaml")
    COLL = config["collision"]
    COLL_BE = COLL["backend"] if COLL["backend"] != "auto" else ("cupy" if USE_GPU else "numba")
    COLL_CACHE = res("collision", "coeffs")
    # GPU jobs: a GPU of their own and a share of the cores (common.smk, "GPUs of this host")
    COLL_SOLVER = SOLVER_GPU if COLL_BE == "cupy" else SOLVER
    COLL_THREADS = GPU_THREADS if COLL_BE == "cupy" else workflow.cores

    rule collision_relax:
        output:
            hist=res("collision", "relax_euler_history.csv"),
            snap=res("collision", "relax_euler_snapshots.h5"),
            summ=res("collision", "relax_euler_summary.json"),
        log: logf("collision", "relax")
        benchmark: bench("collision", "relax")
        threads: COLL_THREADS
        resources:
            **cluster(gpu=1 if COLL_BE == "cupy" else 0, mem_mb=collision_mem_mb(COLL["N"]),
                      runtime=collision_minutes(COLL["N"], COLL_BE == "cupy")),
        params: out=res("collision")
        shell:
            "{COLL_SOLVER} collision relax --backend {COLL_BE} --N {COLL[N]} --h {COLL[h]} --t-end {COLL[t_end]} "
            "--snapshots {COLL[snapshots]} --scheme euler --name relax_euler --out {params.out} "
            "--cache {COLL_CACHE} > {log} 2>&1"

    rule collision_fig1:
        input: res("collision", "relax_euler_snapshots.h5")
        output: report(res("collision", "fig1_bimaxwellian.png"), caption=report_caption("collision_fig1"), category="paper 004")
        localrule: True
        shell: "{SOLVER} collision figure --input {input} --output {output}"

    rule collision_maxwellian:
        output: report(res("collision", "maxwellian.csv"), caption=report_caption("collision_checks"), category="paper 004")
        log: logf("collision", "maxwellian")
        benchmark: bench("collision", "maxwellian")
        threads: COLL_THREADS
        resources:
            **cluster(gpu=1 if COLL_BE == "cupy" else 0, mem_mb=collision_mem_mb(COLL["N"]),
                      runtime=collision_minutes(COLL["N"], COLL_BE == "cupy")),
        params: out=res("collision")
        shell:
            "{COLL_SOLVER} collision maxwellian --backend {COLL_BE} --N {COLL[N]} --h {COLL[h]} --out {params.out} "
            "--cache {COLL_CACHE} > {log} 2>&1"

    rule collision_bkw:
        output: report(res("collision", "bkw.csv"), caption=report_caption("collision_checks"), category="paper 004")
        log: logf("collision", "bkw")
        benchmark: bench("collision", "bkw")
        threads: COLL_THREADS
        resources:
            **cluster(gpu=1 if COLL_BE == "cupy" else 0, mem_mb=collision_mem_mb(COLL["bkw_N"]),
                      runtime=collision_minutes(COLL["bkw_N"], COLL_BE == "cupy")),
        params: out=res("collision")
        shell:
            "{COLL_SOLVER} collision bkw --backend {COLL_BE} --N {COLL[bkw_N]} --h {COLL[bkw_h]} --t-end {COLL[bkw_t_end]} "
            "--out {params.out} --cache {COLL_CACHE} > {log} 2>&1"

    rule collision_bench:
        output:
            report(res("collision", "bench_" + ("gpu" if COLL_BE == "cupy" else "cpu") + ".csv"),
                   caption=report_caption("collision_checks"), category="paper 004"),
        log: logf("collision", "bench")
        benchmark: bench("collision", "bench")
        threads: COLL_THREADS
        resources:
            **cluster(gpu=1 if COLL_BE == "cupy" else 0, mem_mb=collision_mem_mb(collision_max_N(COLL["bench_meshes"])),
                      runtime=collision_bench_minutes(COLL["bench_meshes"], COLL_BE == "cupy")),
        params:
            out=res("collision"),
            name="bench_" + ("gpu" if COLL_BE == "cupy" else "cpu"),
            be="cupy" if COLL_BE == "cupy" else "numba,numba:1",
            dt="float64,float32" if COLL_BE == "cupy" else "float64",
        shell:
            "{COLL_SOLVER} collision bench --backends {params.be} --dtypes {params.dt} --meshes {COLL[bench_meshes]} "
            "--repeat 1 --sample 16 --name {params.name} --out {params.out} --cache {COLL_CACHE} > {log} 2>&1"

    ALL_TARGETS += [res("collision", "fig1_bimaxwellian.png"), res("collision", "maxwellian.csv"),
                    res("collision", "bkw.csv"), rules.collision_bench.output[0]]

    # Mesh convergence of the BKW, Maxwellian and Chapman-Enskog checks (docs/performance-collision.md);
    # only with `convergence: true` (the full config; GPU-sized), never in the smoke run.
    if COLL["convergence"]:
        COLL_HW = float(COLL["conv_half_width"])
        _coll_list = lambda s: [x for x in str(s).split(",") if x]
        COLL_CONV_INPUTS = (
            [res("collision", f"relax_rk2_N{N}_summary.json") for N in _coll_list(COLL["conv_relax_meshes"])]
            + [res("collision", f"bkw_N{p.split(':')[0]}_hw{p.split(':')[1]}.csv") for p in _coll_list(COLL["conv_bkw"])]
            + [res("collision", f"maxwellian_N{N}.csv") for N in _coll_list(COLL["conv_maxwellian_meshes"])]
            + [res("collision", "maxwellian.csv"), res("collision", "rates.csv")])

        rule collision_relax_rk2:
            output:
                hist=res("collision", "relax_rk2_N{N}_history.csv"),
                summ=res("collision", "relax_rk2_N{N}_summary.json"),
            wildcard_constraints: N=r"\d+"
            log: logf("collision", "relax_rk2_N{N}")
            benchmark: bench("collision", "relax_rk2_N{N}")
            threads: COLL_THREADS
            resources:
                **cluster(gpu=1 if COLL_BE == "cupy" else 0, mem_mb=lambda w: collision_mem_mb(w.N),
                          runtime=lambda w: collision_minutes(w.N, COLL_BE == "cupy")),
            params: out=res("collision"), h=lambda w: 2 * COLL_HW / int(w.N)
            shell:
                "{COLL_SOLVER} collision relax --backend {COLL_BE} --N {wildcards.N} --h {params.h} --t-end {COLL[t_end]} "
                "--scheme rk2 --snapshots 0 --name relax_rk2_N{wildcards.N} --out {params.out} "
                "--cache {COLL_CACHE} > {log} 2>&1"

        rule collision_bkw_mesh:
            output: res("collision", "bkw_N{N}_hw{hw}.csv")
            wildcard_constraints: N=r"\d+", hw=r"[0-9.]+"
            log: logf("collision", "bkw_N{N}_hw{hw}")
            benchmark: bench("collision", "bkw_N{N}_hw{hw}")
            threads: COLL_THREADS
            resources:
                **cluster(gpu=1 if COLL_BE == "cupy" else 0, mem_mb=lambda w: collision_mem_mb(w.N),
                          runtime=lambda w: collision_minutes(w.N, COLL_BE == "cupy")),
            params: out=res("collision"), h=lambda w: 2 * float(w.hw) / int(w.N)
            shell:
                "{COLL_SOLVER} collision bkw --backend {COLL_BE} --N {wildcards.N} --h {params.h} --t-end {COLL[bkw_t_end]} "
                "--name bkw_N{wildcards.N}_hw{wildcards.hw} --out {params.out} --cache {COLL_CACHE} > {log} 2>&1"

        rule collision_maxwellian_mesh:
            output: res("collision", "maxwellian_N{N}.csv")
            wildcard_constraints: N=r"\d+"
            log: logf("collision", "maxwellian_N{N}")
            benchmark: bench("collision", "maxwellian_N{N}")
            threads: COLL_THREADS
            resources:
                **cluster(gpu=1 if COLL_BE == "cupy" else 0, mem_mb=lambda w: collision_mem_mb(w.N),
                          runtime=lambda w: collision_minutes(w.N, COLL_BE == "cupy")),
            params: out=res("collision"), h=lambda w: 2 * COLL_HW / int(w.N)
            shell:
                "{COLL_SOLVER} collision maxwellian --backend {COLL_BE} --N {wildcards.N} --h {params.h} --T 1.0,2.5,4.0 "
                "--name maxwellian_N{wildcards.N} --out {params.out} --cache {COLL_CACHE} > {log} 2>&1"

        rule collision_rates:
            output: res("collision", "rates.csv")
            log: logf("collision", "rates")
            benchmark: bench("collision", "rates")
            threads: COLL_THREADS
            resources:
                **cluster(gpu=1 if COLL_BE == "cupy" else 0, mem_mb=collision_mem_mb(collision_max_N(COLL["conv_rates_meshes"])),
                          runtime=collision_minutes(collision_max_N(COLL["conv_rates_meshes"]), COLL_BE == "cupy")),
            params: out=res("collision")
            shell:
                "{COLL_SOLVER} collision rates --backend {COLL_BE} --meshes {COLL[conv_rates_meshes]} --half-width {COLL_HW} "
                "--T 2.5 --bkw-half-width 6 --out {params.out} --cache {COLL_CACHE} > {log} 2>&1"

        rule collision_convergence:
            input: COLL_CONV_INPUTS
            output:
                csv=res("collision", "convergence.csv"),
                fig=report(res("collision", "fig_convergence.png"), caption=report_caption("collision_convergence"),
                           category="paper 004"),
            localrule: True
            params: folder=res("collision")
            shell: "{SOLVER} collision convergence --input {params.folder} --figure {output.fig} > /dev/null"

        ALL_TARGETS += [res("collision", "fig_convergence.png")]
