"""From run records to the papers' tables and figures (papers 000 and 001).

A *run directory* is what ``python -m solver run CONFIG --out DIR`` writes: ``run.json`` (provenance,
``timers`` and ``summary``), ``timers.csv`` (step, phase, seconds), ``profiles.csv`` /
``profiles_t0.csv``, ``scalars.csv`` and ``fields.h5``.  :func:`collect_runs` turns run
directories into one tidy table (one row per run, one column per phase: mean seconds per time
step); everything else works on that table:

- :func:`phase_table`   Table 5 of 000; Fig 7, Tables 2-3 of 001 (per-phase time per variant);
- :func:`weights`       Figs 11-13 of 000 (absolute and relative weight of phases in a parent);
- :func:`speedups`      Fig 15 of 000, Figs 7-9 of 001 (baseline time / time);
- :func:`mesh_scaling`  Fig 14 of 000, Figs 10-13 of 001 (each dimension doubled);
- :func:`grid_speedups` Table 7 of 001 (iter speedup along the grid sequence);
- :func:`convergence`   Fig 6 of 001 (error of N_s(x), j(x) vs the finest mesh; observed order);
- :func:`compare_machines` the cross-machine table;
- :func:`sturm_curve`   Fig 4 of 001 (Sturm count sigma(xi) of a Schroedinger matrix).
"""
from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd

MESH_DIMS = ("N_sbn", "NX", "NZ", "NW", "NPHI")

# Phase names of the solver's PhaseTimer (run.json "timers")
TOP = ("BTE", "DENS", "ITER")
BTE_KERNELS = ("BTE/WENO_x", "BTE/WENO_w", "BTE/WENO_phi", "BTE/scat_gain", "BTE/scat_loss", "BTE/RK")
ITER_STEPS = ("ITER/eigen", "ITER/Frechet", "ITER/construct_linsys", "ITER/solve_linsys")
# phase leaves renamed since some committed timers.csv / run.json were written (old -> new)
RENAMED_PHASES = {"constrlinsys": "construct_linsys", "solvelinsys": "solve_linsys"}
PHASES = ("step",) + TOP + BTE_KERNELS + ITER_STEPS

# Table 5 of paper 000: its columns as sums of the solver's phases
TABLE5_000 = {
    "step": ("step",),
    "BTE": ("BTE",),
    "DENS": ("DENS",),
    "ITER": ("ITER",),
    "FD-WENO-5": ("BTE/WENO_x", "BTE/WENO_w", "BTE/WENO_phi"),
    "scatt.": ("BTE/scat_gain", "BTE/scat_loss"),
    "lin. sys.": ("ITER/solve_linsys",),
    "Schrod.": ("ITER/eigen",),
    "NR kernel": ("ITER/Frechet",),
}
# The fused stage (phase key RK_wphi: cupy and numba, numerics.bte_kernels fast) forms the WENO w
# and phi terms inside the RK kernel: such a run has a BTE/RK timer and none of these, and every
# column summing one of them (FD-WENO-5) is unknown (NaN) for it, its row marked with FUSED_NOTE
FUSED_INTO_RK = ("BTE/WENO_w", "BTE/WENO_phi")
FUSED_NOTE = "RK includes WENO_w + WENO_phi (fused RK_wphi)"
# Tables 2 and 3 of paper 001 (phases BTE, iter; iter sections)
TABLE2_001 = {"step": ("step",), "BTE": ("BTE",), "iter": ("ITER",)}
TABLE3_001 = {"iter.eigen": ("ITER/eigen",), "iter.Frechet": ("ITER/Frechet",),
          "iter.constrlinsys": ("ITER/construct_linsys",), "iter.solvelinsys": ("ITER/solve_linsys",)}


