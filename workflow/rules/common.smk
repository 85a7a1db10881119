# Helpers shared by every study's rules.  Each study's .smk validates its own config section,
# writes under results/<machine>/<study>/ and appends its final targets to ALL_TARGETS.
import os
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
