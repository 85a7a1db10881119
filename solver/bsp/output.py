"""Physical outputs of a BSP state (physics.md §9): profiles in the reference's CSV columns,
scalars, and HDF5 fields with units as attributes."""
from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from solver import io
from solver.bsp.constants import N_VALLEYS, Q, VALLEY_DEGENERACY

if TYPE_CHECKING:  # pandas is imported where a table is made (start-up time)
    import pandas as pd


def trapezoid(y, dx):
    y = np.asarray(y)
    return float(dx * (y.sum(axis=-1) - 0.5 * (y[..., 0] + y[..., -1])))


def profiles(model, rho, j_sub, eps, deps_dx) -> pd.DataFrame:
    """One row per x node, the columns of the reference's ``profiles_*.csv``.

    rho, j_sub, eps, deps_dx: host arrays (NX, 3, N_sbn); j_sub is the per-subband current of one
    valley of the pair (dimensionless); totals include the valley-pair degeneracy."""
    s = model.scales
    Ns_sub = rho * s.rho
    j_sub_phys = j_sub * s.j
    Ns = VALLEY_DEGENERACY * Ns_sub.sum(axis=(1, 2))
    j = VALLEY_DEGENERACY * j_sub_phys.sum(axis=(1, 2))
    cols = {
        "x_m": model.x * s.Lx,
        "j_total_A_per_m": j,
        "Ns_total_m-2": Ns,
        "vdrift_m_per_s": j / (Q * Ns),
    }
    P = model.N_sbn
    for name, arr, scale in (
        ("eps", eps, s.energy_eV, ),
        ("Ns", Ns_sub, 1.0),
        ("j", j_sub_phys, 1.0),
        ("depsdx", deps_dx, s.energy_eV / s.Lx),
    ):
        unit = {"eps": "eV", "Ns": "m-2", "j": "A_per_m", "depsdx": "eV_per_m"}[name]
        for nu in range(N_VALLEYS):
            for p in range(P):
                cols[f"{name}_nu{nu}_p{p}_{unit}"] = arr[:, nu, p] * scale
    import pandas as pd

    return pd.DataFrame(cols)


def scalars_row(model, step, t, dt, rho_x, j_x, newton_iterations, contact=None) -> dict:
    """Time-series record: mass int N_s dx per metre of width, mean current <j> (A/m), and (given
    ``contact`` = the min and max of Phi on each contact node, see contact_lines) the contact-line
    monitor ``contact_phi_min``.  ``rho_x``, ``j_x``: rho and j_sub summed over valleys and subbands
    (Simulation.scalar_fields)."""
    s = model.scales
    Ns = VALLEY_DEGENERACY * rho_x * s.rho
    j = VALLEY_DEGENERACY * j_x * s.j
    row = {
        "step": int(step),
        "time_s": float(t * s.t),
        "dt_s": float(dt * s.t),
        "total_mass_per_m": trapezoid(Ns, model.dx * s.Lx),
        "mean_current_A_per_m": trapezoid(j, model.dx),
        "newton_iterations": int(newton_iterations),
    }
    if contact is not None:
        row["contact_phi_min"] = contact_phi_min(contact)
    return row


# The contact-line monitor (docs/iv.md §9-§10).  The contact rule of physics.md §7 carries a mode that
# grows from round-off on the contact nodes' inflow lines (valley 2, subband 1) and, on the small
# meshes measured, ends a run with a negative density after ~1-1.5 ps.  contact_phi_min is the most
# negative Phi on the two contact nodes (x = 0 and NX - 1, all lines), relative to the largest Phi
# there: healthy runs hold it at the WENO undershoot level (-1e-9 .. -1e-5 in the 3x33 diagnosis
# runs); the mode takes it through -1e-4 towards -1e-1 before a fault.  A run whose value falls below
# CONTACT_WARN is flagged in run.json (summary.contact_lines.warning) and its log.
CONTACT_WARN = -1.0e-3


def contact_lines(xp, Phi):
    """(min, max) of Phi on the two contact nodes, as one small array (read with the other fields)."""
    ends = Phi[0::Phi.shape[0] - 1] if Phi.shape[0] > 1 else Phi
    return xp.stack([ends.min(), ends.max()])