# ------------------------------------------------------------------------------ the papers' numbers
# Printed in the papers' text (../shared/papers): shown beside ours in every table and figure
# that has them, each labelled with the paper's hardware.  Figures whose values the papers give
# only as plots (Fig 14 of 000, Figs 10-13 of 001, Fig 6 of 001) have none.
PAPER_000_HW = "paper 000: 2x Xeon E5-2630 (16 cores), Tesla K40c"
PAPER_001_CPU = "paper 001: 2x Xeon Silver 4210 (20 cores)"
PAPER_001_GPUS = {"RTX 3090": "paper 001: GeForce RTX 3090", "V100": "paper 001: Tesla V100"}
# Table 5 of 000: seconds per step of each phase, standard mesh 6x65x65x300x48; (label, threads, gpu)
PAPER_000_TABLE5_COLUMNS = tuple(TABLE5_000)
PAPER_000_TABLE5 = {
    ("sequential", 1, False): (19.82, 18.56, 0.044, 1.22, 3.69, 13.70, 0.59, 0.23, 0.37),
    ("OMP 2-core", 2, False): (10.05, 9.35, 0.024, 0.67, 1.87, 6.89, 0.34, 0.12, 0.19),
    ("OMP 4-core", 4, False): (5.60, 5.18, 0.0146, 0.40, 1.03, 3.82, 0.207, 0.066, 0.106),
    ("OMP 6-core", 6, False): (4.05, 3.72, 0.011, 0.317, 0.74, 2.74, 0.167, 0.048, 0.076),
    ("OMP 8-core", 8, False): (3.32, 3.04, 0.0103, 0.27, 0.61, 2.24, 0.145, 0.04, 0.063),
    ("OMP 10-core", 10, False): (2.83, 2.58, 0.0086, 0.24, 0.618, 1.8, 0.136, 0.032, 0.051),
    ("OMP 12-core", 12, False): (2.39, 2.16, 0.0075, 0.21, 0.53, 1.5, 0.119, 0.026, 0.042),
    ("OMP 14-core", 14, False): (2.07, 1.85, 0.0068, 0.208, 0.46, 1.28, 0.121, 0.022, 0.036),
    ("OMP 16-core", 16, False): (1.73, 1.53, 0.0062, 0.199, 0.31, 1.12, 0.119, 0.02, 0.032),
    ("OMP 16-core/GPU", 16, True): (0.47, 0.21, 0.00618, 0.26, 0.087, 0.105, 0.15, 0.03, 0.05),
}
# Tables 2 and 3 of 001: speedups over the one-thread OpenMP solver, standard mesh; label -> {column: speedup}
PAPER_001_SPEEDUPS = {
    "2 threads": {"BTE": 1.96, "iter": 1.88},
    "4 threads": {"BTE": 3.75, "iter": 3.43},
    "8 threads": {"BTE": 7.29, "iter": 5.98},
    "16 threads": {"BTE": 12.0, "iter": 8.4, "iter.eigen": 11.27, "iter.Frechet": 11.39,
                   "iter.solvelinsys": 7.85, "iter.constrlinsys": 1.45},
    "RTX 3090": {"BTE": 57.50, "iter": 93.2, "iter.eigen": 65.80, "iter.Frechet": 145.46,
                 "iter.solvelinsys": 138.89, "iter.constrlinsys": 14.64},
    "V100": {"BTE": 416.40, "iter": 129.6, "iter.eigen": 120.81, "iter.Frechet": 1236.38,
             "iter.solvelinsys": 164.98, "iter.constrlinsys": 17.56},
}
# Table 7 of 001: iter speedup per grid (N_sbn not printed: the papers' 6), same columns as above
PAPER_001_TABLE7_COLUMNS = ("2 threads", "4 threads", "8 threads", "16 threads", "RTX 3090", "V100")
PAPER_001_TABLE7 = {
    "6x33x33x150x24": (1.71, 2.80, 3.76, 4.38, 20.13, 18.79),
    "6x49x49x225x36": (1.85, 3.28, 5.33, 6.63, 52.75, 61.79),
    "6x65x65x300x48": (1.88, 3.42, 5.98, 8.39, 93.23, 129.61),
    "6x97x97x450x72": (2.06, 3.82, 7.06, 11.48, 153.03, 207.50),
    "6x129x129x600x96": (1.90, 3.44, 6.22, 11.68, 154.80, 215.81),
}


def paper_label(name: str) -> str:
    """'paper 001: Tesla V100' for a column of PAPER_001_SPEEDUPS / PAPER_001_TABLE7, else the CPU's."""
    return PAPER_001_GPUS.get(name, f"{PAPER_001_CPU}, {name}")


def paper_table5_000() -> pd.DataFrame:
    """Table 5 of 000 as printed (s per step), rows labelled with the paper's hardware."""
    idx = pd.Index([f"{PAPER_000_HW}: {label}" for label, _, _ in PAPER_000_TABLE5], name="variant")
    return pd.DataFrame(list(PAPER_000_TABLE5.values()), index=idx, columns=list(PAPER_000_TABLE5_COLUMNS))


def with_source(ours: pd.DataFrame, machine: str, papers: pd.DataFrame | None) -> pd.DataFrame:
    """Our table (index = variant) with a 'source' column ('ours (<machine>)'), and the papers'
    rows appended under it (source = 'paper'; their index names the paper's hardware)."""
    out = ours.copy()
    out.insert(0, "source", f"ours ({machine})")
    if papers is None or not len(papers):
        return out
    papers = papers.reindex(columns=ours.columns)
    papers.insert(0, "source", "paper")
    return pd.concat([out, papers])


def paper_speedups_000() -> pd.DataFrame:
    """Fig 15 of 000 from its Table 5: sequential time / time per phase, per printed row."""
    t = paper_table5_000()
    return t.iloc[0] / t


def paper_speedups_001() -> pd.DataFrame:
    """Tables 2-3 of 001 (the speedups of Figs 7-9): rows = thread counts and GPUs."""
    df = pd.DataFrame.from_dict(PAPER_001_SPEEDUPS, orient="index")
    df.index = pd.Index([paper_label(k) for k in df.index], name="variant")
    return df


def paper_table7_001(meshes) -> pd.DataFrame:
    """Table 7 of 001 on the given meshes (rows; NaN where the paper has no such grid)."""
    cols = [paper_label(c) for c in PAPER_001_TABLE7_COLUMNS]
    rows = {m: PAPER_001_TABLE7.get(m, (np.nan,) * len(cols)) for m in meshes}
    return pd.DataFrame.from_dict(rows, orient="index", columns=cols)


# Table 3 of 000: calls per time step of its CUDA kernels, mapped onto our phases (the three RK
# kernels once each; DENS: compute_integrated_pdf_energy and integrated_phitilde, 3 each; the
# OpenMP functions of ITER: '?' in the paper, NaN here)
PAPER_000_TABLE3 = {"BTE/WENO_x": 3, "BTE/WENO_w": 3, "BTE/WENO_phi": 3, "BTE/scat_gain": 3, "BTE/scat_loss": 3,
                    "BTE/RK": 3, "DENS": 6, "ITER/eigen": np.nan, "ITER/Frechet": np.nan, "ITER/solve_linsys": np.nan}


def paper_runs_000() -> pd.DataFrame:
    """Table 5 of 000 as a runs table (our phase names where its columns are one of ours: step,
    BTE, DENS, ITER, ITER/eigen = Schrod., ITER/Frechet = NR kernel, ITER/solve_linsys = lin. sys.),
    for the weights of Figs 11 and 13; variant = the row label with the paper's hardware."""
    t = paper_table5_000()
    runs = pd.DataFrame({"variant": t.index, "backend": "paper", "threads": [k[1] for k in PAPER_000_TABLE5],
                         "step": t["step"].to_numpy(), "BTE": t["BTE"].to_numpy(), "DENS": t["DENS"].to_numpy(),
                         "ITER": t["ITER"].to_numpy(), "ITER/eigen": t["Schrod."].to_numpy(),
                         "ITER/Frechet": t["NR kernel"].to_numpy(), "ITER/solve_linsys": t["lin. sys."].to_numpy()})
    keep = [0, len(runs) - 2, len(runs) - 1]  # the versions of Figs 11-13: sequential, omp (16), omp + cuda
    return runs.iloc[keep].reset_index(drop=True)


