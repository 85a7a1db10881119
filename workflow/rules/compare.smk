# Machines side by side (issue #15, docs/workflow.md "Several machines side by side"): per study,
# every machine's times under results/<machine>/ with their ratios against each machine's measured
# copy bandwidth and FP64 rate (solver/compare.py), written to results/compare/.  Included last:
# this machine's own outputs of the enabled studies are inputs (made first); the other files found
# under results/ are read as they are, never regenerated here (a param: a new one re-runs the rule).
# On committed results alone:
#   snakemake --cores 1 --configfile config/compare.yaml
COMPARE_STUDY_FILES = {
    "bsp": ["bsp/bench/steps.csv", "bsp/tables/timing_runs.csv", "bsp/kernels/kernel_profile.csv"],
    "collision": ["collision/bench_gpu.csv", "collision/bench_cpu.csv"],
    "rgf": ["rgf/table3_cases.csv", "rgf/table3_cases123.csv", "rgf/table3_cases45.csv"],
    "vecops": ["vecops/*.gpu.csv", "vecops/*.cpu.csv"],
}
COMPARE_CEILING_FILES = ["vecops/ceilings.gpu.csv", "vecops/ceilings.cpu.csv", "bsp/kernels/*ceilings.csv"]


def _compare_own(study):
    """This machine's outputs of a study that this run makes (its rules are enabled)."""
    if not enabled(study):
        return []
    if study == "bsp":
        own = [res("bsp", "tables", "timing_runs.csv"), rules.bsp_table4_000_kernel_profile.output.table]
        return own + ([rules.bsp_bench.output.steps] if bsp_bench_cases() else [])
    if study == "collision":
        return list(rules.collision_bench.output)
    if study == "rgf":
        return [rules.rgf_table3_fig7_cases.output.csv]
    return [f for f in _vecops_csvs() if not f.endswith("table1.csv")]


def _compare_found(patterns):
    """Existing files of the patterns under every machine folder of results/."""
    root = Path(RESULTS)
    return sorted({str(p) for pat in patterns for p in root.glob(f"*/{pat}") if p.parts[len(root.parts)] != "compare"})


def _compare_own_ceilings():
    out = []
    if enabled("bsp"):
        out.append(rules.bsp_table4_000_kernel_profile.output.ceilings)
    if enabled("vecops"):
        out += [f for f in _vecops_csvs() if "ceilings" in f]
    return out


rule compare_study:
    """One study's times on every machine under results/, their speedups over the reference
    machine and the machines' copy-bandwidth and FP64 ratios (solver.compare.study_table)."""
    input:
        lambda wc: sorted(set(_compare_own(wc.study)) | set(_compare_own_ceilings())),
    output:
        table=report(str(Path(RESULTS, "compare", "{study}_machines.csv")), caption=report_caption("compare_study"),
                     category="Machines side by side"),
        fig=report(str(Path(RESULTS, "compare", "{study}_machines.png")), caption=report_caption("compare_study"),
                   category="Machines side by side"),
    wildcard_constraints:
        study="|".join(COMPARE_STUDY_FILES),
    params:
        root=RESULTS,
        found=lambda wc: sorted(set(_compare_found(COMPARE_STUDY_FILES[wc.study] + COMPARE_CEILING_FILES))
                                - set(_compare_own(wc.study)) - set(_compare_own_ceilings())),
        reference=list(config.get("compare", {}).get("reference", ["nvidia-h100"])),
    localrule: True
    log:
        str(Path(RESULTS, "compare", "logs", "{study}.log")),
    script:
        "../scripts/compare_machines.py"


rule compare_ceilings:
    """The measured ceilings of every machine under results/ (copy bandwidth, FP64 and FP32 rates)."""
    input:
        sorted(set(_compare_own_ceilings())),
    output:
        report(str(Path(RESULTS, "compare", "ceilings_machines.csv")), caption=report_caption("compare_ceilings"),
               category="Machines side by side"),
    params:
        root=RESULTS,
        found=sorted(set(_compare_found(COMPARE_CEILING_FILES)) - set(_compare_own_ceilings())),
    localrule: True
    log:
        str(Path(RESULTS, "compare", "logs", "ceilings.log")),
    script:
        "../scripts/compare_machines.py"


COMPARE_TARGETS = [str(Path(RESULTS, "compare", "ceilings_machines.csv"))] + [
    str(Path(RESULTS, "compare", f"{s}_machines.{ext}")) for s in COMPARE_STUDY_FILES for ext in ("csv", "png")]
ALL_TARGETS += COMPARE_TARGETS


rule compare_all:
    """Every comparison table and figure (snakemake compare_all)."""
    input:
        COMPARE_TARGETS,
    localrule: True
