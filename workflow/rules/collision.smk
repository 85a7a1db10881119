# Rules of the collision study (paper 004).  Conventions: see common.smk.
from snakemake.utils import validate as _coll_validate

if enabled("collision"):
    _coll_validate(config["collision"], "../schemas/collision.schema.yaml")
    COLL = config["collision"]
    COLL_BE = COLL["backend"] if COLL["backend"] != "auto" else ("cupy" if USE_GPU else "numba")
    COLL_CACHE = res("collision", "coeffs")

    rule collision_relax:
        output:
            hist=res("collision", "relax_euler_history.csv"),
            snap=res("collision", "relax_euler_snapshots.h5"),
            summ=res("collision", "relax_euler_summary.json"),
        log: logf("collision", "relax")
        benchmark: bench("collision", "relax")
        threads: workflow.cores
        resources: gpu=1 if COLL_BE == "cupy" else 0
        params: out=res("collision")
        shell:
            "{SOLVER} collision relax --backend {COLL_BE} --N {COLL[N]} --h {COLL[h]} --t-end {COLL[t_end]} "
            "--snapshots {COLL[snapshots]} --scheme euler --name relax_euler --out {params.out} "
            "--cache {COLL_CACHE} > {log} 2>&1"

    rule collision_fig1:
        input: res("collision", "relax_euler_snapshots.h5")
        output: report(res("collision", "fig1_bimaxwellian.png"), caption=report_caption("collision_fig1"), category="paper 004")
        localrule: True
        shell: "{SOLVER} collision figure --input {input} --output {output}"

    rule collision_maxwellian:
        output: res("collision", "maxwellian.csv")
        log: logf("collision", "maxwellian")
        benchmark: bench("collision", "maxwellian")
        threads: workflow.cores
        resources: gpu=1 if COLL_BE == "cupy" else 0
        params: out=res("collision")
        shell:
            "{SOLVER} collision maxwellian --backend {COLL_BE} --N {COLL[N]} --h {COLL[h]} --out {params.out} "
            "--cache {COLL_CACHE} > {log} 2>&1"

    rule collision_bkw:
        output: res("collision", "bkw.csv")
        log: logf("collision", "bkw")
        benchmark: bench("collision", "bkw")
        threads: workflow.cores
        resources: gpu=1 if COLL_BE == "cupy" else 0
        params: out=res("collision")
        shell:
            "{SOLVER} collision bkw --backend {COLL_BE} --N {COLL[bkw_N]} --h {COLL[bkw_h]} --t-end {COLL[bkw_t_end]} "
            "--out {params.out} --cache {COLL_CACHE} > {log} 2>&1"

    rule collision_bench:
        output: res("collision", "bench_" + ("gpu" if COLL_BE == "cupy" else "cpu") + ".csv")
        log: logf("collision", "bench")
        benchmark: bench("collision", "bench")
        threads: workflow.cores
        resources: gpu=1 if COLL_BE == "cupy" else 0
        params:
            out=res("collision"),
            name="bench_" + ("gpu" if COLL_BE == "cupy" else "cpu"),
            be="cupy" if COLL_BE == "cupy" else "numba,numba:1",
            dt="float64,float32" if COLL_BE == "cupy" else "float64",
        shell:
            "{SOLVER} collision bench --backends {params.be} --dtypes {params.dt} --meshes {COLL[bench_meshes]} "
            "--repeat 1 --sample 16 --name {params.name} --out {params.out} --cache {COLL_CACHE} > {log} 2>&1"

    ALL_TARGETS += [res("collision", "fig1_bimaxwellian.png"), res("collision", "maxwellian.csv"),
                    res("collision", "bkw.csv"), rules.collision_bench.output[0]]