def paper_thread_count(label: str) -> int | None:
    """Thread count of a paper row label ('... OMP 8-core', '..., 16 threads'); None for a GPU row."""
    import re

    if "GPU" in label or any(g in label for g in PAPER_001_GPUS.values()):
        return None
    if label.endswith("sequential"):
        return 1
    found = re.findall(r"(\d+)[- ](?:core|threads)", label)  # the last one: '(20 cores), 2 threads' -> 2
    return int(found[-1]) if found else None


# ------------------------------------------------------------------------------ names
def mesh_name(N_sbn, NX, NZ, NW, NPHI) -> str:
    """'6x65x65x300x48' (N_sbn x NX x NZ x NW x NPHI): the mesh part of a run path."""
    return "x".join(str(int(v)) for v in (N_sbn, NX, NZ, NW, NPHI))


def parse_mesh(name: str) -> dict:
    parts = str(name).split("x")
    if len(parts) != 5 or not all(p.isdigit() for p in parts):
        raise ValueError(f"mesh name {name!r}: expected N_sbnxNXxNZxNWxNPHI, e.g. 6x65x65x300x48")
    return dict(zip(MESH_DIMS, map(int, parts)))


def variant_name(backend, threads) -> str:
    """'numpy_t1', 'numba_t8', 'cupy_t1'."""
    return f"{backend}_t{int(threads)}"


def parse_variant(name: str) -> tuple[str, int]:
    backend, _, t = str(name).rpartition("_t")
    if not backend or not t.isdigit():
        raise ValueError(f"variant {name!r}: expected BACKEND_tTHREADS, e.g. numpy_t1")
    return backend, int(t)


def variant_label(name: str) -> str:
    """'numba 8 threads', 'GPU (cupy)'; a paper's row label as it is."""
    if str(name).startswith("paper"):
        return str(name).replace(PAPER_000_HW, "paper 000 (E5-2630, K40c)")
    b, t = parse_variant(name)
    if b == "cupy":
        return "GPU (cupy)"
    if t == 1:
        return f"{b} sequential"
    return f"{b} {t} threads"


def double(mesh: str, dim: str) -> str:
    """The mesh with dimension ``dim`` doubled (NX, NZ: 2 (N - 1) + 1 nodes, so the old nodes stay nodes)."""
    m = parse_mesh(mesh)
    m[dim] = 2 * m[dim] - 1 if dim in ("NX", "NZ") else 2 * m[dim]
    return mesh_name(**m)


# ------------------------------------------------------------------------------ run records
def normalize_phases(times: pd.Series) -> pd.Series:
    """Canonical phase names: the step's sub-phases without the 'step/' prefix ('step/BTE/WENO_x'
    -> 'BTE/WENO_x'); a canonical phase missing at its exact path is the sum of the phases
    nested deeper under the same parent with the same leaf ('ITER/POTENTIAL/eigen' -> 'ITER/eigen');
    old leaf names are renamed (RENAMED_PHASES: 'ITER/solvelinsys' -> 'ITER/solve_linsys')."""
    out = {}
    for k, v in times.items():
        k = str(k)
        if k.startswith("step/"):
            k = k[len("step/"):]
        if k.startswith("startup"):
            continue
        head, _, leaf = k.rpartition("/")
        if leaf in RENAMED_PHASES:
            k = f"{head}/{RENAMED_PHASES[leaf]}" if head else RENAMED_PHASES[leaf]
        out[k] = out.get(k, 0.0) + float(v)
    for c in PHASES:
        if c in out or "/" not in c:
            continue
        parent, leaf = c.split("/", 1)
        deeper = [k for k in out if k.startswith(parent + "/") and k.endswith("/" + leaf) and k.count("/") > 1]
        if deeper:
            out[c] = sum(out[k] for k in deeper)
    return pd.Series(out, dtype=float)


def step_phase_times(run_dir, warmup: int = 1) -> pd.DataFrame | None:
    """Seconds of every phase in every timed step of one run (rows = steps, columns = canonical
    phases; a phase absent from a step took no time in it), leaving out the first ``warmup``
    steps (start-up effects, JIT compilation) when more steps remain; None without timers.csv."""
    csv = Path(run_dir) / "timers.csv"
    if not csv.is_file():
        return None
    t = pd.read_csv(csv)
    if not len(t):
        return None
    steps = np.sort(t["step"].unique())
    keep = steps[warmup:] if len(steps) > warmup else steps
    t = t[t["step"].isin(keep)]
    wide = t.pivot_table(index="step", columns="phase", values="seconds", aggfunc="sum").reindex(keep).fillna(0.0)
    return pd.DataFrame({s: normalize_phases(wide.loc[s]) for s in wide.index}).T.fillna(0.0)


def mean_phase_times(run_dir, warmup: int = 1, stat: str = "median") -> pd.Series:
    """Seconds per time step of every phase of one run: the median (``stat="median"``, the
    default) or mean over the timed steps of timers.csv (:func:`step_phase_times`); without
    timers.csv run.json's mean_per_step_s."""
    per_step = step_phase_times(run_dir, warmup)
    if per_step is not None:
        return per_step.median() if stat == "median" else per_step.mean()
    rec = json.loads((Path(run_dir) / "run.json").read_text())
    return normalize_phases(pd.Series(rec.get("timers", {}).get("mean_per_step_s", {}), dtype=float))


