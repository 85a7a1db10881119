"""Physical constants, silicon valley data and the phonon table of the DG-MOSFET model
(physics.md §2, §6; Tables 8 and 9 of paper 001).  Values are those of the authors' reference
implementation."""
import math

HBAR = 6.626068e-34 / (2.0 * math.pi)  # J s
M_E = 9.10938188e-31  # kg
Q = 1.60217656535e-19  # C
EPS_0 = 8.8541878176e-12  # F/m
K_B = 1.3806503e-23  # J/K

RHO_SI = 2329.0  # kg/m^3, silicon mass density
U_L = 9040.0  # m/s, longitudinal sound velocity

N_VALLEYS = 3  # valley pairs nu = 0, 1, 2 (each two-fold degenerate)
VALLEY_DEGENERACY = 2

# effective masses in m_e: x = transport, y = width, z = confinement (Table 9 of paper 001)
VALLEY_MASSES = (
    (0.98, 0.19, 0.19),
    (0.19, 0.98, 0.19),
    (0.19, 0.19, 0.98),
)

# The seven electron-phonon mechanisms (physics.md §6).  coupling: D_ac in eV for the acoustic
# mode, D_mu in eV/cm for the optical ones; temperature = Theta_mu = hbar omega_mu / k_B.
PHONONS = (
    {"name": "acoustic", "kind": "acoustic", "temperature_K": None, "coupling": 9.0},
    {"name": "g1", "kind": "g", "temperature_K": 140.0, "coupling": 0.5e8},
    {"name": "g2", "kind": "g", "temperature_K": 215.0, "coupling": 0.8e8},
    {"name": "g3", "kind": "g", "temperature_K": 720.0, "coupling": 11.0e8},
    {"name": "f1", "kind": "f", "temperature_K": 220.0, "coupling": 0.3e8},
    {"name": "f2", "kind": "f", "temperature_K": 500.0, "coupling": 2.0e8},
    {"name": "f3", "kind": "f", "temperature_K": 685.0, "coupling": 2.0e8},
)

DEFAULTS = {
    "temperature_K": 300.0,
    "eps_r_si": 11.7,
    "eps_r_ox": 3.9,
    "m_ox": 0.5,
    "kane_alpha_per_eV": 0.5,
    "barrier_eV": 3.15,
}
