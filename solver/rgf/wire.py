"""[100] silicon nanowire: layer blocks of the block-tridiagonal Hamiltonian, passivation, wire bands.

The wire is X-UC cubic cells long (x = [100]) and Ny x Nz cells in cross-section (y, z), with the
atoms of the cubic cells whose (y, z) lie in [0, Ny a) x [0, Nz a).  A cubic cell has 4 atomic
layers along x (x = 0, a/4, a/2, 3a/4), 2 atoms per layer per YZ cell, so every layer block has
size 20 Ny Nz (x2 with spin-orbit).  Nearest neighbours always sit in adjacent layers, so the
Hamiltonian is block tridiagonal with 4 distinct diagonal blocks D[t] and 4 couplings
C[t] = H(layer t, layer t+1) (C[3] joins layer 3 to layer 0 of the next cell).
Dangling bonds (neighbours outside the cross-section) are passivated by raising the sp3 hybrid
pointing along the missing bond by ``passivation_shift`` eV (Lee et al., PRB 69, 045316 (2004)).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from solver.rgf.tb import BONDS_A, NORB, TBParams, atom_onsite, hop, load_params

# atoms of a cubic cell in units of a/4: (x, y, z); sublattice A (fcc) when x in {0, 2}
CELL_ATOMS_Q = np.array([[0, 0, 0], [0, 2, 2], [1, 1, 1], [1, 3, 3], [2, 0, 2], [2, 2, 0], [3, 1, 3], [3, 3, 1]])
BONDS_Q = (BONDS_A * 4).astype(int)


@dataclass
class Wire:
    ny: int
    nz: int
    params: TBParams
    spin_orbit: bool = False
    passivation_shift: float = 20.0
    D: list = field(default_factory=list)  # 4 diagonal blocks
    C: list = field(default_factory=list)  # 4 couplings layer t -> t+1
    atoms: list = field(default_factory=list)  # per layer type: (n_atoms, 3) positions in a/4
    n_dangling: int = 0

    @property
    def spin(self) -> int:
        return 2 if self.spin_orbit else 1

    @property
    def block_size(self) -> int:
        return self.D[0].shape[0]

    @property
    def atoms_per_layer(self) -> int:
        return 2 * self.ny * self.nz


def _hybrid(d) -> np.ndarray:
    """sp3 hybrid along the unit vector d: (s + sqrt(3) d.p)/2 (10 orbital components)."""
    v = np.zeros(NORB)
    d = np.asarray(d, float) / np.linalg.norm(d)
    v[0] = 0.5
    v[1:4] = np.sqrt(3) / 2 * d
    return v


def build_wire(ny: int, nz: int, tb_set: str = "jancu1998", spin_orbit: bool = False, passivation_shift: float = 20.0,
               periodic: bool = False) -> Wire:
    """Layer blocks of an Ny x Nz [100] wire; ``periodic=True`` wraps y and z instead (a bulk
    supercell at k_y = k_z = 0, no passivation)."""
    params = load_params(tb_set)
    w = Wire(ny, nz, params, spin_orbit, passivation_shift)
    layers = []
    for t in range(4):
        base = CELL_ATOMS_Q[CELL_ATOMS_Q[:, 0] == t]
        pts = [(t, y + 4 * j, z + 4 * k) for j in range(ny) for k in range(nz) for (_, y, z) in base]
        layers.append(np.array(sorted(pts, key=lambda p: (p[1], p[2]))))
    w.atoms = layers
    index = [{(int(p[1]), int(p[2])): i for i, p in enumerate(L)} for L in layers]
    ns = w.spin
    m = NORB * ns
    e0 = atom_onsite(params, spin_orbit)
    dtype = complex if spin_orbit else float
    hops = {tuple(b): hop(params, b / 4.0, spin_orbit) for b in np.concatenate([BONDS_Q, -BONDS_Q])}
    ymax, zmax = 4 * ny, 4 * nz
    for t in range(4):
        na = len(layers[t])
        D = np.zeros((na * m, na * m), dtype)
        C = np.zeros((na * m, len(layers[(t + 1) % 4]) * m), dtype)
        bonds = BONDS_Q if t in (0, 2) else -BONDS_Q
        for i, (x, y, z) in enumerate(layers[t]):
            blk = e0.astype(dtype).copy()
            for b in bonds:
                yy, zz = y + b[1], z + b[2]
                if periodic:
                    yy, zz = yy % ymax, zz % zmax
                if not (0 <= yy < ymax and 0 <= zz < zmax):
                    h = _hybrid(b)
                    P = passivation_shift * np.outer(h, h)
                    blk = blk + (np.kron(P, np.eye(2)) if spin_orbit else P)
                    w.n_dangling += 1
                elif b[0] > 0:
                    j = index[(t + 1) % 4][(int(yy), int(zz))]
                    C[i * m:(i + 1) * m, j * m:(j + 1) * m] += hops[tuple(b)]
            D[i * m:(i + 1) * m, i * m:(i + 1) * m] = blk
        w.D.append(D)
        w.C.append(C)
    return w


def cell_hamiltonian(w: Wire):
    """(H00, H01) of the 4-layer wire unit cell; H01 couples the cell to the next one (+x)."""
    n = w.block_size
    H00 = np.zeros((4 * n, 4 * n), w.D[0].dtype)
    for t in range(4):
        H00[t * n:(t + 1) * n, t * n:(t + 1) * n] = w.D[t]
        if t < 3:
            H00[t * n:(t + 1) * n, (t + 1) * n:(t + 2) * n] = w.C[t]
            H00[(t + 1) * n:(t + 2) * n, t * n:(t + 1) * n] = w.C[t].conj().T
    H01 = np.zeros_like(H00)
    H01[3 * n:, :n] = w.C[3]
    return H00, H01


def wire_bands(w: Wire, ks) -> np.ndarray:
    """Band energies E_n(k), k in units of 2 pi / a (Brillouin zone [-1/2, 1/2])."""
    H00, H01 = cell_hamiltonian(w)
    out = []
    for k in ks:
        ph = np.exp(2j * np.pi * k)
        out.append(np.linalg.eigvalsh(H00 + H01 * ph + H01.conj().T * np.conj(ph)))
    return np.array(out)


def wire_gap(w: Wire, nk: int = 11) -> dict:
    """Band gap by bond counting: one occupied (bonding) band per Si-Si bond of the cell, x2 with
    spin-orbit (the passivated dangling hybrids are pushed up by the shift); k sampled on [0, 1/2]."""
    nat = 4 * w.atoms_per_layer
    n_dangling_cell = w.n_dangling  # build_wire counts the dangling bonds of one cell
    nv = (4 * nat - n_dangling_cell) // 2 * w.spin
    ks = np.linspace(0, 0.5, nk)
    E = wire_bands(w, ks)
    vb, cb = E[:, nv - 1], E[:, nv]
    return {"gap_eV": float(cb.min() - vb.max()), "vbm_eV": float(vb.max()), "cbm_eV": float(cb.min()),
            "k_vbm": float(ks[vb.argmax()]), "k_cbm": float(ks[cb.argmin()]), "n_valence_bands": nv}