STEP_SPREAD = {"step_min": 0.0, "step_p10": 0.1, "step_p90": 0.9, "step_max": 1.0}


def collect_runs(run_dirs, warmup: int = 1, machine: str | None = None) -> pd.DataFrame:
    """One row per run: machine, variant, backend, threads, mesh and its dimensions, steps,
    timed_steps, wall_s, startup_s, mean_current_A_per_m, then one column per phase (median s per
    timed step, :func:`mean_phase_times`) and the spread of the step time over the timed steps
    (step_min, step_p10, step_p90, step_max)."""
    rows = []
    for d in run_dirs:
        d = Path(d)
        rec = json.loads((d / "run.json").read_text())
        cfg = rec.get("config", {})
        mesh = cfg.get("mesh", {})
        num = cfg.get("numerics", {})
        backend = num.get("backend") or (rec.get("device") or {}).get("backend") or "numpy"
        threads = num.get("threads") or 1
        if backend == "cupy":
            threads = 1
        summ = rec.get("summary", {})
        per_step = step_phase_times(d, warmup)
        row = {
            "machine": machine or rec.get("machine_tag", ""),
            "variant": variant_name(backend, threads), "backend": backend, "threads": int(threads),
            "mesh": mesh_name(*(mesh.get(k, 0) for k in MESH_DIMS)),
            **{k: int(mesh.get(k, 0)) for k in MESH_DIMS},
            "steps": summ.get("steps", rec.get("timers", {}).get("steps")),
            "timed_steps": len(per_step) if per_step is not None else np.nan,
            "wall_s": summ.get("wall_s"), "startup_s": summ.get("startup_s"),
            "mean_current_A_per_m": summ.get("mean_current_A_per_m"),
            "run": str(d),
        }
        for name, q in STEP_SPREAD.items():
            row[name] = float(per_step["step"].quantile(q)) if per_step is not None and "step" in per_step else np.nan
        row.update(mean_phase_times(d, warmup).to_dict())
        rows.append(row)
    df = pd.DataFrame(rows)
    for p in PHASES:
        if p not in df.columns:
            df[p] = np.nan
    return df


def calls_per_step(run_dirs: dict) -> pd.DataFrame:
    """Table 3 of 000: calls per time step of every timed phase (kernels / functions), from the
    timers' call counts in run.json; ``run_dirs[variant]`` = run folder.  Rows = phases (the
    step's sub-phases without 'step/'), columns = variants; NaN where a variant has no such timer
    (WENO_w and WENO_phi of a fused run, :func:`fused_wphi`: they run inside BTE/RK)."""
    cols = {}
    for variant, d in run_dirs.items():
        rec = json.loads((Path(d) / "run.json").read_text())
        t = rec.get("timers", {})
        steps = max(int(t.get("steps") or 0), 1)
        calls = {k: v for k, v in (t.get("calls") or {}).items() if k == "step" or k.startswith("step/")}
        cols[variant] = normalize_phases(pd.Series(calls, dtype=float)) / steps
    out = pd.DataFrame(cols)
    out.index.name = "phase"
    timed = set(out.index) | (set(FUSED_INTO_RK) if "BTE/RK" in out.index else set())
    order = [p for p in PHASES if p in timed] + sorted(p for p in out.index if p not in PHASES)
    return out.reindex(order)


def fused_wphi(runs: pd.DataFrame) -> pd.Series:
    """Per run: True where the fused stage ran (BTE/RK timed, no BTE/WENO_w and BTE/WENO_phi
    timers: their time is inside BTE/RK)."""
    def col(p):
        return runs[p] if p in runs.columns else pd.Series(np.nan, index=runs.index)

    absent = pd.concat([col(p).isna() for p in FUSED_INTO_RK], axis=1).all(axis=1)
    return col("BTE/RK").notna() & absent


def _note(t: pd.DataFrame, runs: pd.DataFrame, parts) -> pd.DataFrame:
    """``t`` (rows = the rows of ``runs``) with a column 'note' (FUSED_NOTE on the fused rows)
    where ``parts`` holds a phase of FUSED_INTO_RK and a run is fused; else ``t`` as it is."""
    fused = fused_wphi(runs).to_numpy()
    if fused.any() and set(parts) & set(FUSED_INTO_RK):
        t = t.assign(note=np.where(fused, FUSED_NOTE, ""))
    return t


def _combine(runs: pd.DataFrame, columns: dict) -> pd.DataFrame:
    """Each column of ``columns`` as the sum of its phases; NaN where none was timed, and on the
    fused runs (:func:`fused_wphi`) for a column with a phase of FUSED_INTO_RK (its time is in RK)."""
    out = pd.DataFrame(index=runs.index)
    fused = fused_wphi(runs)
    for name, parts in columns.items():
        present = [p for p in parts if p in runs.columns]
        out[name] = runs[present].sum(axis=1, min_count=1) if present else np.nan
        if set(parts) & set(FUSED_INTO_RK):
            out.loc[fused, name] = np.nan
    return out


def _parts(columns: dict):
    return [p for parts in columns.values() for p in parts]


def phase_table(runs: pd.DataFrame, columns: dict = TABLE5_000, by=("variant",)) -> pd.DataFrame:
    """Mean seconds per step of the papers' phases, one row per ``by`` key (variants ordered as
    sequential, threads ascending, GPU last); a column 'note' marks the fused runs where a column
    sums WENO_w or WENO_phi (:func:`_combine`)."""
    runs = _ordered(runs)
    t = _note(_combine(runs, columns), runs, _parts(columns))
    t.index = pd.MultiIndex.from_frame(runs[list(by)]) if len(by) > 1 else pd.Index(runs[by[0]], name=by[0])
    return t


