"""I-V characteristics of the DG-MOSFET (docs/iv.md): the bias points of a study, the steady-state
drain current of each point (solver.bsp.steady), the curves, figures and figures of merit.

The drain current Id of a point is the time mean of the mean current <j> over the steady-state
window of its run, in A/m (= uA/um: current per unit gate width).  Curves:
- Id-Vg at each V_DS of ``idvg_vds`` (a low and a high one), over ``vg``;
- Id-Vd at each gate voltage of ``idvd_vg``, over ``vds``.
Gates are symmetric (both at V_G) unless ``bottom_gate_V`` holds the bottom gate at a fixed
voltage while V_G drives the top gate.

``python -m solver bsp iv plan|collect`` (workflow/rules/iv.smk): ``plan`` lists the points and
each one's continuation source; ``collect`` reads the finished runs and writes the tables and
figures.
"""
from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd

from solver import provenance
from solver.bsp.model import gate_volts


# ---------------------------------------------------------------------------------- plan
def point_name(vg: float, vds: float, bottom=None) -> str:
    """'vg0.500_vds0.100' (symmetric gates) or 'vg0.500_vgb0.000_vds0.100' (bottom gate held)."""
    b = "" if bottom is None else f"_vgb{float(bottom):.3f}"
    return f"vg{float(vg):.3f}{b}_vds{float(vds):.3f}"


def points(iv: dict) -> list[tuple[float, float]]:
    """Every (V_G, V_DS) of the study, once, sorted, less the pairs in ``skip``."""
    pts = {(round(float(g), 6), round(float(d), 6)) for d in iv["idvg_vds"] for g in iv["vg"]}
    pts |= {(round(float(g), 6), round(float(d), 6)) for g in iv["idvd_vg"] for d in iv["vds"]}
    pts -= {(round(float(g), 6), round(float(d), 6)) for g, d in iv.get("skip") or ()}
    return sorted(pts)


def sources(iv: dict) -> dict:
    """Continuation source of each point (None = a fresh start).

    - ``low_vg_from`` (a V_G of the study, or None): a point with a lower V_G starts from the
      point at that V_G and the same V_DS (with the bias ramp ``ramp_ps``): fresh starts at low
      V_G fault with a negative density (docs/iv.md).  With ``low_vg_seed_ps`` set, it starts
      instead from a *seed* (``Seed(V_G, V_DS)``): a fresh run at that V_G and V_DS, only
      ``low_vg_seed_ps`` long.  The finished point's final state is older (up to t_max) and
      carries a contact mode that grows from round-off, which faults the continued run within
      ~0.1 ps (docs/iv.md §8); a young seed does not carry it.
    - ``continuation`` on: every other point starts from the point at the same V_G and the next
      lower V_DS of the study, so each gate voltage is one chain along V_DS and the chains run in
      parallel; the lowest V_DS of every V_G starts fresh.  Off: those points start fresh."""
    pts = points(iv)
    out = {p: None for p in pts}
    floor = iv.get("low_vg_from")
    seed = iv.get("low_vg_seed_ps")
    for g, d in pts:
        if floor is not None and g < floor - 1e-9 and (round(float(floor), 6), d) in out:
            src = (round(float(floor), 6), d)
            out[(g, d)] = Seed(*src) if seed else src
            continue
        if iv.get("continuation", False):
            lower = [dd for gg, dd in pts if gg == g and dd < d]
            out[(g, d)] = (g, max(lower)) if lower else None
    return out


class Seed(tuple):
    """A continuation source that is a short fresh run at (V_G, V_DS) (``low_vg_seed_ps``), not a
    point of the study."""

    def __new__(cls, vg, vds):
        return super().__new__(cls, (vg, vds))


def source_name(src, bottom=None) -> str | None:
    """Run folder name of a source of ``sources``: the point's, or 'seed_' + it for a Seed."""
    if src is None:
        return None
    return ("seed_" if isinstance(src, Seed) else "") + point_name(*src, bottom)


def seeds(iv: dict) -> list:
    """The seeds of the study (each once, sorted)."""
    return sorted({s for s in sources(iv).values() if isinstance(s, Seed)})