def contact_phi_min(contact) -> float:
    lo, hi = (float(v) for v in contact)
    return lo / hi if hi > 0 else float("nan")


def contact_summary(scalars: list[dict]) -> dict | None:
    """summary.contact_lines of run.json: the most negative contact_phi_min of the run, where, and
    whether it passed CONTACT_WARN."""
    rows = [r for r in scalars if r.get("contact_phi_min") is not None and r["contact_phi_min"] == r["contact_phi_min"]]
    if not rows:
        return None
    worst = min(rows, key=lambda r: r["contact_phi_min"])
    return {"phi_min_rel": worst["contact_phi_min"], "step": worst["step"], "t_ps": worst["time_s"] * 1e12,
            "final": rows[-1]["contact_phi_min"], "warn_below": CONTACT_WARN,
            "warning": bool(worst["contact_phi_min"] < CONTACT_WARN)}


FIELD_UNITS = {
    "x": "m", "z": "m", "w": "eV", "phi": "rad",
    "V": "V", "N": "m^-3", "N_D": "m^-3", "eps": "eV", "deps_dx": "eV/m", "rho": "m^-2",
    "j": "A/m", "chi": "m^-1/2", "Ns": "m^-2", "PhiHat": "1 (dimensionless, scaled by rho*/eps*)",
}


def write_fields(path, model, host: dict, t: float, step: int, attrs: dict | None = None) -> None:
    """HDF5 snapshot in physical units.  ``host`` holds NumPy arrays V, N, eps, deps_dx, rho, chi, j_sub."""
    s = model.scales
    data = {
        "x": model.x * s.Lx,
        "z": model.z * s.Z,
        "w": model.w * s.energy_eV,
        "V": host["V"] * s.V,
        "N": host["N"] * s.n,
        "N_D": model.N_D * s.n,
        "eps": host["eps"] * s.energy_eV,
        "deps_dx": host["deps_dx"] * s.energy_eV / s.Lx,
        "rho": host["rho"] * s.rho,
        "Ns": VALLEY_DEGENERACY * host["rho"].sum(axis=(1, 2)) * s.rho,
        "j": VALLEY_DEGENERACY * host["j_sub"].sum(axis=(1, 2)) * s.j,
        "chi": host["chi"] / np.sqrt(s.Z),
    }
    a = {"time_s": t * s.t, "step": int(step),
         "layout": "Phi-derived arrays in order i > nu > p (> l > m); V, N: (x, z)"}
    a.update(attrs or {})
    io.write_hdf5(path, data, attrs=a, units=FIELD_UNITS)


def quicklook(path, model, prof: pd.DataFrame, host: dict, t: float) -> None:
    """The run's quick-look figure: j(x) and N_s(x) from the profiles, and the potential V(x, z)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    s = model.scales
    x_nm = prof["x_m"].to_numpy() * 1e9
    fig, ax = plt.subplots(1, 3, figsize=(13, 3.6))
    ax[0].plot(x_nm, prof["j_total_A_per_m"], marker=".")
    ax[0].set(xlabel="x (nm)", ylabel="j (A/m)", title="current density j(x)")
    ax[1].semilogy(x_nm, prof["Ns_total_m-2"], marker=".")
    ax[1].set(xlabel="x (nm)", ylabel=r"$N_s$ (m$^{-2}$)", title=r"surface density $N_s(x)$")
    im = ax[2].pcolormesh(x_nm, model.z * s.Z * 1e9, (host["V"] * s.V).T, shading="auto", cmap="viridis")
    ax[2].set(xlabel="x (nm)", ylabel="z (nm)", title="potential V(x, z)")
    fig.colorbar(im, ax=ax[2], label="V (V)")
    fig.suptitle(f"{model.cfg['name']}: {model.N_sbn}x{model.NX}x{model.NZ}x{model.NW}x{model.NPHI}, "
                 f"t = {t * s.t * 1e12:.4f} ps")
    fig.tight_layout()
    io.save_figure(fig, path)
    plt.close(fig)