def _ordered(runs: pd.DataFrame) -> pd.DataFrame:
    rank = runs["backend"].map({"numpy": 0, "numba": 1, "cupy": 2, "paper": 4}).fillna(3)
    return runs.assign(_r=rank).sort_values(["_r", "threads"]).drop(columns="_r")


def weights(runs: pd.DataFrame, parent: str, children, by: str = "variant") -> pd.DataFrame:
    """Absolute (s per step) and relative (share of ``parent``) weight of ``children`` per run:
    columns '<child>' and '<child> [%]' plus 'other' (parent minus the children, the untimed part);
    a child without a timer is NaN, and a column 'note' marks the fused runs (their WENO_w and
    WENO_phi are inside BTE/RK) where the children include those."""
    runs = _ordered(runs)
    out = pd.DataFrame(index=pd.Index(runs[by], name=by))
    par = runs[parent].to_numpy(float)
    acc = np.zeros(len(runs))
    for c in children:
        v = runs[c].to_numpy(float) if c in runs else np.full(len(runs), np.nan)
        out[c] = v
        acc += np.nan_to_num(v)
    out["other"] = par - acc
    for c in list(children) + ["other"]:
        out[f"{c} [%]"] = 100.0 * out[c].to_numpy(float) / par
    return _note(out, runs, children)


SECTIONS_NOTE = "ITER sections from the sections runs (numerics.iter_graph=false)"
# the columns of Table 5 of 000 that sum ITER sections
TABLE5_SECTION_COLUMNS = tuple(k for k, parts in TABLE5_000.items() if set(parts) <= set(ITER_STEPS))


def with_sections(runs: pd.DataFrame, sections: pd.DataFrame | None) -> pd.DataFrame:
    """The runs whose ITER sections are to be read: every run of ``runs`` (the timing runs), a
    variant with a run in ``sections`` (bsp.sections: the timing mesh with numerics.iter_graph=false)
    replaced by that run as a whole (its ITER is the ungraphed one, so its sections add up to it); a
    column 'sections' says which ('sections' or 'timing').  The graphed Newton iteration (iter_graph
    auto: cupy, numba) times ITER only, so a timing run's sections are missing or cover only the
    steps that left the graph."""
    out = runs.assign(sections="timing")
    if sections is None or not len(sections):
        return out
    sec = sections[sections["variant"].isin(runs["variant"])].assign(sections="sections")
    keep = out[~out["variant"].isin(sec["variant"])]
    return pd.concat([keep, sec.reindex(columns=out.columns)], ignore_index=True)


def section_columns(table: pd.DataFrame, sectioned: pd.DataFrame, runs: pd.DataFrame,
                    columns=TABLE5_SECTION_COLUMNS) -> pd.DataFrame:
    """``table`` (a phase table of the timing runs, index = variant) with ``columns`` taken from
    ``sectioned`` (the same table of :func:`with_sections`' runs), and SECTIONS_NOTE added to the
    note of the rows whose sections came from a sections run."""
    out = table.copy()
    for c in columns:
        if c in sectioned:
            out[c] = sectioned[c].reindex(out.index)
    src = runs.drop_duplicates("variant").set_index("variant")["sections"].reindex(out.index)
    if (src == "sections").any():
        note = out["note"] if "note" in out else pd.Series("", index=out.index)
        add = np.where(src == "sections", SECTIONS_NOTE, "")
        out["note"] = ["; ".join(x for x in (a, b) if x) for a, b in zip(note.fillna(""), add)]
    return out


def sectioned_tables(runs: pd.DataFrame, sections: pd.DataFrame | None):
    """(sec, t5, t3): :func:`with_sections`' runs, Table 5 of 000 and Table 3 of 001 of the timing
    runs with their ITER section columns from ``sec`` (:func:`section_columns`).  One source for the
    tables (rule bsp_phase_tables) and the figures drawn from them (rule bsp_phase_figures)."""
    sec = with_sections(runs, sections)
    t5 = section_columns(phase_table(runs, TABLE5_000), phase_table(sec, TABLE5_000), sec)
    t3 = section_columns(phase_table(runs, TABLE3_001), phase_table(sec, TABLE3_001), sec, TABLE3_001)
    return sec, t5, t3


def read_sections(paths) -> pd.DataFrame | None:
    """The sections runs' tables (bsp_collect CSVs) as one frame; None without any."""
    frames = [pd.read_csv(p) for p in paths]
    return pd.concat(frames, ignore_index=True) if frames else None


def speedups(table: pd.DataFrame, baseline: str) -> pd.DataFrame:
    """Speedup of every row of a phase table (index = variant) relative to row ``baseline``:
    t_baseline / t, per column (a 'note' column is carried over as it is)."""
    if baseline not in table.index:
        raise KeyError(f"baseline {baseline!r} not among {list(table.index)}")
    times = table.drop(columns="note", errors="ignore")
    sp = times.loc[baseline] / times
    return sp.assign(note=table["note"]) if "note" in table else sp


def mesh_scaling(runs: pd.DataFrame, reference: str, columns: dict = TABLE5_000, variant: str | None = None) -> pd.DataFrame:
    """Fig 14 of 000: per-phase time of the reference mesh and of each mesh with one dimension
    doubled, for one variant.  Rows: 'reference', then 'N_sbn x2', 'NX x2', ...; columns: the
    phases (s per step) and '<phase> ratio' (time / reference time)."""
    sel = runs if variant is None else runs[runs["variant"] == variant]
    by_mesh = {m: g.iloc[0] for m, g in sel.groupby("mesh")}
    if reference not in by_mesh:
        raise KeyError(f"reference mesh {reference!r} not among the runs ({sorted(by_mesh)})")
    rows, names = [], []
    for name, mesh in [("reference", reference)] + [(f"{d} x2", double(reference, d)) for d in MESH_DIMS]:
        if mesh in by_mesh:
            rows.append(by_mesh[mesh])
            names.append(name)
    df = pd.DataFrame(rows)
    t = _combine(df, columns)
    t.index = pd.Index(names, name="mesh change")
    t.insert(0, "mesh", df["mesh"].to_numpy())
    ref = t.loc["reference"]
    for c in columns:
        t[f"{c} ratio"] = t[c] / ref[c]
    return _note(t, df, _parts(columns))