def _num(x) -> str:
    """A float as YAML reads it back as a float (YAML 1.1 wants a dot in '1.0e-05')."""
    r = repr(float(x))
    return r.replace("e", ".0e", 1) if "e" in r and "." not in r else r


def _bias_sets(iv: dict, vg: float, vds: float) -> list[str]:
    """KEY=VALUE overrides of the bias of a run at (vg, vds): V_G, or the top gate with the fixed bottom one."""
    b = iv.get("bottom_gate_V")
    return [f"bias.V_DS={_num(vds)}"] + ([f"bias.V_G={_num(vg)}"] if b is None else
                                         [f"bias.V_G_top={_num(vg)}", f"bias.V_G_bottom={_num(b)}"])


def t_max_ps(iv: dict, vg: float) -> float:
    """The point's time limit: ``steady.t_max_ps``, or ``steady.t_max_low_vg.t_max_ps`` at V_G <=
    its ``vg_max`` (below threshold the start's plasma oscillation outlasts a small current:
    docs/iv.md section 10)."""
    st = iv["steady"]
    low = st.get("t_max_low_vg")
    if low is not None and vg <= low["vg_max"] + 1e-12:
        return float(low["t_max_ps"])
    return float(st["t_max_ps"])


def start_priority(iv: dict, vg: float, vds: float) -> float:
    """Snakemake priority of a point (rule iv_point; its seed's too): on a host with fewer GPU slots than points,
    the points expected to take longest start first (list scheduling, longest first), so that none of them starts
    last.  The expected cost is ordered by the time limit (``t_max_ps``), then by V_DS (a larger drain voltage, a
    smaller time step: 1.8-2.5x the steps per ps at 0.4 V as at 0.05 V on the standard mesh), then by the lower
    V_G (more steps per ps below threshold): docs/iv.md section 24.  Lexicographic in that order for time limits
    0.001 ps apart, |V_DS| 0.001 V apart (below 1000 V) and V_G 0.01 V apart (|V_G| < 5 V)."""
    return round(t_max_ps(iv, vg) * 1e3) * 1e9 + round(abs(float(vds)) * 1e3) * 1e3 - round(float(vg) * 1e2)


def gpu_mode(iv: dict, vg: float) -> str:
    """``solver run --gpu`` of a point (solver/gpuslot.py): ``own`` (a GPU that no new shared run goes to, taken
    without waiting for the runs already on it) for a point with the longer time limit (``steady.t_max_low_vg``)
    under ``iv.long_points_gpu: own``, else ``auto`` (shared).  The long points then do not share a GPU with
    the short ones for longer than the first short runs there last, which on a host with more GPUs than long
    points ends the study when its longest point ends (docs/iv.md section 20)."""
    long = t_max_ps(iv, vg) > float(iv["steady"]["t_max_ps"])
    return "own" if long and iv.get("long_points_gpu", "shared") == "own" else "auto"


def low_vg_sets(iv: dict, vg: float) -> list[str]:
    """``iv.low_vg_set.set`` for a run (point or seed) at V_G <= its ``vg_max``, else nothing: e.g.
    ``numerics.contact_rule=hybrid`` below threshold, where the authors' contact rule lets a contact mode
    grow (docs/iv.md sections 9-15)."""
    low = iv.get("low_vg_set")
    if low is not None and vg <= low["vg_max"] + 1e-12:
        return [str(x) for x in low.get("set", [])]
    return []


def on_fault(iv: dict) -> str:
    """The study's ``on_fault``: ``record`` (the default) or ``stop``."""
    return iv.get("on_fault") or "record"


