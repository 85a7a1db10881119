"""Documentation artifacts generated from the solver's own model (never retyped):

- Fig 1 of papers 000/001: device geometry, doping, oxide and gates (:func:`geometry_figure`);
- Tables 8 and 9 of paper 001: constants, oxide/silicon parameters, Kane factors and masses
  (:func:`table8_constants`, :func:`table9_valleys`), plus the derived scales of the run;
- Table 1 of paper 000: array memory orders (:func:`table1_layout`, from :mod:`solver.bsp.layout`).
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from solver.bsp import constants as K
from solver.bsp import layout
from solver.bsp import model as _model


def make_model(config_path=None, overrides=()) -> "_model.Model":
    """A Model from a run configuration (path + ``key=value`` overrides), validated."""
    return _model.Model(_model.load(config_path, overrides))


# ---------------------------------------------------------------------------------- Table 8
def table8_constants(m: "_model.Model") -> pd.DataFrame:
    """Table 8 of paper 001 (and the constants of physics.md §2) from the model's configuration."""
    d, p = m.cfg["device"], m.cfg["physics"]
    rows = [
        ("Confinement potential V_c in the SiO2 region", "V_c,ox", p["barrier_eV"], "eV"),
        ("Confinement potential V_c in the Si region", "V_c,Si", 0.0, "eV"),
        ("Relative permittivity in the Si region", "eps_R,Si", p["eps_r_si"], "x eps_0"),
        ("Relative permittivity in the SiO2 region", "eps_R,ox", p["eps_r_ox"], "x eps_0"),
        ("m_x and m_z in the SiO2 region", "m_ox", p["m_ox"], "x m_e"),
        ("N_D in source and drain regions", "N_D,contact", d["N_D_contact_m3"], "m^-3"),
        ("N_D in the channel region", "N_D,channel", d["N_D_channel_m3"], "m^-3"),
        ("N_D out of source, drain and channel (oxide)", "N_D,ox", float(m.N_D[:, m.oxide_z].max(initial=0.0)) * m.scales.n, "m^-3"),
        ("Electron mass", "m_e", K.M_E, "kg"),
        ("Vacuum dielectric constant", "eps_0", K.EPS_0, "F/m"),
        ("Elementary charge (J per eV)", "q", K.Q, "C"),
        ("Reduced Planck constant", "hbar", K.HBAR, "J s"),
        ("Boltzmann constant", "k_B", K.K_B, "J/K"),
        ("Lattice temperature", "T", d["temperature_K"], "K"),
        ("Si mass density", "rho_Si", K.RHO_SI, "kg/m^3"),
        ("Longitudinal sound velocity", "u_l", K.U_L, "m/s"),
        ("Kane non-parabolicity (every valley)", "alpha", p["kane_alpha_per_eV"], "1/eV"),
    ]
    return pd.DataFrame(rows, columns=["description", "symbol", "value", "unit"])


def table_scales(m: "_model.Model") -> pd.DataFrame:
    """Scales and derived dimensionless constants of the run (physics.md §3)."""
    s = m.scales
    rows = [
        ("x*", "L_x", s.Lx, "m"), ("z*", "Z", s.Z, "m"),
        ("energy eps*", "k_B T", s.energy_eV, "eV"), ("potential V*", "k_B T / q", s.V, "V"),
        ("time t*", "L_x sqrt(m_e / k_B T)", s.t, "s"), ("velocity v*", "sqrt(k_B T / m_e)", s.v, "m/s"),
        ("surface density rho*", "m_e k_B T / hbar^2", s.rho, "m^-2"), ("volume density n*", "rho* / Z", s.n, "m^-3"),
        ("surface current j*", "q rho* v*", s.j, "A/m"),
        ("c_s1", "hbar^2 / (m_e Z^2 k_B T)", m.cs1, "1"), ("eta", "Z / L_x", m.eta, "1"),
        ("c_p", "q n* Z^2 / (V* eps_0)", m.cp, "1"), ("alpha~", "alpha k_B T", m.alpha, "1"),
    ]
    return pd.DataFrame(rows, columns=["scale", "definition", "value", "unit"])