def grid_speedups(runs: pd.DataFrame, baseline: str, phase: str = "ITER", meshes=None) -> pd.DataFrame:
    """Table 7 of 001 (and Figs 10-13 with the doubled meshes): speedup of ``phase`` of every
    variant relative to ``baseline`` on the same mesh; rows = meshes (in the given order), columns
    = variants."""
    p = runs.pivot_table(index="mesh", columns="variant", values=phase, aggfunc="mean")
    if baseline not in p.columns:
        raise KeyError(f"baseline {baseline!r} not among the variants {list(p.columns)}")
    sp = p.rdiv(p[baseline], axis=0)
    order = [c for c in _ordered(runs.drop_duplicates("variant"))["variant"] if c in sp.columns]
    sp = sp[order]
    if meshes is not None:
        sp = sp.reindex([m for m in meshes if m in sp.index])
    return sp


def compare_machines(runs_by_machine: dict, columns: dict = TABLE5_000) -> pd.DataFrame:
    """Cross-machine table: ``runs_by_machine[machine]`` is a machine's tidy timing table
    (:func:`collect_runs`); rows (mesh, variant, phase) with the papers' phases, one column per
    machine (mean s per step; empty where a machine has no such run, and for FD-WENO-5 of a fused
    run, :func:`_combine`)."""
    cols = {}
    for machine, runs in sorted(runs_by_machine.items()):
        runs = _ordered(runs)
        t = _combine(runs, columns)
        t.index = pd.MultiIndex.from_arrays([runs["mesh"].astype(str), runs["variant"]], names=["mesh", "variant"])
        cols[machine] = t.stack(future_stack=True)
    out = pd.DataFrame(cols)
    out.index.names = ["mesh", "variant", "phase"]
    return out


# ------------------------------------------------------------------------------ convergence
def observed_order(h, e) -> np.ndarray:
    """Observed order between consecutive meshes: log(e_k / e_{k+1}) / log(h_k / h_{k+1})
    (NaN for the first mesh and wherever an error is 0)."""
    h = np.asarray(h, float)
    e = np.asarray(e, float)
    p = np.full(len(e), np.nan)
    with np.errstate(divide="ignore", invalid="ignore"):
        p[1:] = np.log(e[:-1] / e[1:]) / np.log(h[:-1] / h[1:])
    p[~np.isfinite(p)] = np.nan
    return p


def profile_error(x, u, x_ref, u_ref) -> tuple[float, float]:
    """Relative errors of a profile u(x) against a finer u_ref(x_ref) interpolated (linearly) onto
    x: (max-norm, L2-norm by trapezoids), each divided by the same norm of the reference."""
    x, u, x_ref, u_ref = (np.asarray(a, float) for a in (x, u, x_ref, u_ref))
    r = np.interp(x, x_ref, u_ref)
    d = u - r
    einf = np.abs(d).max() / max(np.abs(r).max(), 1e-300)
    l2 = math.sqrt(np.trapezoid(d**2, x)) / max(math.sqrt(np.trapezoid(r**2, x)), 1e-300)
    return float(einf), float(l2)


CONVERGENCE_QUANTITIES = {"Ns": "Ns_total_m-2", "j": "j_total_A_per_m"}


def convergence(profiles: dict, reference: str, quantities: dict = CONVERGENCE_QUANTITIES) -> pd.DataFrame:
    """Fig 6 of 001: ``profiles[mesh]`` = profiles DataFrame (x_m and the quantities) of each mesh;
    ``reference`` the finest mesh.  One row per coarser mesh (ordered by NX): h = 1/(NX-1), the
    relative max- and L2-errors of each quantity against the reference, and the observed order
    between consecutive meshes (every dimension is refined together, so h stands for all)."""
    ref = profiles[reference]
    meshes = sorted((m for m in profiles if m != reference), key=lambda m: parse_mesh(m)["NX"])
    rows = []
    for m in meshes:
        p = profiles[m]
        row = {"mesh": m, **parse_mesh(m), "h": 1.0 / (parse_mesh(m)["NX"] - 1)}
        for q, col in quantities.items():
            einf, el2 = profile_error(p["x_m"], p[col], ref["x_m"], ref[col])
            row[f"{q}_err_max"] = einf
            row[f"{q}_err_L2"] = el2
        rows.append(row)
    df = pd.DataFrame(rows)
    for q in quantities:
        for n in ("max", "L2"):
            df[f"{q}_order_{n}"] = observed_order(df["h"], df[f"{q}_err_{n}"]) if len(df) else []
    return df


# ------------------------------------------------------------------------------ Sturm count
def sturm_curve(diag, off, sturm_count, n_xi: int = 400, n_eig: int | None = None, margin: float = 0.05):
    """Fig 4 of 001: sigma(xi) = number of eigenvalues below xi of the symmetric tridiagonal matrix
    (diag, off), sampled on ``n_xi`` points spanning the lowest ``n_eig`` eigenvalues, with the
    eigenvalues from a dense-quality tridiagonal solver (scipy) for the jumps.  ``sturm_count`` is
    the solver's function sturm_count(diag, off, xi).  Returns (xi, sigma, eigenvalues)."""
    from scipy.linalg import eigvalsh_tridiagonal

    diag = np.asarray(diag, float)
    off = np.asarray(off, float)
    n_eig = n_eig or len(diag)
    ev = eigvalsh_tridiagonal(diag, off, select="i", select_range=(0, n_eig - 1))
    lo, hi = ev[0], ev[-1]
    span = hi - lo if hi > lo else max(abs(hi), 1.0)
    xi = np.linspace(lo - margin * span, hi + margin * span, n_xi)
    sigma = np.array([int(sturm_count(diag, off, v)) for v in xi])
    return xi, sigma, ev