def run_sets(iv: dict, vg: float, vds: float) -> list[str]:
    """KEY=VALUE overrides of one point's run (bias, steady state, continuation output, iv.low_vg_set).
    The study's on_fault is not among them: rule iv_point adds it in its shell (fault_set_shell), so
    that changing it does not rerun finished points (Snakemake's params trigger; the run's
    configuration hash leaves it out too)."""
    st = iv["steady"]
    return low_vg_sets(iv, vg) + _bias_sets(iv, vg, vds) + ["steady.enabled=true", f"steady.window_ps={_num(st['window_ps'])}",
                   f"steady.rtol={_num(st['rtol'])}", f"steady.conservation_tol={_num(st['conservation_tol'])}"] + (
        [f"steady.hold_windows={_num(st['hold_windows'])}"] if st.get("hold_windows") is not None else []) + [
                   f"time.t_end_ps={_num(t_max_ps(iv, vg))}", "time.steps=null", "continuation.save_final_state=true"] + (
        [f"continuation.ramp_ps={_num(iv['ramp_ps'])}"] if iv.get("ramp_ps") else [])


def mesh_sets(iv: dict) -> list[str]:
    """``mesh.N_sbn=...`` .. ``mesh.NPHI=...`` of the study's ``iv.mesh`` (N_sbn x NX x NZ x NW x NPHI)."""
    dims = ("N_sbn", "NX", "NZ", "NW", "NPHI")
    return [f"mesh.{k}={int(v)}" for k, v in zip(dims, str(iv["mesh"]).split("x"))]


def point_sets(iv: dict, vg: float, vds: float) -> list[str]:
    """Every KEY=VALUE override of a point's run as rule iv_point passes them (before a continuation source): its
    run_sets, the mesh and the study's ``iv.set`` (the device scripts that run a point outside Snakemake use it too)."""
    return run_sets(iv, vg, vds) + mesh_sets(iv) + [str(x) for x in iv.get("set", [])]


def fault_set_shell(iv: dict) -> str:
    """What rule iv_point adds to its run's options: with the study's on_fault record
    ``" --set output.on_fault=record"`` (a faulted point leaves its record for collect; its job accepts
    exit code 3, fault_ok_shell), else nothing."""
    return " --set output.on_fault=record" if on_fault(iv) == "record" else ""


def fault_ok_shell(iv: dict) -> str:
    """What rule iv_point appends to its shell command (after the redirection): with on_fault record
    ``" || [ $? -eq 3 ]"``, so that exit code 3 (a fault, recorded by the run) passes and every
    other non-zero code still fails the job (also under Snakemake's ``set -euo pipefail``); else
    nothing.  Seeds keep stop: the points start from them."""
    return " || [ $? -eq 3 ]" if on_fault(iv) == "record" else ""


def seed_sets(iv: dict, vg: float, vds: float) -> list[str]:
    """KEY=VALUE overrides of a seed run: the bias, low_vg_seed_ps long, no steady stop, final state kept
    (and iv.low_vg_set where the seed's V_G is in its range: the points it starts run that way too)."""
    return low_vg_sets(iv, vg) + _bias_sets(iv, vg, vds) + [f"time.t_end_ps={_num(iv['low_vg_seed_ps'])}", "time.steps=null", "continuation.save_final_state=true"]


# ---------------------------------------------------------------------------------- collect
def read_point(run_dir) -> dict:
    """One point's row: bias, Id and its steady-state record, steps and times; ``status`` steady,
    t_max (stopped at its time limit) or fault (the run ended on a numerical fault with
    output.on_fault = record: Id NaN, ``fault`` its message, t_end_ps the time of its last good
    state)."""
    run_dir = Path(run_dir)
    rec = json.loads((run_dir / "run.json").read_text())
    cfg, s = rec["config"], rec["summary"]
    bottom, top = gate_volts(cfg)
    st = s.get("steady", {})
    src = s.get("continuation") or {}
    fault = (s.get("fault") or {"message": "(no fault record)"}) if s.get("status") == "fault" else None
    reached = bool(st.get("reached", False))
    return {
        "point": run_dir.name,
        "V_G_top": top,
        "V_G_bottom": bottom,
        "V_DS": cfg["bias"]["V_DS"],
        "Id_A_per_m": math.nan if fault else st.get("current_A_per_m", s["mean_current_A_per_m"]),
        "steady": reached,
        "status": "fault" if fault else "steady" if reached else "t_max",
        "fault": fault.get("message", "") if fault else "",
        "t_steady_ps": st.get("t_reached_ps"),
        "t_end_ps": fault.get("t_ps", s["t_end_s"] * 1e12) if fault else s["t_end_s"] * 1e12,
        "steps": s["steps"],
        "drift": st.get("drift"),
        "charging": st.get("charging"),
        "face_spread": (st.get("final_spreads") or {}).get("face"),
        "init_from": Path(src["init_from"]).name if src.get("init_from") else "",
        "contact_rule": (cfg.get("numerics") or {}).get("contact_rule", "reference"),
        "wall_s": s["wall_s"],  # the last process's
        "wall_s_run": s.get("wall_s_run"),  # all the run's processes (resumed runs); empty: not recorded
        "startup_s": s["startup_s"],
        "commit": provenance.code_id(rec.get("git") or {}),
    }


