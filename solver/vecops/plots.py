"""Figures 9-14, the roofline and Table 1 (markdown) from the tidy CSVs of one machine.

Each figure plots the median time of every implementation found in its CSVs (GPU and/or CPU);
the per-launch GPU kernel times sit on a floor at small sizes (launch latency, a few
microseconds), drawn as the dotted ``host`` line (launch + synchronise, as an application sees it)
and annotated with the smallest kernel time.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

STYLE = {
    "axpy": ("C0", "o", "axpy kernel (GPU)"),
    "cublas_axpy": ("C1", "s", "cuBLAS axpy (GPU)"),
    "copy": ("C7", "^", "copy kernel (GPU)"),
    "memcpy": ("C8", "v", "cudaMemcpy D2D (GPU)"),
    "dot0": ("C0", "o", "dot0: local memory (GPU)"),
    "dot1": ("C3", "D", "dot1 + red: global only (GPU)"),
    "cublas_dot": ("C1", "s", "cuBLAS dot (GPU)"),
    "spmv0": ("C0", "o", "spmv0: vector, work-group per row (GPU)"),
    "spmv1": ("C3", "D", "spmv1: scalar, thread per row (GPU)"),
    "cusparse": ("C1", "s", "cuSPARSE (GPU)"),
    "numpy": ("C2", "x", "NumPy (CPU)"),
    "scipy": ("C2", "x", "SciPy CSR (CPU, 1 thread)"),
    "numba": ("C4", "+", "numba all cores (CPU)"),
}


def _label(impl, df):
    c, m, lab = STYLE.get(impl, (None, "o", impl))
    if impl == "numba" and "threads" in df and df.threads.notna().any():
        lab = f"numba, {int(df.threads.dropna().iloc[0])} threads (CPU)"
    return c, m, lab


def read_csvs(paths) -> pd.DataFrame:
    frames = [pd.read_csv(p) for p in paths if Path(p).is_file() and Path(p).stat().st_size > 0]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def _title(ax, text, df, pad=None):
    devs = sorted(set(df.device.dropna()))
    ax.set_title(text + ("\n" + " | ".join(devs) if devs else ""), fontsize=9, pad=pad)


def _save(fig, path):
    from solver.io import save_figure

    save_figure(fig, path)
    import matplotlib.pyplot as plt

    plt.close(fig)


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_vs_size(df, out, title, impls, xcol="n", xlabel="vector length (elements)", ceiling=None,
                 launch_impl=None):
    """Time (top) and effective bandwidth (bottom) against size, log-log."""
    plt = _plt()
    fig, (ax, bx) = plt.subplots(2, 1, figsize=(7, 8), sharex=True)
    for impl in impls:
        d = df[df.impl == impl].sort_values(xcol)
        if d.empty:
            continue
        c, m, lab = _label(impl, d)
        ax.loglog(d[xcol], d.median_s, marker=m, color=c, label=lab)
        bx.semilogx(d[xcol], d.gbytes_s, marker=m, color=c, label=lab)
    if launch_impl is not None:
        d = df[df.impl == launch_impl].sort_values(xcol)
        if not d.empty and d.host_median_s.notna().any():
            ax.loglog(d[xcol], d.host_median_s, ls=":", color="k",
                      label=f"{launch_impl}: launch + synchronise (host-visible)")
            floor = d.median_s.min()
            ax.axhline(floor, color="0.5", lw=0.8, ls="--")
            ax.annotate(f"launch-latency floor: {floor * 1e6:.1f} us per kernel", (d[xcol].min(), floor),
                        textcoords="offset points", xytext=(0, 6), fontsize=8, color="0.3")
    if ceiling is not None and np.isfinite(ceiling):
        bx.axhline(ceiling, color="k", ls="--", lw=1)
        bx.annotate(f"measured copy bandwidth {ceiling:.0f} GB/s", (df[xcol].min(), ceiling),
                    textcoords="offset points", xytext=(0, 4), fontsize=8)
    ax.set_ylabel("time per call, median (s)")
    bx.set_ylabel("effective bandwidth (GB/s, compulsory bytes)")
    bx.set_xlabel(xlabel)
    ax.grid(True, which="both", alpha=0.3)
    bx.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7)
    _title(ax, title, df)
    _save(fig, out)


def plot_vs_block(df, out, title, impls, refs=(), xlabel="work-group size (threads per block)"):
    """Time against work-group size; implementations without a block drawn as horizontal lines."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for impl in impls:
        d = df[(df.impl == impl) & df.block.notna()].sort_values("block")
        if d.empty:
            continue
        c, m, lab = _label(impl, d)
        ax.plot(d.block, d.median_s, marker=m, color=c, label=lab)
        best = d.loc[d.median_s.idxmin()]
        ax.annotate(f"min {best.median_s * 1e6:.1f} us @ {int(best.block)}", (best.block, best.median_s),
                    textcoords="offset points", xytext=(0, -12), fontsize=7, color=c)
    for j, impl in enumerate(refs):
        d = df[df.impl == impl]
        if d.empty:
            continue
        c, m, lab = _label(impl, d)
        ax.axhline(float(d.median_s.min()), color=c, ls="--", lw=1, label=lab)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel("time per call, median (s)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7)
    _title(ax, title, df)
    _save(fig, out)


def plot_fig14(df, cross, out, title):
    plt = _plt()
    ncol = 2 if (cross is not None and not cross.empty) else 1
    fig, axes = plt.subplots(1, ncol, figsize=(6.5 * ncol, 4.8), squeeze=False)
    ax = axes[0, 0]
    for impl in ("spmv1", "spmv0", "cusparse", "scipy", "numba"):
        d = df[df.impl == impl].sort_values("nnz")
        if d.empty:
            continue
        c, m, lab = _label(impl, d)
        if impl == "spmv0" and d.block.notna().any():
            lab += f", block {int(d.block.iloc[0])}"
        ax.loglog(d.nnz, d.median_s, marker=m, color=c, label=lab)
    ms = df.dropna(subset=["matrix"]).drop_duplicates("matrix").sort_values("nnz")
    if not ms.empty:  # matrix names on a top axis, clear of the data
        top = ax.secondary_xaxis("top")
        top.set_xticks(list(ms.nnz), [f"{r.matrix}\n{int(r.nnz_per_row)}/row" for _, r in ms.iterrows()])
        top.minorticks_off()
        top.tick_params(labelsize=6, labelcolor="0.4")
    ax.set_xlabel("nonzeros (Table 2 matrices)")
    ax.set_ylabel("time per call, median (s)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7)
    _title(ax, title, df, pad=22 if not ms.empty else None)
    if ncol == 2:
        bx = axes[0, 1]
        for impl in ("spmv1", "spmv0", "cusparse"):
            d = cross[cross.impl == impl].sort_values("nnz_per_row")
            if d.empty:
                continue
            c, m, lab = _label(impl, d)
            bx.loglog(d.nnz_per_row, d.median_s, marker=m, color=c, label=lab)
        s1 = cross[cross.impl == "spmv1"].set_index("nnz_per_row").median_s
        s0 = cross[cross.impl == "spmv0"].set_index("nnz_per_row").median_s
        both = pd.concat([s1, s0], axis=1, keys=["scalar", "vector"]).dropna().sort_index()
        faster = both.vector < both.scalar
        if faster.any() and (~faster).any():
            k_cross = both.index[faster.values.argmax()]
            bx.axvline(k_cross, color="k", ls="--", lw=1)
            bx.annotate(f"vector faster from {k_cross}/row", (k_cross, both.values.max()), fontsize=8,
                        textcoords="offset points", xytext=(4, -4), va="top")
        nnz = int(cross.nnz.iloc[0])
        bx.set_xlabel(f"nonzeros per row (total {nnz:,} nonzeros, rows = nnz / row length)")
        bx.set_ylabel("time per call, median (s)")
        bx.grid(True, which="both", alpha=0.3)
        bx.legend(fontsize=7)
        _title(bx, "scalar vs vector CSR kernel crossover", cross, pad=22 if not ms.empty else None)
    _save(fig, out)


ROOF_IMPLS = {"fig09": ["axpy", "cublas_axpy", "numpy", "numba"], "fig12": ["dot0", "dot1", "cublas_dot", "numpy", "numba"],
              "fig14": ["spmv0", "spmv1", "cusparse", "scipy", "numba"], "fig13": ["spmv0", "spmv1", "cusparse"]}


def plot_roofline(frames: dict, ceilings: pd.DataFrame, out, precision="float32"):
    """Achieved GFLOP/s against arithmetic intensity, under each device's measured ceilings.

    All the points sit at 1/6 (AXPY) or about 1/4 flop/byte (DOT, SpMV), so they are told apart by
    a numbered legend (with GB/s and the share of the device's copy ceiling) rather than by text
    next to each point; GPU points filled, CPU points hollow.
    """
    plt = _plt()
    fig, ax = plt.subplots(figsize=(12, 6))
    ai = np.logspace(-2, 2, 200)
    colors = {"gpu": "C0", "cpu": "C2"}
    roof_bw = {}
    roof_handles = []
    for kind, cdf in ceilings.groupby("device_kind"):
        bw = cdf[cdf.quantity == "copy_bandwidth"].value
        if bw.empty:
            continue
        bw = float(bw.iloc[0])
        roof_bw[kind] = bw
        peak = cdf[cdf.quantity.str.startswith("fma_peak")].value
        roof = bw * ai if peak.empty else np.minimum(bw * ai, float(peak.iloc[0]))
        lab = f"{kind.upper()} roof: copy {bw:.0f} GB/s" + ("" if peak.empty else f", FMA {float(peak.iloc[0]):.0f} GFLOP/s")
        h, = ax.loglog(ai, roof, color=colors.get(kind, "k"), lw=1.5, label=lab)
        roof_handles.append(h)
    markers = {"fig09": "o", "fig12": "s", "fig13": "^", "fig14": "D"}
    what = {"fig09": "AXPY", "fig12": "DOT", "fig13": "SpMV", "fig14": "SpMV"}
    points = []
    for fig_key, df in frames.items():
        if df is None or df.empty:
            continue
        for impl in ROOF_IMPLS.get(fig_key, []):
            d = df[(df.impl == impl) & (df.flops > 0)]
            if d.empty:
                continue
            best = d.loc[d.bytes.idxmax()] if fig_key != "fig13" else d.loc[d.median_s.idxmin()]
            if fig_key == "fig13":
                size = f"{int(best.rows)} rows x {int(best.nnz_per_row)}" + (
                    f", block {int(best.block)}" if pd.notna(best.block) else "")
            else:
                size = best.matrix if isinstance(best.matrix, str) else f"n={int(best.n):.0e}"
            points.append((fig_key, impl, size, best))
    # GPU first, then by achieved rate (descending), so the legend reads top-down like the plot
    points.sort(key=lambda t: (t[3].device_kind != "gpu", -t[3].gflops))
    cmap = plt.get_cmap("tab20")
    pt_handles = []
    for i, (fig_key, impl, size, best) in enumerate(points):
        x = best.flops / best.bytes
        kind = best.device_kind
        c = cmap(i % 20)
        share = ""
        if kind in roof_bw:
            share = f", {100 * best.gbytes_s / roof_bw[kind]:.0f} % of copy"
        lab = (f"{i + 1:2d} {kind.upper()} {impl} ({what.get(fig_key, fig_key)} {size}): "
               f"{best.gflops:.1f} GFLOP/s, {best.gbytes_s:.0f} GB/s{share}")
        h, = ax.loglog([x], [best.gflops], marker=markers.get(fig_key, "o"), color=c, ls="none", ms=7,
                       mfc=c if kind == "gpu" else "none", mew=1.5, label=lab)
        pt_handles.append(h)
    ax.set_xlabel("arithmetic intensity (flop / compulsory byte)")
    ax.set_ylabel(f"achieved GFLOP/s ({precision}, median time)")
    ax.grid(True, which="both", alpha=0.3)
    leg1 = ax.legend(handles=roof_handles, fontsize=8, loc="upper left")
    ax.add_artist(leg1)
    if pt_handles:
        ax.legend(handles=pt_handles, fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0,
                  title="largest size of each kernel (o AXPY, s DOT, ^ Fig 13, D Table 2)", title_fontsize=7)
    ax.set_title("Roofline: achieved rate against the measured ceilings (filled GPU, hollow CPU)", fontsize=9)
    fig.tight_layout()
    _save(fig, out)


def table1_markdown(t1: pd.DataFrame, ceilings: pd.DataFrame | None) -> str:
    lines = ["# Table 1: specifications of the devices used (queried from the hardware)", ""]
    for (kind, dev), d in t1.groupby(["device_kind", "device"], sort=False):
        lines += [f"## {kind.upper()}: {dev}", "", "| item | value | unit | source |", "|---|---|---|---|"]
        for _, r in d.iterrows():
            v = "" if pd.isna(r.value) else r.value
            lines.append(f"| {r['item']} | {v} | {'' if pd.isna(r.unit) else r.unit} | {'' if pd.isna(r.source) else r.source} |")
        if ceilings is not None and not ceilings.empty:
            c = ceilings[ceilings.device_kind == kind]
            for _, r in c.iterrows():
                lines.append(f"| measured {r.quantity} | {r.value:.1f} | {r.unit} | this workflow's ceilings run |")
        lines.append("")
    return "\n".join(lines)


def make_all(csv_dir, out_dir, precision="float32") -> list[str]:
    """Every figure whose CSVs exist in ``csv_dir``; returns the files written."""
    from solver.io import atomic_path
    from solver.vecops.sweeps import CSV_NAMES

    csv_dir, out_dir = Path(csv_dir), Path(out_dir)

    from solver.vecops.sweeps import COLUMNS

    def load(key):
        df = read_csvs([csv_dir / f"{CSV_NAMES[key]}.{k}.csv" for k in ("gpu", "cpu")])
        return df if not df.empty else pd.DataFrame({c: pd.Series(dtype=float) for c in COLUMNS})

    ceil = read_csvs([csv_dir / f"ceilings.{k}.csv" for k in ("gpu", "cpu")])
    if ceil.empty:
        ceil = pd.DataFrame(columns=["device_kind", "device", "quantity", "value", "unit"])
    gbw = np.nan
    if not ceil.empty:
        g = ceil[(ceil.device_kind == "gpu") & (ceil.quantity == "copy_bandwidth")]
        c = ceil[(ceil.device_kind == "cpu") & (ceil.quantity == "copy_bandwidth")]
        gbw = float(g.value.iloc[0]) if not g.empty else (float(c.value.iloc[0]) if not c.empty else np.nan)
    written = []
    frames = {k: load(k) for k in CSV_NAMES}

    def w(name):
        p = out_dir / name
        written.append(str(p))
        return p

    plot_vs_size(frames["fig09"], w("fig09_axpy.png"), "Fig 9: AXPY r = a x + y",
                 ["axpy", "cublas_axpy", "copy", "memcpy", "numpy", "numba"], ceiling=gbw, launch_impl="axpy")
    plot_vs_block(frames["fig10_11"], w("fig10_dot0_blocks.png"), "Fig 10: DOT kernel dot0 (local memory) vs work-group size",
                  ["dot0"], refs=("dot1", "cublas_dot", "numpy", "numba"))
    plot_vs_block(frames["fig10_11"], w("fig11_dot1_blocks.png"), "Fig 11: DOT kernel dot1 (global memory only) vs work-group size",
                  ["dot1", "dot0"], refs=("cublas_dot", "numpy", "numba"))
    plot_vs_size(frames["fig12"], w("fig12_dot_sizes.png"), "Fig 12: DOT vs vector length",
                 ["dot0", "dot1", "cublas_dot", "numpy", "numba"], ceiling=gbw, launch_impl="dot0")
    plot_vs_block(frames["fig13"], w("fig13_spmv_vector.png"), "Fig 13: SpMV vector kernel spmv0 vs work-group size",
                  ["spmv0"], refs=("spmv1", "cusparse", "scipy", "numba"))
    plot_fig14(frames["fig14"], frames["crossover"], w("fig14_spmv_scalar.png"), "Fig 14: SpMV scalar kernel spmv1, Table 2 matrices")
    plot_roofline(frames, ceil, w("roofline.png"), precision)
    t1p = csv_dir / "table1.csv"
    if t1p.is_file():
        md = table1_markdown(pd.read_csv(t1p), ceil)
        p = w("table1.md")
        with atomic_path(p) as tmp:
            tmp.write_text(md + "\n")
    return written