# ------------------------------------------------------------------------------ figures
def _plt():
    import matplotlib
    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt
    return plt


def plot_weights(w: pd.DataFrame, children, title: str):
    """Stacked bars of absolute (s per step) and relative (%) weights (Figs 11-13 of 000)."""
    plt = _plt()
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(10, 3.8))
    notes = w["note"] if "note" in w else pd.Series("", index=w.index)
    labels = [variant_label(v) + ("\n(RK incl. WENO_w, WENO_phi)" if n == FUSED_NOTE else "") for v, n in zip(w.index, notes)]
    xs = np.arange(len(w))
    bottom_a = np.zeros(len(w))
    bottom_r = np.zeros(len(w))
    for c in list(children) + ["other"]:
        va = np.nan_to_num(w[c].to_numpy(float)).clip(min=0)
        vr = np.nan_to_num(w[f"{c} [%]"].to_numpy(float)).clip(min=0)
        lab = c.split("/")[-1]
        a1.bar(xs, va, bottom=bottom_a, label=lab)
        a2.bar(xs, vr, bottom=bottom_r, label=lab)
        bottom_a += va
        bottom_r += vr
    for a in (a1, a2):
        a.set_xticks(xs, labels, rotation=30, ha="right", fontsize=8)
    a1.set_ylabel("s per time step")
    a2.set_ylabel("% of the phase")
    a1.set_yscale("log" if bottom_a.max() > 50 * max(bottom_a.min(), 1e-300) else "linear")
    a2.legend(fontsize=7, bbox_to_anchor=(1.01, 1), loc="upper left")
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    return fig


def plot_speedups(sp: pd.DataFrame, title: str, paper: pd.DataFrame | None = None):
    """Speedup of every phase vs the thread count (CPU variants as lines per backend, GPU variants
    as horizontal marks): Fig 15 of 000, Figs 7-9 of 001.  ``paper``: the papers' speedups (rows
    labelled with their hardware, :func:`paper_speedups_000` / :func:`paper_speedups_001`), drawn
    as grey crosses (CPU threads) and dotted lines (GPUs) beside ours."""
    plt = _plt()
    cols = [c for c in sp.columns if c != "note"]
    n = len(cols)
    ncol = min(n, 3)
    nrow = math.ceil(n / ncol)
    fig, axes = plt.subplots(nrow, ncol, figsize=(4 * ncol, 3 * nrow), squeeze=False)
    parsed = [parse_variant(v) for v in sp.index]
    maxt = max([t for b, t in parsed if b != "cupy"] + [1])
    for ax, c in zip(axes.flat, cols):
        for b in sorted({b for b, _ in parsed if b != "cupy"}):
            idx = [i for i, (bb, _) in enumerate(parsed) if bb == b]
            ts = [parsed[i][1] for i in idx]
            ax.plot(ts, sp[c].iloc[idx].to_numpy(float), "o-", label=b)
        for i, (b, _) in enumerate(parsed):
            if b == "cupy":
                ax.axhline(float(sp[c].iloc[i]), color="C3", ls="--", label="GPU (ours)")
        if paper is not None and c in paper.columns:
            col = paper[c].dropna()
            cpu = [(paper_thread_count(k), v) for k, v in col.items() if paper_thread_count(k) is not None]
            if cpu:
                hw = col.index[0].split(":")[0] + ": " + col.index[0].split(":")[1].split(",")[0].strip()
                ax.plot(*zip(*cpu), "x:", color="0.45", label=f"{hw} (CPU)")
            for k, (lab, v) in enumerate((k, v) for k, v in col.items() if paper_thread_count(k) is None):
                ax.axhline(float(v), color=f"C{4 + k}", ls=":", label=lab.replace("paper ", "").split(": ", 1)[-1]
                           if "001" in lab else "paper 000: 16 cores + Tesla K40c")
        ax.plot([1, maxt], [1, maxt], color="0.7", lw=0.8, label="ideal")
        ax.set_title(c, fontsize=9)
        ax.set_xlabel("threads")
        ax.set_ylabel("speedup")
        if paper is not None:
            ax.set_yscale("log")
    for ax in list(axes.flat)[n:]:
        ax.axis("off")
    axes.flat[0].legend(fontsize=6)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    return fig