def _status(df: pd.DataFrame) -> pd.Series:
    """The points' status (read_point); a table without the column: steady or t_max from ``steady``."""
    if "status" in df:
        return df["status"]
    return pd.Series(np.where(df["steady"].astype(bool), "steady", "t_max"), index=df.index)


def curves(points_df: pd.DataFrame, iv: dict) -> pd.DataFrame:
    """Long table of the curves: one row per (curve, point); a faulted point stays a row (NaN Id,
    status fault)."""
    rows = []
    df = points_df.assign(V_G=points_df["V_G_top"], status=_status(points_df))
    for d in iv["idvg_vds"]:
        sel = df[np.isclose(df["V_DS"], d)].sort_values("V_G")
        rows.append(sel.assign(curve=f"idvg_vds{float(d):g}", sweep="V_G"))
    for g in iv["idvd_vg"]:
        sel = df[np.isclose(df["V_G"], g)].sort_values("V_DS")
        rows.append(sel.assign(curve=f"idvd_vg{float(g):g}", sweep="V_DS"))
    cols = ["curve", "sweep", "V_G", "V_G_bottom", "V_DS", "Id_A_per_m", "steady", "t_steady_ps", "point", "status"]
    return pd.concat(rows, ignore_index=True)[cols]


def traces(run_dirs) -> pd.DataFrame:
    """The current-versus-time trace of every point (from its scalars.csv)."""
    out = []
    for r in run_dirs:
        sc = pd.read_csv(Path(r) / "scalars.csv")
        out.append(pd.DataFrame({"point": Path(r).name, "step": sc["step"], "time_ps": sc["time_s"] * 1e12,
                                 "current_A_per_m": sc["mean_current_A_per_m"]}))
    return pd.concat(out, ignore_index=True)


# ---------------------------------------------------------------------------------- figures of merit
def vth_constant_current(vg, idd, i_th) -> float:
    """V_G where Id crosses i_th (log Id interpolated linearly in V_G; first upward crossing);
    NaN when Id never crosses it."""
    vg, idd = np.asarray(vg, float), np.asarray(idd, float)
    logi = np.log10(np.maximum(idd, 1e-300))
    lt = math.log10(i_th)
    for k in range(len(vg) - 1):
        if logi[k] <= lt <= logi[k + 1] and logi[k + 1] > logi[k]:
            return float(vg[k] + (lt - logi[k]) * (vg[k + 1] - vg[k]) / (logi[k + 1] - logi[k]))
    return math.nan


def gm_curve(vg, idd):
    """dId/dV_G at the nodes (second-order differences on the possibly uneven V_G list)."""
    return np.gradient(np.asarray(idd, float), np.asarray(vg, float))


def vth_linear_extrapolation(vg, idd, vds) -> float:
    """Maximum-gm method: the tangent at the point of largest gm crosses Id = 0 at V_G0;
    Vth = V_G0 - V_DS/2 (for the linear region, low V_DS)."""
    vg, idd = np.asarray(vg, float), np.asarray(idd, float)
    gm = gm_curve(vg, idd)
    k = int(np.argmax(gm))
    return float(vg[k] - idd[k] / gm[k] - vds / 2)


def subthreshold_swing(vg, idd, i_th) -> float:
    """Smallest dV_G / dlog10(Id) (mV/decade) between consecutive points with Id below i_th
    (the steepest part of the subthreshold region); NaN with fewer than two such points."""
    return _swing_pairs(vg, idd, i_th)[0][0]