# ---------------------------------------------------------------------------------- Table 9
def table9_valleys(m: "_model.Model") -> pd.DataFrame:
    """Table 9 of paper 001: Kane factor and effective masses per valley (Si region).  The paper
    numbers valleys 1..3; the solver's nu = 0..2."""
    p = m.cfg["physics"]
    rows = []
    for nu in range(K.N_VALLEYS):
        mx, my, mz = m.masses[nu]
        rows.append({
            "valley": nu + 1, "nu": nu,
            "kane_alpha_per_eV": p["kane_alpha_per_eV"], "kane_alpha_dimless": m.alpha,
            "m_x": mx, "m_y": my, "m_z": mz, "sqrt_mx_my": m.sqrt_mxmy[nu],
            "degeneracy": K.VALLEY_DEGENERACY,
        })
    return pd.DataFrame(rows)


# ---------------------------------------------------------------------------------- Table 1
def table1_layout(m: "_model.Model | None" = None) -> pd.DataFrame:
    return pd.DataFrame(layout.table(m))


# ---------------------------------------------------------------------------------- Fig 1
def geometry_figure(m: "_model.Model"):
    """Fig 1: the DG-MOSFET cross-section on the run's mesh: doping map (log10 N_D), oxide layers,
    gates (Dirichlet nodes) and the source / channel / drain regions with their junction nodes."""
    import matplotlib
    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt
    from matplotlib.colors import LogNorm

    s = m.scales
    x_nm = m.x * s.Lx * 1e9
    z_nm = m.z * s.Z * 1e9
    ND = m.N_D * s.n  # m^-3
    d = m.cfg["device"]
    fig, ax = plt.subplots(figsize=(7.5, 3.8))
    pos = np.where(ND > 0, ND, np.nan)
    mesh = ax.pcolormesh(x_nm, z_nm, pos.T, shading="nearest", cmap="viridis",
                         norm=LogNorm(vmin=np.nanmin(pos), vmax=np.nanmax(pos)))
    cb = fig.colorbar(mesh, ax=ax, pad=0.02)
    cb.set_label(r"$N_D$ [m$^{-3}$]")
    # oxide: shaded bands (from the node classification)
    ox = m.oxide_z
    ax.pcolormesh(x_nm, z_nm, np.broadcast_to(np.where(ox, 1.0, np.nan)[:, None], (m.NZ, m.NX)),
                  shading="nearest", cmap="Greys", vmin=0, vmax=3, alpha=0.6)
    # gates: Dirichlet nodes at j = 0 and NZ-1
    g = m.gate_x
    for zg in (z_nm[0], z_nm[-1]):
        ax.plot(x_nm[g], np.full(g.sum(), zg), color="crimson", lw=5, solid_capstyle="butt",
                label="gate" if zg == z_nm[0] else None)
    # regions
    for r, label in ((0, "source"), (1, "channel"), (2, "drain")):
        xs = x_nm[m.region_x == r]
        ax.text(xs.mean(), z_nm[-1] / 2, label, ha="center", va="center", color="w", fontsize=10, weight="bold")
    for xb in (d["L_source_nm"], d["L_source_nm"] + d["L_channel_nm"]):
        ax.axvline(xb, color="w", ls=":", lw=1)
    ax.text(x_nm[-1] / 2, z_nm[-1] - d["t_ox_nm"] / 2, "SiO$_2$", ha="center", va="center", fontsize=8)
    ax.text(x_nm[-1] / 2, d["t_ox_nm"] / 2, "SiO$_2$", ha="center", va="center", fontsize=8)
    b = m.cfg["bias"]
    ax.set_title(f"DG-MOSFET: L = {x_nm[-1]:g} nm, Z = {z_nm[-1]:g} nm, gates {d['gate_start_nm']:g}-{d['gate_end_nm']:g} nm, "
                 f"V_G = {b['V_G']:g} V, V_DS = {b['V_DS']:g} V", fontsize=8)
    ax.set_xlabel("x [nm] (source at x = 0, drain at x = L)")
    ax.set_ylabel("z [nm]")
    ax.set_xlim(x_nm[0] - 0.3, x_nm[-1] + 0.3)
    ax.set_ylim(z_nm[0] - 0.3, z_nm[-1] + 0.3)
    ax.legend(loc="upper right", fontsize=7, framealpha=0.8)
    fig.tight_layout()
    return fig