def plot_mesh_scaling(t: pd.DataFrame, columns, title: str):
    """Fig 14 of 000: time per phase for the reference mesh and each dimension doubled."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(9, 3.8))
    xs = np.arange(len(t))
    width = 0.8 / max(len(columns), 1)
    for k, c in enumerate(columns):
        ax.bar(xs + (k - (len(columns) - 1) / 2) * width, t[c].to_numpy(float), width, label=c)
    ax.set_xticks(xs, [f"{i}\n{m}" for i, m in zip(t.index, t["mesh"])], fontsize=7)
    ax.set_ylabel("s per time step")
    ax.set_yscale("log")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    ax.set_title(title, fontsize=10)
    fig.tight_layout()
    return fig


def plot_grid_speedups(sp: pd.DataFrame, title: str, paper: pd.DataFrame | None = None):
    """Table 7 / Figs 10-13 of 001: speedup of the iter phase per mesh (groups) and variant (bars);
    ``paper`` (:func:`paper_table7_001`, rows = the same meshes): the paper's columns as hatched bars."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(10, 4.2))
    series = [(variant_label(c), sp[c].to_numpy(float), None) for c in sp.columns]
    if paper is not None:
        paper = paper.reindex(sp.index)
        series += [(c, paper[c].to_numpy(float), "//") for c in paper.columns if paper[c].notna().any()]
    xs = np.arange(len(sp))
    width = 0.85 / max(len(series), 1)
    for k, (label, v, hatch) in enumerate(series):
        ax.bar(xs + (k - (len(series) - 1) / 2) * width, v, width, label=label, hatch=hatch,
               edgecolor="0.3" if hatch else None, alpha=0.6 if hatch else 1.0)
    ax.set_xticks(xs, list(sp.index), fontsize=7)
    ax.set_xlabel("mesh N_sbn x NX x NZ x NW x NPHI")
    ax.set_ylabel("speedup vs sequential")
    ax.set_yscale("log")
    ax.legend(fontsize=6, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    ax.set_title(title, fontsize=10)
    fig.tight_layout()
    return fig


def plot_convergence(profiles: dict, reference: str, table: pd.DataFrame, t_ps=None):
    """Fig 6 of 001: N_s(x) and j(x) on every mesh and the reference, and their errors vs h."""
    plt = _plt()
    fig, axes = plt.subplots(1, 3, figsize=(13, 3.8))
    order = sorted(profiles, key=lambda m: parse_mesh(m)["NX"])
    for m in order:
        p = profiles[m]
        ref = m == reference
        kw = dict(color="k", lw=2, label=f"{m} (reference)") if ref else dict(lw=1, label=m)
        axes[0].plot(p["x_m"] * 1e9, p[CONVERGENCE_QUANTITIES["Ns"]], **kw)
        axes[1].plot(p["x_m"] * 1e9, p[CONVERGENCE_QUANTITIES["j"]], **kw)
    axes[0].set_ylabel(r"$N_s(x)$ [m$^{-2}$]")
    axes[0].set_yscale("log")
    axes[1].set_ylabel(r"$j(x)$ [A/m]")
    for a in axes[:2]:
        a.set_xlabel("x [nm]")
    axes[0].legend(fontsize=6)
    if len(table):
        for q, mk in (("Ns", "o"), ("j", "s")):
            axes[2].loglog(table["h"], table[f"{q}_err_L2"], mk + "-", label=f"{q} (L2)")
            axes[2].loglog(table["h"], table[f"{q}_err_max"], mk + "--", label=f"{q} (max)")
        axes[2].legend(fontsize=7)
    axes[2].set_xlabel("h = 1/(NX-1)")
    axes[2].set_ylabel("relative error vs reference")
    fig.suptitle("Convergence towards the finest mesh" + (f" at t = {t_ps} ps" if t_ps is not None else ""), fontsize=10)
    fig.tight_layout()
    return fig


def plot_sturm(xi, sigma, ev, unit: str = "", title: str = ""):
    """Fig 4 of 001: the step function sigma(xi) with the eigenvalues at its jumps."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(7, 3.8))
    ax.step(xi, sigma, where="post", color="C0", label=r"Sturm count $\sigma(\xi)$")
    ax.plot(ev, np.arange(1, len(ev) + 1) - 0.5, "x", color="C3", label="eigenvalues")
    for e in ev:
        ax.axvline(e, color="C3", lw=0.5, alpha=0.5)
    ax.set_xlabel(r"$\xi$" + (f" [{unit}]" if unit else ""))
    ax.set_ylabel("number of eigenvalues below xi")
    ax.legend(fontsize=8, loc="upper left")
    ax.set_title(title, fontsize=9)
    fig.tight_layout()
    return fig


# ------------------------------------------------------------------------------ Newton matrix (Fig 6 of 000)
def fields_state(model, path):
    """Dimensionless (V, eps, chi, rho) of a fields.h5 written by the solver (physical units there)."""
    import h5py

    s = model.scales
    with h5py.File(path, "r") as f:
        V = f["V"][...] / s.V
        eps = f["eps"][...] / s.energy_eV
        chi = f["chi"][...] * math.sqrt(s.Z)
        rho = f["rho"][...] / s.rho
    return V, eps, chi, rho


def newton_matrix(model, eps, chi, rho, x_bc: str = "dirichlet"):
    """The row-equilibrated Newton matrix L^(k) of the POTENTIAL iteration (papers 000 §2.5, 001 §2)
    at the given eigenpairs and densities, assembled by the solver's own poisson.NewtonSystem and
    poisson.frechet (scipy.sparse CSC, unknown k = i NZ + j)."""
    from solver.backend import get_backend
    from solver.bsp import poisson

    be = get_backend("numpy")
    F = poisson.frechet(model, be, np.asarray(eps), np.asarray(chi), np.asarray(rho))
    A, _ = poisson.NewtonSystem(model, x_bc).matrix(np.asarray(F))
    return A


def plot_spy(A, NZ: int, block: int | None = None, title: str = ""):
    """Fig 6 of 000: sparsity pattern of the Newton matrix and a zoom on the rows of one x column
    (five Laplacian diagonals, the dense NZ x NZ block of the integral term, boundary rows)."""
    plt = _plt()
    n = A.shape[0]
    NX = n // NZ
    block = NX // 2 if block is None else block
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(10, 4.8))
    ms = max(0.05, min(2.0, 300.0 / n))
    a1.spy(A, markersize=ms, color="k")
    a1.set_title(f"L: {n} x {n}, {A.nnz} nonzeros", fontsize=9)
    lo, hi = (block - 1) * NZ, (block + 2) * NZ
    sub = A[block * NZ:(block + 1) * NZ, lo:hi]
    a2.spy(sub, markersize=max(1.0, 120.0 / NZ), color="k")
    a2.set_title(f"rows of column i = {block} (z nodes), columns i-1..i+1", fontsize=9)
    for k in (1, 2):
        a2.axvline(k * NZ - 0.5, color="C3", lw=0.6)
    a1.add_patch(plt.Rectangle((lo, block * NZ), hi - lo, NZ, fill=False, color="C3", lw=0.8))
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    return fig
