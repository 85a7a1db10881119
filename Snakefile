# Reproduction workflow: `snakemake --cores N` regenerates every table and figure of the papers
# (list in ../shared/reproduction.md) from config/.  This file only wires; rules live in
# workflow/rules/, helpers in workflow/rules/common.smk.
from snakemake.utils import min_version, validate

min_version("9.17")  # 9.17: a rule priority may be a function (rule iv_point)


# config/config.yaml is the default; a --configfile given on the command line (config/smoke.yaml,
# config/gpu_quick.yaml) is complete in itself and replaces it rather than being merged into it.
if not workflow.overwrite_configfiles:

    configfile: "config/config.yaml"


# 5e-3 is a number in a --configfile as in the solver's own configs (Snakemake's loader reads YAML 1.1: a string)
from solver.config import yaml12_numbers

yaml12_numbers(config)
validate(config, "workflow/schemas/config.schema.yaml")


include: "workflow/rules/common.smk"
include: "workflow/rules/bsp.smk"
include: "workflow/rules/vecops.smk"
include: "workflow/rules/collision.smk"
include: "workflow/rules/rgf.smk"
include: "workflow/rules/compare.smk"
include: "workflow/rules/iv.smk"


report: "workflow/report/workflow.rst"


rule all:
    default_target: True
    input:
        ALL_TARGETS,