def swing_at_threshold(vg, idd, i_th) -> float:
    """dV_G / dlog10(Id) (mV/decade) between the two consecutive points that bracket the Vth current
    (Id below i_th, then at or above it; both positive and rising): the swing at threshold.  Where the
    curve bends over above threshold (log Id concave in V_G) it is not below the subthreshold SS; it needs
    only one resolved point below i_th.  NaN where no pair brackets i_th."""
    return _swing_pairs(vg, idd, i_th)[1][0]


def _swing_pairs(vg, idd, i_th):
    """((SS, k), (SS_Vth, k)): subthreshold_swing's and swing_at_threshold's values and the index k of the
    pair (k, k + 1) each is read from (NaN and None where there is none)."""
    vg, idd = np.asarray(vg, float), np.asarray(idd, float)
    ok = (idd > 0) & (idd < i_th)
    ss, at = (math.nan, None), (math.nan, None)
    for k in range(len(vg) - 1):
        if not (idd[k] > 0 and idd[k + 1] > idd[k]):
            continue
        s = 1e3 * (vg[k + 1] - vg[k]) / (math.log10(idd[k + 1]) - math.log10(idd[k]))
        if ok[k] and ok[k + 1] and not s >= ss[0]:  # the smallest (NaN: none yet)
            ss = (s, k)
        if ok[k] and idd[k + 1] >= i_th and at[1] is None:  # the first pair across i_th
            at = (s, k)
    return ss, at


def _split_faults(c: pd.DataFrame, by: str):
    """Curve ``c`` without its faulted points, and the faulted points' ``by`` (the swept voltage, V_G
    or V_DS)."""
    bad = (_status(c) == "fault").to_numpy()
    return c[~bad], c[bad][by]


def _usable(c: pd.DataFrame, by: str):
    """The rows of curve ``c`` with a finite Id and not faulted, and the note for a figure-of-merit
    row read from it: '' or '; faulted points left out: V_G = -0.4, -0.5 V' (``by`` the swept
    voltage, V_G or V_DS)."""
    kept, gone = _split_faults(c, by)
    ok = kept[np.isfinite(kept["Id_A_per_m"].to_numpy(float))]
    note = "" if not len(gone) else f"; faulted points left out: {by} = {', '.join(f'{v:g}' for v in gone)} V"
    return ok, note


