"""Layout definitions of the BSP solver's arrays (Table 1 of paper 000).

Every array is a C-ordered (row-major) NumPy/CuPy array; ``shape`` lists its axes from the
slowest to the fastest varying index, so the memory order of Phi is i > nu > p > l > m (m
fastest) as in the paper.  The solver modules allocate with :func:`shape_of`; the workflow's
Table 1 is generated from :data:`LAYOUTS`, so it never drifts from what runs.

Symbols: ``NX`` x nodes (index i), ``3`` valleys (nu), ``N_sbn`` subbands (p), ``NW`` energies
(l), ``NPHI`` angles (m), ``NZ`` z nodes (j); a primed symbol is the second index of a pair.
"""
from __future__ import annotations

from dataclasses import dataclass

# index letter of each symbol (paper 000 notation)
INDEX = {"NX": "i", "3": "nu", "N_sbn": "p", "NW": "l", "NPHI": "m", "NZ": "j",
         "3'": "nu'", "N_sbn'": "p'", "NZ'": "j'"}


@dataclass(frozen=True)
class Layout:
    name: str           # name in the solver
    paper: str | None   # the paper's symbol in Table 1 of 000 (None: not in the paper's table)
    shape: tuple        # axis symbols, slowest first (C order)
    description: str
    paper_order: tuple | None = None  # the paper's order (slowest first), where it differs

    @property
    def order(self) -> str:
        """Memory order as in the paper, e.g. 'i > nu > p > l > m' (slowest first)."""
        return " > ".join(INDEX[s] for s in self.shape)

    @property
    def ndim(self) -> int:
        return len(self.shape)


LAYOUTS: tuple[Layout, ...] = (
    Layout("Phi", "Phi_{nu,p,i,l,m}", ("NX", "3", "N_sbn", "NW", "NPHI"),
           "unknown Phi = s_nu(w) f_{nu,p}"),
    Layout("rhs", "H_{nu,p,i,l,m}", ("NX", "3", "N_sbn", "NW", "NPHI"),
           "BTE right-hand side H = D + Q (transport D and collision Q use the same layout)"),
    Layout("eps", "eps_{nu,p,i}", ("NX", "3", "N_sbn"), "subband energies eps_{nu,p}(x_i)"),
    Layout("deps_dx", None, ("NX", "3", "N_sbn"), "d eps_{nu,p}/dx at x_i"),
    Layout("rho", "rho_{nu,p,i}", ("NX", "3", "N_sbn"), "subband surface densities"),
    Layout("chi", "psi_{nu,p,i,j}", ("NX", "3", "N_sbn", "NZ"), "wave functions chi_{nu,p}(x_i, z_j)"),
    Layout("PhiHat", "PhiHat_{nu,p,i,l}", ("NX", "3", "N_sbn", "NW"),
           "Phi integrated over phi (input of the scattering gain)"),
    Layout("W", "W_{nu,p,nu',p',i}", ("NX", "3", "N_sbn", "3'", "N_sbn'"),
           "overlap integrals int chi_{nu,p}^2 chi_{nu',p'}^2 dz"),
    Layout("V", "V_{i,j}", ("NX", "NZ"), "electrostatic potential"),
    Layout("N", "N_{nu,p,i,j}", ("NX", "NZ"),
           "volume density N = 2 sum rho chi^2 (the solver stores the total over nu, p)",
           paper_order=("NX", "NZ", "3", "N_sbn")),
    Layout("N_D", None, ("NX", "NZ"), "doping"),
    Layout("eps_r", None, ("NX", "NZ"), "relative permittivity on the nodes"),
)

BY_NAME = {lay.name: lay for lay in LAYOUTS}


def sizes(model) -> dict:
    """Symbol -> length for a :class:`solver.bsp.model.Model` (or any object with the mesh attributes)."""
    out = {"NX": model.NX, "NZ": model.NZ, "NW": model.NW, "NPHI": model.NPHI, "N_sbn": model.N_sbn, "3": 3}
    out.update({"3'": 3, "N_sbn'": model.N_sbn, "NZ'": model.NZ})
    return out


def shape_of(name: str, model) -> tuple[int, ...]:
    """Concrete shape of array ``name`` for ``model``."""
    s = sizes(model)
    return tuple(int(s[sym]) for sym in BY_NAME[name].shape)


def table(model=None) -> list[dict]:
    """Rows of Table 1: name, paper symbol, shape symbols, memory order (slowest first) and, given a
    model, the concrete shape and size in MiB (float64)."""
    rows = []
    for lay in LAYOUTS:
        r = {
            "array": lay.name,
            "paper_symbol": lay.paper or "",
            "ndim": lay.ndim,
            "shape": "(" + ", ".join(lay.shape) + ")",
            "memory_order": lay.order,
            "fastest_index": INDEX[lay.shape[-1]],
            "paper_order": " > ".join(INDEX[s] for s in lay.paper_order) if lay.paper_order else lay.order,
            "description": lay.description,
        }
        if model is not None:
            shp = shape_of(lay.name, model)
            n = 1
            for d in shp:
                n *= d
            r["shape_concrete"] = "x".join(map(str, shp))
            r["MiB_float64"] = round(n * 8 / 2**20, 3)
        rows.append(r)
    return rows
