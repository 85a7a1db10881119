"""Figures of paper 002 from the CSVs of :mod:`solver.rgf.bench`."""
from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from solver import io  # noqa: E402


def fig8bc(csvs, out_png, title="", cbm=None):
    """(b) T(E), (c) LDOS(E) per cubic cell; one curve per wire length when the CSVs hold several."""
    df = pd.concat([pd.read_csv(c) for c in csvs]).sort_values("E_eV")
    if "xuc" not in df:
        df["xuc"] = 0
    if "LDOS_per_cell_per_eV" not in df:
        df["LDOS_per_cell_per_eV"] = df.LDOS_per_eV
    fig, ax = plt.subplots(1, 2, figsize=(9, 3.6))
    for k, (L, g) in enumerate(df.groupby("xuc")):
        lab = f"X-UC = {L}" if L else "T_LR"
        ax[0].plot(g.E_eV, g.T_LR, ("k.-", "b.--", "g.:", "m.-.")[k % 4], lw=1.0, ms=3, label=lab)
        ax[1].plot(g.E_eV, g.LDOS_per_cell_per_eV, ("k.-", "b.--", "g.:", "m.-.")[k % 4], lw=1.0, ms=3, label=lab)
    err = float((df.T_LR - df.T_RL).abs().max())
    ax[0].set_xlabel("E (eV)"); ax[0].set_ylabel("transmission T_LR")
    ax[0].set_title(f"(b) {title}  (max |T_LR - T_RL| = {err:.1e})", fontsize=9)
    ax[1].set_xlabel("E (eV)"); ax[1].set_ylabel("LDOS per cubic cell (1/eV)"); ax[1].set_title("(c)", fontsize=9)
    pos = df.LDOS_per_cell_per_eV[df.LDOS_per_cell_per_eV > 0]
    if len(pos) and pos.max() / pos.min() > 1e3:
        ax[1].set_yscale("log")
    for a in ax:
        if cbm is not None:
            a.axvline(cbm, color="0.6", lw=0.8, ls=":", label="CBM (k = 0)")
        a.legend(fontsize=8, frameon=False, loc="upper left")
    io.save_figure(fig, out_png)
    plt.close(fig)
    return df


def fig7(csv, out_png):
    df = pd.read_csv(csv)
    fig, ax = plt.subplots(figsize=(6, 3.6))
    bottom = 0
    labels = [f"{c}\n{o}" for c, o in zip(df["case"], df["ops"])]
    for k, col in zip(("step1", "step2", "step3", "step4"), ("C0", "C1", "C2", "C3")):
        ax.bar(labels, df[f"{k}_s"], bottom=bottom, label=k, color=col)
        bottom = bottom + df[f"{k}_s"]
    ax.set_ylabel("wall time (s)"); ax.legend()
    ax.set_title(f"RGF steps, {df.ny[0]}x{df.nz[0]} x {df.xuc[0]} UC, block {df.block[0]}")
    io.save_figure(fig, out_png)
    plt.close(fig)


def fig2(csv, out_png):
    df = pd.read_csv(csv)
    fig, ax = plt.subplots(1, 2, figsize=(9, 3.6))
    L = df[df.sweep == "length"]
    S = df[df.sweep == "section"]
    ax[0].plot(L.xuc, L.step3_s, "ko-", label="step 3 time (s)")
    ax0 = ax[0].twinx()
    ax0.plot(L.xuc, L.step3_products, "r^--", label="step-3 products")
    ax[0].set_xlabel("X-UC"); ax[0].set_ylabel("step 3 (s)"); ax0.set_ylabel("products", color="r")
    ax[0].set_title("(b) vs length")
    ax[1].loglog(S.block, S.step3_s / S.step3_products, "ko-", label="s per product")
    ax[1].set_xlabel("block size (20 YZ-UC)"); ax[1].set_ylabel("step-3 time per product (s)")
    ax[1].set_title("(c) vs cross-section")
    io.save_figure(fig, out_png)
    plt.close(fig)


def fig8a(csv, out_png):
    df = pd.read_csv(csv)
    fig, ax = plt.subplots(figsize=(4.5, 3.6))
    # A projection, not timed parallel runs: the makespan of the measured per-chunk times
    # distributed over P workers by the LPT rule (bench.strong_scaling).
    ax.plot(df.workers, df.speedup, "ko-", label="projected: measured chunk times, LPT schedule")
    ax.plot(df.workers, df.workers, "k:", label="ideal")
    ax.set_xlabel("workers (Snakemake jobs)"); ax.set_ylabel("speed-up (projected)")
    ax.set_xticks(df.workers)
    ax.legend(loc="upper left", fontsize=8, frameon=False)
    io.save_figure(fig, out_png)
    plt.close(fig)


def fig8a_measured(csv, out_png, title=""):
    """Measured strong scaling: speed-up of the timed parallel runs vs workers, one line per chunk
    count (left), makespan vs chunk count per worker count (right)."""
    df = pd.read_csv(csv)
    col, ylab = "speedup_vs_1worker_1chunk", "speed-up vs 1 worker, 1 chunk"
    if not df[col].notna().any():  # no 1-worker 1-chunk run: against 1 worker, same chunks
        col, ylab = "speedup_vs_1worker_same_chunks", "speed-up vs 1 worker, same chunks"
    fig, ax = plt.subplots(1, 2, figsize=(9, 3.6))
    W = sorted(df.workers.unique())
    for k, (c, g) in enumerate(df.groupby("chunks")):
        ax[0].plot(g.workers, g[col], "o-", color=f"C{k}", label=f"{c} chunks")
        # annotate each point with its measured makespan
        for x, y, m in zip(g.workers, g[col], g.makespan_s):
            ax[0].annotate(f"{m:.0f} s" if m >= 10 else f"{m:.1f} s", (x, y), fontsize=7, xytext=(4, -10),
                           textcoords="offset points")
    ax[0].plot(W, W, "k:", label="ideal")
    gpu = (df.devices == "gpu").all()
    ng = df.n_gpus if "n_gpus" in df else df.workers
    shared = gpu and bool((df.workers > ng).any())  # several chunk processes on one GPU
    dev = "processes" if shared else "GPUs" if gpu else "workers"
    xlab = (f"chunk processes at a time on {int(ng.max())} GPU(s)" if shared else
            f"{dev} (one chunk process per {dev[:-1]} at a time)")
    ax[0].set_xlabel(xlab); ax[0].set_ylabel(ylab)
    ax[0].set_xticks(W); ax[0].legend(fontsize=8, frameon=False, loc="upper left")
    ax[0].set_title("(a) " + title, fontsize=9)
    for k, (w, g) in enumerate(df.groupby("workers")):
        ax[1].plot(g.chunks, g.makespan_s, "s-", color=f"C{k}", label=f"{w} {dev}")
    ax[1].set_xscale("log", base=2); ax[1].set_xlabel("chunks (Snakemake jobs)"); ax[1].set_ylabel("measured makespan (s)")
    ax[1].legend(fontsize=8, frameon=False)
    io.save_figure(fig, out_png)
    plt.close(fig)
