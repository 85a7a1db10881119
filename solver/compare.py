"""Machines side by side: every study's times under ``results/<machine>/`` against each machine's
measured copy bandwidth and FP64 rate (rules compare_study, compare_ceilings; workflow/rules/compare.smk).

Each machine writes only under its own tag; this module reads what the folders hold, whatever
config made them (the ``source`` column names the file), so rows compare only where the case (mesh,
backend, threads, size) is the same.  Per study a long table: one row per (case, machine) with the
time, the speedup over the reference machine (the first of ``reference`` that has the case), and
the reference-relative copy bandwidth and FP64 rate of the device the case ran on: a case whose
speedup follows copy_ratio is bandwidth-bound, one that follows fp64_ratio compute-bound, one below
both bound by something else (launches, the host, latency).

Ceilings (:func:`ceilings`): GPU copy = vecops ``copy_bandwidth`` (ceilings.gpu.csv) else the bsp
kernel profile's device copy; GPU FP64 = the larger of vecops' ``fma_peak_float64`` and the bsp
kernel profile's FP64 FMA chains; CPU copy = vecops ``copy_bandwidth`` (ceilings.cpu.csv) else the
bsp profile's numba/numpy copy; CPU FP64 = the larger of vecops' ``fma_peak_float64`` and the bsp
profile's FP64 GEMM.  A machine without such a file has NaN there (not measured).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

STUDIES = ("bsp", "collision", "rgf", "vecops")


def machines(root) -> list[str]:
    """Machine folders of a results root (the ones holding at least one study)."""
    root = Path(root)
    return sorted(p.name for p in root.iterdir() if p.is_dir() and any((p / s).is_dir() for s in STUDIES))


# ------------------------------------------------------------------------------ ceilings
def _bsp_ceiling_files(folder: Path):
    return sorted((folder / "bsp" / "kernels").glob("*ceilings.csv"))


def ceilings(root, machine) -> list[dict]:
    """One row per device kind (gpu, cpu) of a machine: copy_GB_per_s (vecops' copy_bandwidth, else
    the largest GB/s of the bsp kernel profile's ceilings), fp64_GFLOP_per_s (the larger of vecops'
    fma_peak_float64 and the bsp ceilings' FP64 FMA chains on the GPU / FP64 GEMM on the CPU),
    fp32_GFLOP_per_s (vecops' fma_peak_float32) and the files copy and FP64 come from."""
    folder = Path(root) / machine
    out = {k: {"machine": machine, "device_kind": k, "copy_GB_per_s": np.nan, "fp64_GFLOP_per_s": np.nan,
               "fp32_GFLOP_per_s": np.nan, "copy_source": "", "fp64_source": ""} for k in ("gpu", "cpu")}
    for kind in ("gpu", "cpu"):
        f = folder / "vecops" / f"ceilings.{kind}.csv"
        if f.is_file():
            c = pd.read_csv(f).set_index("quantity")["value"]
            if "copy_bandwidth" in c:
                out[kind].update(copy_GB_per_s=float(c["copy_bandwidth"]), copy_source=str(f))
            if "fma_peak_float32" in c:
                out[kind]["fp32_GFLOP_per_s"] = float(c["fma_peak_float32"])
            if "fma_peak_float64" in c:
                out[kind].update(fp64_GFLOP_per_s=float(c["fma_peak_float64"]), fp64_source=str(f))
    for f in _bsp_ceiling_files(folder):
        c = pd.read_csv(f)
        if not {"ceiling", "value", "unit"} <= set(c.columns):
            continue
        kind = "gpu" if c["ceiling"].str.startswith("device copy").any() else "cpu"
        gbs = c[c["unit"] == "GB/s"]["value"]
        if len(gbs) and np.isnan(out[kind]["copy_GB_per_s"]):
            out[kind].update(copy_GB_per_s=float(gbs.max()), copy_source=str(f))
        fp = c[c["ceiling"].str.startswith("FP64 FMA" if kind == "gpu" else "FP64 GEMM")]["value"]
        if len(fp) and not float(fp.max()) <= out[kind]["fp64_GFLOP_per_s"]:
            out[kind].update(fp64_GFLOP_per_s=float(fp.max()), fp64_source=str(f))
    return list(out.values())


# ------------------------------------------------------------------------------ cases per study
def _rows(df, case, kind, value, unit, source):
    return pd.DataFrame({"case": case, "device_kind": kind, "value": value, "unit": unit, "source": str(source)})


def _bsp(folder: Path) -> list[pd.DataFrame]:
    out = []
    f = folder / "bsp" / "bench" / "steps.csv"
    if f.is_file():
        d = pd.read_csv(f, dtype={"mesh": str}).dropna(subset=["step_ms"])
        case = "step " + d["mesh"] + " " + d["backend"] + "_t" + d["threads"].astype(int).astype(str) + " (bench)"
        out.append(_rows(d, case, np.where(d["backend"] == "cupy", "gpu", "cpu"), d["step_ms"], "ms", f))
    f = folder / "bsp" / "tables" / "timing_runs.csv"
    if f.is_file():
        d = pd.read_csv(f, dtype={"mesh": str}).dropna(subset=["step"])
        case = "step " + d["mesh"] + " " + d["variant"] + " (timing runs)"
        out.append(_rows(d, case, np.where(d["backend"] == "cupy", "gpu", "cpu"), 1e3 * d["step"], "ms", f))
    f = folder / "bsp" / "kernels" / "kernel_profile.csv"
    if f.is_file():
        d = pd.read_csv(f, dtype={"mesh": str})
        d = d[d["variant"] != "array"]
        case = "kernel " + d["kernel"] + " " + d["variant"] + "_t" + d["threads"].astype(str) + " " + d["mesh"]
        out.append(_rows(d, case, np.where(d["variant"] == "cuda", "gpu", "cpu"), d["ms_per_step"], "ms", f))
    return out


def _collision(folder: Path) -> list[pd.DataFrame]:
    out = []
    for f in sorted((folder / "collision").glob("bench_*.csv")):
        d = pd.read_csv(f)
        case = ("gain+loss N=" + d["N"].astype(str) + " " + d["backend"] + "_t" + d["threads"].astype(str) + " "
                + d["dtype"] + np.where(d.get("sampled", False), " (sampled)", ""))
        out.append(_rows(d, case, np.where(d["backend"] == "cupy", "gpu", "cpu"), 1e3 * d["time_s"], "ms", f))
    return out


def _rgf(folder: Path) -> list[pd.DataFrame]:
    out = []
    for f in sorted((folder / "rgf").glob("table3_cases*.csv")):
        d = pd.read_csv(f)
        case = ("Table 3 case " + d["case"].astype(str) + " (" + d["ops"] + ") " + d["ny"].astype(str) + "x"
                + d["nz"].astype(str) + "x" + d["xuc"].astype(str) + " t" + d["threads"].astype(str))
        out.append(_rows(d, case, np.where(d["case"] == 5, "gpu", "cpu"), 1e3 * d["total_s"], "ms", f))
    return out


def _vecops(folder: Path) -> list[pd.DataFrame]:
    """Per (figure, kernel, precision, matrix): the largest size, its fastest work-group size."""
    out = []
    for f in sorted((folder / "vecops").glob("*.*pu.csv")):
        if f.name.startswith("ceilings"):
            continue
        d = pd.read_csv(f)
        if not {"figure", "impl", "median_s", "device_kind"} <= set(d.columns):
            continue
        size = d["nnz"].fillna(d["n"]) if "nnz" in d else d["n"]
        d = d.assign(_size=size, matrix=d.get("matrix", pd.Series("", index=d.index)).fillna(""))
        keys = ["figure", "impl", "precision", "matrix"]
        d = d[d["_size"] == d.groupby(keys)["_size"].transform("max")]
        d = d.loc[d.groupby(keys)["median_s"].idxmin()]
        case = (d["figure"] + " " + d["impl"] + " " + d["precision"] + " " + d["matrix"].astype(str)
                + " size " + d["_size"].astype("int64").astype(str))
        out.append(_rows(d, case.str.replace("  ", " "), d["device_kind"], 1e3 * d["median_s"], "ms", f))
    return out


CASES = {"bsp": _bsp, "collision": _collision, "rgf": _rgf, "vecops": _vecops}


def study_table(root, study, machine_list=None, reference=None) -> pd.DataFrame:
    """One row per (case, machine) of a study: value (ms), speedup over the reference machine,
    copy_ratio and fp64_ratio (this machine's / the reference's, for the case's device kind)."""
    root = Path(root)
    machine_list = machine_list or machines(root)
    ceil = pd.DataFrame([r for m in machine_list for r in ceilings(root, m)]).set_index(["machine", "device_kind"])
    parts = []
    for m in machine_list:
        for d in CASES[study](root / m):
            parts.append(d.assign(machine=m))
    cols = ["study", "case", "device_kind", "machine", "value", "unit", "reference_machine", "speedup_vs_reference",
            "copy_ratio_vs_reference", "fp64_ratio_vs_reference", "copy_GB_per_s", "fp64_GFLOP_per_s", "source"]
    if not parts:
        return pd.DataFrame(columns=cols)
    t = pd.concat(parts, ignore_index=True).drop_duplicates(["case", "machine"])
    t["study"] = study
    order = list(reference or []) + [m for m in machine_list if m not in (reference or [])]
    rank = {m: i for i, m in enumerate(order)}
    t["_rank"] = t["machine"].map(rank)
    ref = t.sort_values("_rank", kind="stable").drop_duplicates("case").set_index("case")  # whole rows
    t["reference_machine"] = t["case"].map(ref["machine"])
    t["speedup_vs_reference"] = t["case"].map(ref["value"]) / t["value"]
    for col, name in (("copy_GB_per_s", "copy_ratio_vs_reference"), ("fp64_GFLOP_per_s", "fp64_ratio_vs_reference")):
        t[col] = [ceil[col].get((m, k), np.nan) for m, k in zip(t["machine"], t["device_kind"])]
        t[name] = t[col] / np.array([ceil[col].get((m, k), np.nan) for m, k in zip(t["reference_machine"], t["device_kind"])])
    return t.sort_values(["case", "_rank"]).drop(columns="_rank")[cols].reset_index(drop=True)


def plot_study(t: pd.DataFrame, title: str, max_cases: int = 40):
    """Speedup over the reference machine per case (bars, one colour per machine) with each
    machine's copy-bandwidth ratio (circles) and FP64 ratio (triangles) for the case's device;
    only cases that more than one machine has (at most ``max_cases``)."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    shared = t[t.groupby("case")["machine"].transform("nunique") > 1]
    cases = list(dict.fromkeys(shared["case"]))[:max_cases]
    ms = sorted(shared["machine"].unique()) if len(shared) else []
    fig, ax = plt.subplots(figsize=(max(6.0, 0.45 * len(cases) + 3), 4.8))
    if not cases:
        ax.text(0.5, 0.5, "no case measured on more than one machine yet", ha="center", va="center", transform=ax.transAxes)
        ax.set_axis_off()
        ax.set_title(title, fontsize=9)
        return fig
    xs = np.arange(len(cases))
    width = 0.8 / len(ms)
    for k, m in enumerate(ms):
        d = shared[shared["machine"] == m].set_index("case").reindex(cases)
        x = xs + (k - (len(ms) - 1) / 2) * width
        ax.bar(x, d["speedup_vs_reference"], width, color=f"C{k}", label=f"{m}: speedup")
        ax.plot(x, d["copy_ratio_vs_reference"], "o", color=f"C{k}", mec="k", ms=4, label=f"{m}: copy bandwidth ratio")
        ax.plot(x, d["fp64_ratio_vs_reference"], "^", color=f"C{k}", mec="k", ms=4, label=f"{m}: FP64 ratio")
    ax.axhline(1.0, color="0.5", lw=0.8)
    ax.set_yscale("log")
    ax.set_xticks(xs, cases, rotation=75, ha="right", fontsize=6)
    ax.set_ylabel("vs the reference machine (time ratio; ceiling ratios)")
    ax.legend(fontsize=6, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    ax.set_title(title, fontsize=9)
    fig.tight_layout()
    return fig