def figures_of_merit(curv: pd.DataFrame, iv: dict) -> pd.DataFrame:
    """The table: quantity, value, unit, condition, method.  Read from the points with an Id only:
    a faulted point (status fault, NaN Id) is left out of every curve, and the condition of each
    row read from a curve that lost one names them ('faulted points left out: V_G = ... V'); the
    lowest / highest V_G of Ioff / Ion are those of the points left."""
    i_th = iv["vth_current_A_per_m"]
    rows = []

    def add(q, v, unit, cond, method):
        rows.append({"quantity": q, "value": v, "unit": unit, "condition": cond, "method": method})

    vds_list = sorted(float(d) for d in iv["idvg_vds"])
    vth, notes = {}, {}
    for d in vds_list:
        c, note = _usable(curv[curv["curve"] == f"idvg_vds{d:g}"].sort_values("V_G"), "V_G")
        notes[d] = note
        vg, idd = c["V_G"].to_numpy(), c["Id_A_per_m"].to_numpy(float)
        if len(vg) < 2:  # points missing (a failed run): nothing to read from this curve
            vth[d] = math.nan
            continue
        vth[d] = vth_constant_current(vg, idd, i_th)
        add("Vth", vth[d], "V", f"V_DS = {d:g} V{note}",
            f"constant current: V_G where Id = {i_th:g} A/m (log Id interpolated linearly in V_G)")
        if d == vds_list[0]:
            add("Vth_lin", vth_linear_extrapolation(vg, idd, d), "V", f"V_DS = {d:g} V{note}",
                "maximum-gm linear extrapolation: V_G at Id = 0 of the tangent at max gm, minus V_DS/2")
        (ss, kss), (sa, ksa) = _swing_pairs(vg, idd, i_th)
        pair = lambda k: "" if k is None else f", V_G = {vg[k]:g} to {vg[k + 1]:g} V"  # noqa: E731 (the points read)
        add("SS", ss, "mV/dec", f"V_DS = {d:g} V{pair(kss)}{note}",
            f"smallest dV_G/dlog10(Id) between consecutive points with Id < {i_th:g} A/m")
        add("SS_Vth", sa, "mV/dec", f"V_DS = {d:g} V{pair(ksa)}{note}",
            f"dV_G/dlog10(Id) between the two points that bracket Id = {i_th:g} A/m (the swing at threshold: "
            "not below SS where log Id bends down above threshold)")
        gm = gm_curve(vg, idd)
        k = int(np.argmax(gm))
        add("gm_max", gm[k], "S/m", f"V_DS = {d:g} V, V_G = {vg[k]:g} V{note}",
            "largest dId/dV_G (second-order finite differences)")
    lo, hi = vds_list[0], vds_list[-1]
    if hi > lo:
        which = "".join(f"{notes[d]} (the V_DS = {d:g} V curve)" for d in (lo, hi) if notes[d])  # whose points
        add("DIBL", 1e3 * (vth[lo] - vth[hi]) / (hi - lo), "mV/V", f"V_DS = {lo:g} and {hi:g} V{which}",
            "(Vth(low V_DS) - Vth(high V_DS)) / (V_DS high - V_DS low), constant-current Vth")
    c, note = _usable(curv[curv["curve"] == f"idvg_vds{hi:g}"].sort_values("V_G"), "V_G")
    if len(c):
        ion, ioff = float(c["Id_A_per_m"].iloc[-1]), float(c["Id_A_per_m"].iloc[0])
        add("Ion", ion, "A/m", f"V_G = {c['V_G'].iloc[-1]:g} V, V_DS = {hi:g} V{note}", "Id at the highest V_G and V_DS")
        add("Ioff", ioff, "A/m", f"V_G = {c['V_G'].iloc[0]:g} V, V_DS = {hi:g} V{note}", "Id at the lowest V_G, highest V_DS")
        add("Ion/Ioff", ion / ioff if ioff > 0 else math.nan, "1", f"V_DS = {hi:g} V{note}", "ratio of the two")
    for g in iv["idvd_vg"]:
        c, note = _usable(curv[curv["curve"] == f"idvd_vg{float(g):g}"].sort_values("V_DS"), "V_DS")
        vd, idd = c["V_DS"].to_numpy(), c["Id_A_per_m"].to_numpy(float)
        if len(vd) >= 2:
            add("gd", (idd[-1] - idd[-2]) / (vd[-1] - vd[-2]), "S/m",
                f"V_G = {float(g):g} V, V_DS = {vd[-2]:g}-{vd[-1]:g} V{note}",
                "dId/dV_DS between the two highest V_DS (saturation)")
    return pd.DataFrame(rows)


# ---------------------------------------------------------------------------------- figures
def plot_idvg(curv: pd.DataFrame, iv: dict, path_log, path_lin) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from solver import io

    for path, log in ((path_log, True), (path_lin, False)):
        fig, ax = plt.subplots(figsize=(5.2, 4))
        faulted, unresolved = [], []
        for d in iv["idvg_vds"]:
            c, gone = _split_faults(curv[curv["curve"] == f"idvg_vds{float(d):g}"].sort_values("V_G"), "V_G")
            faulted.append(gone)  # the curve goes through the points with an Id
            if log:  # an Id <= 0 (noise around a current below the mesh's resolution) has no place on a log axis
                pos = c["Id_A_per_m"].to_numpy(float) > 0
                unresolved.append(c[~pos]["V_G"])
                c = c[pos]
            mk = np.where(c["steady"], "o", "x")
            ax.plot(c["V_G"], c["Id_A_per_m"], "-", label=f"$V_{{DS}}$ = {float(d):g} V")
            for m in ("o", "x"):
                s = c[mk == m]
                ax.plot(s["V_G"], s["Id_A_per_m"], m, color=ax.lines[-1].get_color())
        if log:
            ax.set_yscale("log")
            ax.axhline(iv["vth_current_A_per_m"], ls=":", color="gray", lw=0.8)
        _mark_faults(ax, pd.concat(faulted) if faulted else [])
        if unresolved:  # hollow: a point that ran, unlike a fault's red triangle
            _edge_marks(ax, pd.concat(unresolved), "Id <= 0 (not resolved)", mfc="none", color="gray")
        ax.set(xlabel="$V_G$ (V)", ylabel=r"$I_d$ (A/m = $\mu$A/$\mu$m)",
               title="Id-Vg" + (" (log)" if log else "") + _gates(iv))
        ax.legend(fontsize=8)
        fig.tight_layout()
        io.save_figure(fig, path)
        plt.close(fig)


