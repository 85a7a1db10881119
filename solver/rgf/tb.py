"""sp3d5s* nearest-neighbour tight binding for Si: two-centre integrals by rotating bond-frame blocks.

Orbital order (per atom, per spin): s, px, py, pz, dxy, dyz, dzx, dx2-y2, dz2, s*.
The hopping block between an atom at the origin and its neighbour at ``d`` is
``U(R) H_bond U(R)^T`` where ``H_bond`` holds the sigma/pi/delta integrals for a bond along z and
``U(R)`` is the orbital representation of a rotation taking z onto ``d`` (p: the 3x3 rotation
itself; d: the l=2 representation obtained from the quadratic forms of the real d orbitals).
Spin-orbit: ``lambda L.sigma`` on the p block (lambda = Delta/3), basis (orbitals) x (up, down).
Energies in eV, lengths in units of the lattice constant a.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np
import yaml

DATA = Path(__file__).resolve().parent / "data" / "si_sp3d5s_star.yaml"
NORB = 10
S, PX, PY, PZ, DXY, DYZ, DZX, DX2, DZ2, SS = range(10)
ORBITALS = ("s", "px", "py", "pz", "dxy", "dyz", "dzx", "dx2-y2", "dz2", "s*")

# diamond: A at 0, B at (1,1,1)/4; the four bonds of an A atom (B atoms take the negatives)
BONDS_A = np.array([[1, 1, 1], [1, -1, -1], [-1, 1, -1], [-1, -1, 1]], float) / 4.0


@dataclass(frozen=True)
class TBParams:
    name: str
    onsite: dict
    hopping: dict
    so_lambda: float
    a_nm: float


@lru_cache(maxsize=None)
def _raw():
    with open(DATA) as f:
        return yaml.safe_load(f)


def load_params(name: str = "jancu1998") -> TBParams:
    raw = _raw()
    if name not in raw["sets"]:
        raise KeyError(f"unknown tight-binding set {name!r}; allowed: {', '.join(raw['sets'])}")
    s = raw["sets"][name]
    return TBParams(name, dict(s["onsite"]), dict(s["hopping"]), float(s["so_lambda"]), float(raw["lattice_constant_nm"]))


# -- rotations ---------------------------------------------------------------------------------
def _quad_forms() -> np.ndarray:
    """Symmetric matrices Q_a with d_a(r) ~ r^T Q_a r (all with Frobenius norm^2 = 3/2)."""
    Q = np.zeros((5, 3, 3))
    c = np.sqrt(3.0) / 2.0
    Q[0][0, 1] = Q[0][1, 0] = c  # xy
    Q[1][1, 2] = Q[1][2, 1] = c  # yz
    Q[2][2, 0] = Q[2][0, 2] = c  # zx
    Q[3][0, 0], Q[3][1, 1] = c, -c  # x2-y2
    Q[4] = np.diag([-0.5, -0.5, 1.0])  # 3z2-r2
    return Q


_Q = _quad_forms()


def rotation_to(d) -> np.ndarray:
    """A proper rotation R with R e_z = d/|d|."""
    d = np.asarray(d, float)
    z = d / np.linalg.norm(d)
    t = np.array([1.0, 0.0, 0.0]) if abs(z[0]) < 0.9 else np.array([0.0, 1.0, 0.0])
    x = t - z * (t @ z)
    x /= np.linalg.norm(x)
    y = np.cross(z, x)
    return np.column_stack([x, y, z])


def orbital_rotation(R) -> np.ndarray:
    """10x10 representation of R on (s, p, d, s*)."""
    U = np.zeros((NORB, NORB))
    U[S, S] = U[SS, SS] = 1.0
    U[1:4, 1:4] = R
    for b in range(5):
        RQ = R @ _Q[b] @ R.T
        for a in range(5):
            U[4 + a, 4 + b] = np.sum(_Q[a] * RQ) / 1.5
    return U


def bond_frame_block(h: dict) -> np.ndarray:
    """Hopping <alpha at 0|H|beta at d> for d along +z (Slater-Koster sigma/pi/delta)."""
    B = np.zeros((NORB, NORB))
    B[S, S] = h["ss_sigma"]
    B[SS, SS] = h["s*s*_sigma"]
    B[S, SS] = B[SS, S] = h["ss*_sigma"]
    B[S, PZ], B[PZ, S] = h["sp_sigma"], -h["sp_sigma"]
    B[SS, PZ], B[PZ, SS] = h["s*p_sigma"], -h["s*p_sigma"]
    B[S, DZ2] = B[DZ2, S] = h["sd_sigma"]
    B[SS, DZ2] = B[DZ2, SS] = h["s*d_sigma"]
    B[PZ, PZ] = h["pp_sigma"]
    B[PX, PX] = B[PY, PY] = h["pp_pi"]
    B[PZ, DZ2], B[DZ2, PZ] = h["pd_sigma"], -h["pd_sigma"]
    B[PX, DZX], B[DZX, PX] = h["pd_pi"], -h["pd_pi"]
    B[PY, DYZ], B[DYZ, PY] = h["pd_pi"], -h["pd_pi"]
    B[DZ2, DZ2] = h["dd_sigma"]
    B[DZX, DZX] = B[DYZ, DYZ] = h["dd_pi"]
    B[DXY, DXY] = B[DX2, DX2] = h["dd_delta"]
    return B


def hopping_block(params: TBParams, d) -> np.ndarray:
    """10x10 spinless hopping block from an atom at 0 to its neighbour at ``d``."""
    U = orbital_rotation(rotation_to(d))
    return U @ bond_frame_block(params.hopping) @ U.T


def onsite_block(params: TBParams) -> np.ndarray:
    o = params.onsite
    return np.diag([o["Es"], o["Ep"], o["Ep"], o["Ep"]] + [o["Ed"]] * 5 + [o["Es_star"]]).astype(float)


def so_block(lam: float) -> np.ndarray:
    """20x20 lambda L.sigma, basis (orbital) x (up, down) with the spin index fastest."""
    L = np.zeros((3, 3, 3), complex)  # L[k]_{ij} = -i eps_{kij} on (px, py, pz)
    eps = np.zeros((3, 3, 3))
    eps[0, 1, 2] = eps[1, 2, 0] = eps[2, 0, 1] = 1
    eps[0, 2, 1] = eps[2, 1, 0] = eps[1, 0, 2] = -1
    L = -1j * eps
    sig = [np.array([[0, 1], [1, 0]], complex), np.array([[0, -1j], [1j, 0]]), np.array([[1, 0], [0, -1]], complex)]
    P = sum(np.kron(L[k], sig[k]) for k in range(3))
    H = np.zeros((2 * NORB, 2 * NORB), complex)
    H[2:8, 2:8] = lam * P
    return H


def spinful(block: np.ndarray) -> np.ndarray:
    """Orbital block -> (orbital x spin) block, spin fastest."""
    return np.kron(block, np.eye(2))


def atom_onsite(params: TBParams, spin_orbit: bool) -> np.ndarray:
    e = onsite_block(params)
    if spin_orbit:
        return spinful(e).astype(complex) + so_block(params.so_lambda)
    return e


def hop(params: TBParams, d, spin_orbit: bool) -> np.ndarray:
    h = hopping_block(params, d)
    return spinful(h) if spin_orbit else h


# -- bulk --------------------------------------------------------------------------------------
def bulk_hamiltonian(params: TBParams, k, spin_orbit: bool = False) -> np.ndarray:
    """Bulk H(k) of the two-atom diamond cell; k in units of 2 pi / a."""
    k = np.asarray(k, float) * 2 * np.pi
    ea = atom_onsite(params, spin_orbit)
    m = ea.shape[0]
    HAB = np.zeros((m, m), complex)
    for d in BONDS_A:
        HAB += hop(params, d, spin_orbit) * np.exp(1j * k @ d)
    H = np.zeros((2 * m, 2 * m), complex)
    H[:m, :m] = ea
    H[m:, m:] = ea
    H[:m, m:] = HAB
    H[m:, :m] = HAB.conj().T
    return H


def bulk_bands(params: TBParams, kpts, spin_orbit: bool = False) -> np.ndarray:
    return np.array([np.linalg.eigvalsh(bulk_hamiltonian(params, k, spin_orbit)) for k in kpts])


def bulk_gap(params: TBParams, spin_orbit: bool = False) -> dict:
    """Indirect gap: VBM at Gamma, CBM minimised along Gamma-X; energies relative to the VBM."""
    from scipy.optimize import minimize_scalar

    nv = 8 if spin_orbit else 4  # valence bands (spin-degenerate pairs counted twice with SO)
    vbm = np.linalg.eigvalsh(bulk_hamiltonian(params, [0, 0, 0], spin_orbit))[nv - 1]

    def cb(x):
        return np.linalg.eigvalsh(bulk_hamiltonian(params, [x, 0, 0], spin_orbit))[nv]

    xs = np.linspace(0, 1, 41)
    x0 = xs[np.argmin([cb(x) for x in xs])]
    r = minimize_scalar(cb, bounds=(max(0, x0 - 0.05), min(1, x0 + 0.05)), method="bounded", options={"xatol": 1e-7})
    return {"gap_eV": float(r.fun - vbm), "kmin_2pi_over_a": float(r.x), "vbm_eV": float(vbm)}
