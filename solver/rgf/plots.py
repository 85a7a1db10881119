"""Figures of paper 002 from the CSVs of :mod:`solver.rgf.bench`."""
from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from solver import io  # noqa: E402


def fig8bc(csvs, out_png, title=""):
    df = pd.concat([pd.read_csv(c) for c in csvs]).sort_values("E_eV")
    fig, ax = plt.subplots(1, 2, figsize=(9, 3.6))
    ax[0].plot(df.E_eV, df.T_LR, "k.-", label="T_LR")
    ax[0].plot(df.E_eV, df.T_RL, "r--", lw=0.8, label="T_RL")
    ax[0].set_xlabel("E (eV)"); ax[0].set_ylabel("transmission"); ax[0].legend(); ax[0].set_title("(b) " + title)
    ax[1].plot(df.E_eV, df.LDOS_per_eV, "b.-")
    ax[1].set_xlabel("E (eV)"); ax[1].set_ylabel("LDOS summed over the device (1/eV)"); ax[1].set_title("(c)")
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