def plot_idvd(curv: pd.DataFrame, iv: dict, path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from solver import io

    fig, ax = plt.subplots(figsize=(5.2, 4))
    faulted = []
    for g in iv["idvd_vg"]:
        c, gone = _split_faults(curv[curv["curve"] == f"idvd_vg{float(g):g}"].sort_values("V_DS"), "V_DS")
        faulted.append(gone)  # the curve goes through the points with an Id
        ax.plot(c["V_DS"], c["Id_A_per_m"], "o-", label=f"$V_G$ = {float(g):g} V")
        bad = c[~c["steady"].astype(bool)]
        ax.plot(bad["V_DS"], bad["Id_A_per_m"], "x", color=ax.lines[-1].get_color(), ms=8)
    _mark_faults(ax, pd.concat(faulted) if faulted else [])
    ax.set(xlabel="$V_{DS}$ (V)", ylabel=r"$I_d$ (A/m = $\mu$A/$\mu$m)", title="Id-Vd" + _gates(iv))
    ax.legend(fontsize=8)
    fig.tight_layout()
    io.save_figure(fig, path)
    plt.close(fig)


def _mark_faults(ax, x) -> None:
    """The legend's key to the point marks (o: steady, x: stopped at its time limit, not steady) and the
    faulted points (no Id): a red triangle at their voltage on the bottom edge of the Id axis, legend
    entry 'fault (no Id)' (nothing without them)."""
    ax.plot([], [], "o", color="gray", label="steady")
    ax.plot([], [], "x", color="gray", label="not steady (time limit)")
    _edge_marks(ax, x, "fault (no Id)", color="red")


def _edge_marks(ax, x, label, **style) -> None:
    """Triangles at the voltages ``x`` on the bottom edge of the Id axis (points with no place on it), legend
    entry ``label``; nothing where ``x`` is empty."""
    x = np.asarray(x, float)
    if len(x):
        ax.plot(x, np.zeros_like(x), "v", ms=8, clip_on=False, zorder=5, transform=ax.get_xaxis_transform(),
                label=label, **style)


def plot_traces(tr: pd.DataFrame, pts: pd.DataFrame, path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from solver import io

    names = list(pts["point"])
    n = len(names)
    cols = min(4, n)
    rows = math.ceil(n / cols)
    fig, axs = plt.subplots(rows, cols, figsize=(3.2 * cols, 2.2 * rows), squeeze=False)
    for ax, (_, p) in zip(axs.flat, pts.iterrows()):
        t = tr[tr["point"] == p["point"]]
        ax.plot(t["time_ps"], t["current_A_per_m"], lw=0.8)
        if p.get("status") == "fault":  # the trace up to the fault; the fault's time (its last good state)
            ax.axvline(p["t_end_ps"], ls="-", color="red", lw=1.0)
            ax.set_title(p["point"] + " (FAULT)", fontsize=7, color="red")
            ax.tick_params(labelsize=6)
            continue
        ax.axhline(p["Id_A_per_m"], ls=":", color="k", lw=0.8)
        if p["steady"]:
            ax.axvline(p["t_steady_ps"], ls="--", color="g", lw=0.8)
        ax.set_title(p["point"] + ("" if p["steady"] else " (not steady)"), fontsize=7)
        ax.tick_params(labelsize=6)
    for ax in list(axs.flat)[n:]:
        ax.axis("off")
    fig.supxlabel("t (ps)", fontsize=8)
    fig.supylabel("<j> (A/m)", fontsize=8)
    fig.tight_layout()
    io.save_figure(fig, path)
    plt.close(fig)


def _gates(iv) -> str:
    b = iv.get("bottom_gate_V")
    return "" if b is None else f", bottom gate {float(b):g} V"


# ---------------------------------------------------------------------------------- CLI
def write_curves(run_dirs, iv: dict, out) -> pd.DataFrame:
    """points.csv, curves.csv, figures_of_merit.csv and the Id figures (idvg_log, idvg_linear, idvd) of the runs'
    run.json files into ``out``; returns the points (collect adds the traces, which need every scalars.csv;
    tools/bsp/iv_refresh.py remakes these alone)."""
    from solver import io

    out = Path(out)
    pts = pd.DataFrame([read_point(r) for r in run_dirs]).sort_values(["V_G_top", "V_DS"])
    curv = curves(pts, iv)
    io.write_csv(pts, out / "points.csv")
    io.write_csv(curv, out / "curves.csv")
    io.write_csv(figures_of_merit(curv, iv), out / "figures_of_merit.csv")
    plot_idvg(curv, iv, out / "idvg_log.png", out / "idvg_linear.png")
    plot_idvd(curv, iv, out / "idvd.png")
    return pts


def collect(run_dirs, iv: dict, out) -> dict:
    """Every table and figure of the study into ``out`` (see docs/iv.md); the curves hold the
    points given (a point whose run failed without a record is simply absent; a faulted point
    recorded with output.on_fault = record is a row with status fault and NaN Id).  Returns the
    counts ``points``, ``steady``, ``faulted``, the faulted points' names (``faulted_points``) and
    ``faults`` (name: fault message)."""
    from solver import io, provenance

    out = Path(out)
    pts = write_curves(run_dirs, iv, out)
    tr = traces(run_dirs)
    io.write_csv(tr, out / "traces.csv", float_format="%.8e")
    plot_traces(tr, pts, out / "traces.png")
    io.write_json(out / "iv.provenance.json",
                  provenance.collect(None, None, {"iv": iv, "runs": [str(r) for r in run_dirs]}))
    bad = pts[pts["status"] == "fault"]
    return {"points": len(pts), "steady": int(pts["steady"].sum()), "faulted": len(bad),
            "faulted_points": list(bad["point"]), "faults": dict(zip(bad["point"], bad["fault"]))}


def register(sub) -> None:
    p = sub.add_parser("iv", help="I-V study: the points of a study and their curves, figures and figures of merit")
    ps = p.add_subparsers(dest="iv_command", metavar="SUBCOMMAND", required=True)
    c = ps.add_parser("collect", help="tables and figures of the finished point runs")
    c.add_argument("runs", nargs="+", help="the point run folders (each with run.json and scalars.csv)")
    c.add_argument("--study", required=True, help="the study's settings as JSON (the workflow's iv section)")
    c.add_argument("--out", required=True, help="output folder")
    c.set_defaults(func=_collect)
    q = ps.add_parser("plan", help="list the points of a study and their continuation sources")
    q.add_argument("--study", required=True, help="the study's settings as JSON")
    q.set_defaults(func=_plan)


def _study(text) -> dict:
    from solver.config import ConfigError

    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"--study: not JSON ({exc})") from None


def _collect(args) -> int:
    """collect; the summary line names the faulted points, and each gets a warning on stderr."""
    import sys

    r = collect(args.runs, _study(args.study), args.out)
    bad = f", {r['faulted']} faulted: {', '.join(r['faulted_points'])}" if r["faulted"] else ""
    print(f"iv: {r['points']} points ({r['steady']} at steady state{bad}); tables and figures in {args.out}")
    for name, msg in r["faults"].items():
        print(f"warning: iv point {name} ended on a numerical fault (no Id; left out of the figures of merit): "
              f"{msg}", file=sys.stderr)
    return 0


def _plan(args) -> int:
    iv = _study(args.study)
    b = iv.get("bottom_gate_V")
    for (g, d), src in sources(iv).items():
        print(point_name(g, d, b), "<-", "fresh" if src is None else source_name(src, b))
    return 0
