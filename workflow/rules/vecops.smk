# Rules of the vecops study (paper 003: AXPY, DOT and CSR SpMV kernels).  Conventions: see common.smk.
#
# CPU columns (NumPy/SciPy, numba all cores) run everywhere; the GPU sweeps, GPU ceilings and the
# GPU column of Table 1 only when USE_GPU (resources gpu=1).  The GPU results committed under
# results/<gpu machine>/vecops/ were produced on the device machine by the same
# `python -m solver vecops ...` commands these rules run; the figures rule regenerates the figures
# from whatever CSVs the machine's folder holds (bench rules are not re-run):
#   tar xzf vecops_results.tgz   # from tools/vecops/vecops_device_run.sh
#   snakemake --cores 2 --config machine=nvidia-h100 gpu=True --allowed-rules vecops_figures vecops_all -- vecops_all
import json as _vecops_json

from solver.vecops.config import resolve as _vecops_resolve
from solver.vecops.sweeps import CSV_NAMES as _VECOPS_CSV, GPU_ONLY as _VECOPS_GPU_ONLY

if enabled("vecops"):
    validate(config["vecops"], "../schemas/vecops.schema.yaml")
    VECOPS = _vecops_resolve(config["vecops"])  # extra cross-key checks; ConfigError names the key
    VECOPS_JSON = _vecops_json.dumps(VECOPS, sort_keys=True)
    _VECOPS_FIG = {v: k for k, v in _VECOPS_CSV.items()}
    VECOPS_CPU_NAMES = [v for k, v in _VECOPS_CSV.items() if k not in _VECOPS_GPU_ONLY]
    VECOPS_GPU_NAMES = list(_VECOPS_CSV.values())
    VECOPS_FIGURES = ["fig09_axpy.png", "fig10_dot0_blocks.png", "fig11_dot1_blocks.png", "fig12_dot_sizes.png",
                      "fig13_spmv_vector.png", "fig14_spmv_scalar.png", "roofline.png"]

    def _vecops_csvs(wildcards=None):
        files = [res("vecops", f"{n}.cpu.csv") for n in VECOPS_CPU_NAMES] + [res("vecops", "ceilings.cpu.csv")]
        if USE_GPU:
            files += [res("vecops", f"{n}.gpu.csv") for n in VECOPS_GPU_NAMES] + [res("vecops", "ceilings.gpu.csv")]
        return files + [res("vecops", "table1.csv")]

    rule vecops_bench_cpu:
        output:
            csv=res("vecops", "{vname}.cpu.csv"),
            rec=res("vecops", "{vname}.cpu.run.json"),
        wildcard_constraints:
            vname="|".join(VECOPS_CPU_NAMES),
        params:
            fig=lambda w: _VECOPS_FIG[w.vname],
            cfg=VECOPS_JSON,
        log:
            logf("vecops", "bench_{vname}_cpu"),
        benchmark:
            bench("vecops", "bench_{vname}_cpu")
        threads: max(1, workflow.cores)
        resources:
            **cluster(mem_mb=vecops_mem_mb("cpu"), runtime=VECOPS_MINUTES),
        group:
            "vecops_cpu"
        shell:
            "{SOLVER} vecops bench --figure {params.fig} --device cpu --config-json {params.cfg:q} "
            "--out {output.csv} > {log} 2>&1"

    rule vecops_ceilings_cpu:
        output:
            csv=res("vecops", "ceilings.cpu.csv"),
            rec=res("vecops", "ceilings.cpu.run.json"),
        params:
            cfg=VECOPS_JSON,
        log:
            logf("vecops", "ceilings_cpu"),
        benchmark:
            bench("vecops", "ceilings_cpu")
        threads: max(1, workflow.cores)
        resources:
            **cluster(mem_mb=vecops_mem_mb("cpu"), runtime=VECOPS_MINUTES),
        group:
            "vecops_cpu"
        shell:
            "{SOLVER} vecops ceilings --device cpu --config-json {params.cfg:q} --out {output.csv} > {log} 2>&1"

    if USE_GPU:

        rule vecops_bench_gpu:
            output:
                csv=res("vecops", "{vname}.gpu.csv"),
                rec=res("vecops", "{vname}.gpu.run.json"),
            wildcard_constraints:
                vname="|".join(VECOPS_GPU_NAMES),
            params:
                fig=lambda w: _VECOPS_FIG[w.vname],
                cfg=VECOPS_JSON,
            log:
                logf("vecops", "bench_{vname}_gpu"),
            benchmark:
                bench("vecops", "bench_{vname}_gpu")
            threads: 1
            resources:
                **cluster(gpu=1, mem_mb=vecops_mem_mb("gpu"), runtime=VECOPS_MINUTES),
            group:
                "vecops_gpu"
            shell:
                "{SOLVER_GPU} vecops bench --figure {params.fig} --device gpu --config-json {params.cfg:q} "
                "--out {output.csv} > {log} 2>&1"

        rule vecops_ceilings_gpu:
            output:
                csv=res("vecops", "ceilings.gpu.csv"),
                rec=res("vecops", "ceilings.gpu.run.json"),
            params:
                cfg=VECOPS_JSON,
            log:
                logf("vecops", "ceilings_gpu"),
            benchmark:
                bench("vecops", "ceilings_gpu")
            threads: 1
            resources:
                **cluster(gpu=1, mem_mb=vecops_mem_mb("gpu"), runtime=VECOPS_MINUTES),
            group:
                "vecops_gpu"
            shell:
                "{SOLVER_GPU} vecops ceilings --device gpu --config-json {params.cfg:q} --out {output.csv} > {log} 2>&1"

        rule vecops_table1:
            output:
                csv=res("vecops", "table1.csv"),
                rec=res("vecops", "table1.run.json"),
            params:
                cfg=VECOPS_JSON,
            log:
                logf("vecops", "table1"),
            threads: 1
            resources:
                **cluster(gpu=1, mem_mb=vecops_mem_mb("gpu"), runtime=VECOPS_MINUTES),
            group:
                "vecops_gpu"
            shell:
                "{SOLVER_GPU} vecops table1 --gpu --config-json {params.cfg:q} --out {output.csv} > {log} 2>&1"

    else:

        rule vecops_table1:
            output:
                csv=res("vecops", "table1.csv"),
                rec=res("vecops", "table1.run.json"),
            params:
                cfg=VECOPS_JSON,
            log:
                logf("vecops", "table1"),
            threads: 1
            resources:
                **cluster(mem_mb=vecops_mem_mb("cpu"), runtime=VECOPS_MINUTES),
            group:
                "vecops_cpu"
            shell:
                "{SOLVER} vecops table1 --config-json {params.cfg:q} --out {output.csv} > {log} 2>&1"

    rule vecops_figures:
        input:
            _vecops_csvs,
        output:
            figs=[report(res("vecops", f), caption=report_caption("vecops_figures"), category="Paper 003 vecops")
                  for f in VECOPS_FIGURES],
            table=report(res("vecops", "table1.md"), caption=report_caption("vecops_table1"), category="Paper 003 vecops"),
            rec=res("vecops", "figures.run.json"),
        params:
            cfg=VECOPS_JSON,
            folder=res("vecops"),
        log:
            logf("vecops", "plot"),
        localrule: True
        shell:
            "{SOLVER} vecops plot --config-json {params.cfg:q} --dir {params.folder} > {log} 2>&1"

    rule vecops_all:
        input:
            rules.vecops_figures.output,

    ALL_TARGETS += [res("vecops", f) for f in VECOPS_FIGURES] + [res("vecops", "table1.md")]
