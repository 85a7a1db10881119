"""Mesh-convergence tables of the collision study (paper 004): h^2 extrapolation of the rate checks.

Reads the outputs of ``solver collision relax|bkw|rates|maxwellian`` from one results folder:

- ``relax_rk2_N<N>_summary.json`` + ``_history.csv``: late-time decay of T_x - T of the
  bi-Maxwellian (rk2, paper_grid, the same domain for every N, so h^2 / T goes down);
- ``rates.csv`` (kind ``aniso``): the near-equilibrium instantaneous rate, continuum value p/mu_1;
  (kind ``bkw``): d<v^4>/dt of BKW at K = 3/5, continuum value 5 (1 - K)^2;
- ``bkw_N<N>_hw<w>.csv``: the BKW runs (fourth moment over the run);
- ``maxwellian*.csv``: the gain/loss table.

Writes ``convergence.csv`` (one row per quantity and mesh, plus a row ``N = 0`` with the linear fit
in h^2 extrapolated to h = 0) and ``convergence.json`` (the fits).  The extrapolation is a least-squares
line through all meshes of a quantity (value = a + b h^2); with three meshes the residual of the line
tells whether the h^2 regime is reached (reported as ``fit_resid_max``).
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np


def h2_fit(h2, y):
    """Least-squares y = a + b h2; returns (a, b, max |residual|)."""
    h2, y = np.asarray(h2, float), np.asarray(y, float)
    if len(h2) < 2:
        return float("nan"), float("nan"), float("nan")
    A = np.stack([np.ones_like(h2), h2], 1)
    (a, b), *_ = np.linalg.lstsq(A, y, rcond=None)
    return float(a), float(b), float(np.abs(A @ [a, b] - y).max())


def late_time_rows(folder: Path, lo=1e-1, hi=1e-3):
    """One row per relax_rk2_N<N> run: fitted late rate and the local rate at the end of the run."""
    import pandas as pd

    from solver.collision.relax import chapman_enskog_rate, fit_decay, local_rates, nu0_edge

    rows = []
    for p in sorted(folder.glob("relax_rk2_N*_summary.json")):
        s = json.loads(p.read_text())
        hist = pd.read_csv(p.with_name(p.name.replace("_summary.json", "_history.csv")))
        y = hist.Tx - hist["T"]
        lam, sel = fit_decay(hist.t, y, lo, hi)
        tm, lr = local_rates(hist.t, y)
        dts = np.diff(hist.t.to_numpy())
        if len(lr) > 1 and dts[-1] < 0.99 * dts[-2]:
            lr = lr[:-1]  # the last step is shortened to land on t_end: its rk2 rate is not comparable
        n, T, h = s["n"], s["T"], s["grid"]["h"]
        ce, e0 = chapman_enskog_rate(n, T), nu0_edge(n, T)
        rows.append({"quantity": "late_rate", "N": s["grid"]["N"], "h": h, "h2_over_T": h * h / T,
                     "value": lam, "reference": ce, "rel_err": lam / ce - 1.0,
                     "rel_to_nu0": lam / e0 - 1.0, "local_rate_end": float(lr[-1]),
                     "local_rate_end_rel": float(lr[-1]) / ce - 1.0, "t_end": float(hist.t.iloc[-1]),
                     "decay_end": float(abs(y.iloc[-1] / y.iloc[0])), "fit_points": int(sel.sum()),
                     "max_conservation_error": s["max_conservation_error"],
                     "entropy_nonincreasing": s["entropy_nonincreasing"], "n": n, "T": T,
                     "p_over_mu1": ce, "nu0": e0})
    return rows


def bkw_rows(folder: Path):
    import pandas as pd

    rows = []
    for p in sorted(folder.glob("bkw_N*_hw*.csv")):
        m = re.match(r"bkw_N(\d+)_hw([0-9.]+)\.csv", p.name)
        if not m:
            continue
        d = pd.read_csv(p)
        N, hw = int(m.group(1)), float(m.group(2))
        h = 2 * hw / N
        i = int(d.rel_err.abs().idxmax())
        rows.append({"quantity": f"bkw_m4_max_err_hw{hw:g}", "N": N, "h": h, "h2_over_T": h * h / 2.0, "half_width": hw,
                     "value": float(d.rel_err.abs().max()), "reference": 0.0,
                     "rel_err": float(d.rel_err.abs().max()), "t_at_max": float(d.t.iloc[i]),
                     "err_end": float(d.rel_err.iloc[-1]), "steps": len(d) - 1,
                     "max_conservation_error": float(d.cons_err.max())})
    return rows


def rates_rows(folder: Path):
    import pandas as pd

    p = folder / "rates.csv"
    if not p.is_file():
        return []
    d = pd.read_csv(p)
    out = []
    for r in d.to_dict("records"):
        q = {"aniso": "aniso_rate", "bkw": "bkw_dm4dt"}[r["kind"]]
        out.append({"quantity": q, "N": r["N"], "h": r["h"], "h2_over_T": r["h2_over_T"], "half_width": r["half_width"],
                    "value": r["rate"], "reference": r["exact"], "rel_err": r["rel_err"], "T": r["T"]})
    return out


def maxwellian_rows(folder: Path):
    import pandas as pd

    out = []
    for p in sorted(folder.glob("maxwellian*.csv")):
        if p.name.startswith("maxwellian_conv"):
            continue
        for r in pd.read_csv(p).to_dict("records"):
            for q in ("gain_err_max", "gain_err_mean", "loss_err_max", "corrected_residual_max"):
                if q in r:
                    out.append({"quantity": f"maxwellian_{q}_T{r['T']:g}", "N": r["N"], "h": r["h"],
                                "h2_over_T": r["h"] ** 2 / r["T"], "value": r[q], "reference": 0.0,
                                "rel_err": r[q], "T": r["T"]})
    return out


def convergence(folder, out=None):
    """Build the tables; write convergence.csv / convergence.json into ``out`` (default: folder)."""
    import pandas as pd

    from solver.io import write_csv, write_json

    folder = Path(folder)
    out = Path(out) if out else folder
    rows = late_time_rows(folder) + bkw_rows(folder) + rates_rows(folder) + maxwellian_rows(folder)
    if not rows:
        raise SystemExit(f"{folder}: no relax_rk2_N*/bkw_N*/rates/maxwellian outputs found")
    df = pd.DataFrame(rows)
    fits = {}
    extra = []
    for q, d in df.groupby("quantity", sort=False):
        d = d.drop_duplicates("N", keep="last").sort_values("N")
        if len(d) < 2:
            continue
        a, b, res = h2_fit(d.h2_over_T, d.rel_err)
        fits[q] = {"meshes": [int(x) for x in d.N], "h2_over_T": [float(x) for x in d.h2_over_T],
                   "rel_err": [float(x) for x in d.rel_err], "extrapolated_rel_err": a, "slope": b,
                   "fit_resid_max": res}
        row = {"quantity": q, "N": 0, "h": 0.0, "h2_over_T": 0.0, "rel_err": a, "fit_resid_max": res, "slope": b}
        if q == "late_rate":
            ref = float(d.reference.iloc[-1])
            nu0 = float(d.nu0.iloc[-1])
            fits[q].update(p_over_mu1=ref, nu0=nu0, extrapolated_rate=ref * (1 + a),
                           extrapolated_rel_to_nu0=ref * (1 + a) / nu0 - 1)
            row.update(value=ref * (1 + a), reference=ref, rel_to_nu0=ref * (1 + a) / nu0 - 1)
            a2, b2, res2 = h2_fit(d.h2_over_T, d.local_rate_end_rel)
            fits[q].update(local_rate_end_extrapolated_rel=a2, local_rate_end_fit_resid_max=res2)
        extra.append(row)
    df = pd.concat([df, pd.DataFrame(extra)], ignore_index=True)
    write_csv(df, out / "convergence.csv")
    write_json(out / "convergence.json", fits)
    return df, fits


def figure(folder, output):
    """Two panels: local decay rate of T_x - T vs time per mesh (with p/mu_1 and nu(0)), and the
    relative errors of the rate checks against h^2/T with their h^2 lines."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import pandas as pd

    from solver.collision.relax import local_rates
    from solver.io import save_figure

    folder = Path(folder)
    df = pd.read_csv(folder / "convergence.csv")
    fig, ax = plt.subplots(1, 2, figsize=(11, 4.2))
    lr = df[(df.quantity == "late_rate") & (df.N > 0)]
    for r in lr.itertuples():
        hist = pd.read_csv(folder / f"relax_rk2_N{int(r.N)}_history.csv")
        tm, rate = local_rates(hist.t, hist.Tx - hist["T"])
        dts = np.diff(hist.t.to_numpy())
        if len(rate) > 1 and dts[-1] < 0.99 * dts[-2]:
            tm, rate = tm[:-1], rate[:-1]  # shortened last step (lands on t_end)
        ax[0].plot(tm, rate, label=f"{int(r.N)}^3, h^2/T = {r.h2_over_T:.3f}")
    if len(lr):
        ax[0].axhline(lr.p_over_mu1.iloc[-1], color="k", ls="--", lw=1, label="p/mu_1")
        ax[0].axhline(lr.nu0.iloc[-1], color="k", ls=":", lw=1, label="nu(0) (continuum edge)")
    ax[0].set(xlabel="t", ylabel=r"$-d\ln|T_x - T|/dt$", title="bi-Maxwellian, rk2: local decay rate")
    ax[0].legend(fontsize=7)
    names = {"late_rate": "late-time fit vs p/mu_1", "aniso_rate": "near-eq. rate vs p/mu_1",
             "bkw_dm4dt": "BKW d<v^4>/dt", "bkw_m4_max_err_hw6": "BKW max m4 error (+-6)",
             "bkw_m4_max_err_hw5": "BKW max m4 error (+-5)"}
    for q, lab in names.items():
        d = df[(df.quantity == q)]
        if not len(d):
            continue
        pts, ext = d[d.N > 0], d[d.N == 0]
        line = ax[1].plot(pts.h2_over_T, 100 * pts.rel_err, "o", label=lab)[0]
        if len(ext):
            x = np.linspace(0, pts.h2_over_T.max(), 20)
            ax[1].plot(x, 100 * (ext.rel_err.iloc[0] + ext.slope.iloc[0] * x), "-", color=line.get_color(), lw=0.8)
    ax[1].axhspan(-3, 3, color="0.9", zorder=0)
    ax[1].axhline(0, color="k", lw=0.5)
    ax[1].set(xlabel=r"$h^2/T$", ylabel="relative error (%)", title="h^2 extrapolation (lines: fits)")
    ax[1].legend(fontsize=7)
    save_figure(fig, output)
