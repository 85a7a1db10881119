"""The dimensionless DG-MOSFET model built from a validated configuration (physics.md §1-§6).

``Model`` holds host (NumPy) arrays of everything that does not change during a run: scales,
meshes, the device maps (doping, permittivity, barrier, masses, gates), the Kane factors s_nu(w),
the advection coefficient a1, the CFL maxima A_1 and A_3, and the scattering tables.  Phase
modules copy what they need to the backend once (``Model.on(backend)``).
"""
from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

import numpy as np

from solver import config as _config
from solver.bsp import constants as K
from solver.bsp.blocktri import MAX_NZ

SCHEMA_PATH = Path(__file__).with_name("schema.yaml")
TOL = 1e-12  # coordinate comparisons (nodes on 1/8, 0.25, ... classify the same on every mesh)


def schema() -> dict:
    return _config.load_schema(SCHEMA_PATH)


def load(path=None, overrides=()) -> dict:
    """Load, default-fill and validate a run configuration (``path`` None = all defaults)."""
    raw = _config.load_yaml(path) if path is not None else {}
    cfg = _config.validate(_config.apply_overrides(raw, overrides), schema())
    check_consistency(cfg)
    return cfg


def check_consistency(cfg: dict) -> None:
    """Cross-key rules a JSON schema cannot express."""
    d, m = cfg["device"], cfg["mesh"]
    L = d["L_source_nm"] + d["L_channel_nm"] + d["L_drain_nm"]
    if not d["gate_start_nm"] < d["gate_end_nm"] <= L + TOL:
        raise _config.ConfigError(
            f"config key 'device.gate_end_nm': {d['gate_end_nm']} must be > device.gate_start_nm "
            f"({d['gate_start_nm']}) and <= the device length ({L} nm)")
    if m["NZ"] < m["N_sbn"] + 3:
        raise _config.ConfigError(f"config key 'mesh.NZ': {m['NZ']} must exceed mesh.N_sbn + 2 = {m['N_sbn'] + 2}")
    t = cfg["time"]
    if t["t_end_ps"] is None and t["steps"] is None:
        raise _config.ConfigError("config key 'time': set t_end_ps or steps")
    if cfg["numerics"]["linsys"] == "block_cr" and m["NZ"] > MAX_NZ and cfg["numerics"]["backend"] in ("cupy", "auto"):
        # (the variant keys choose among CUDA kernels: numpy and numba runs ignore this one)
        raise _config.ConfigError(
            f"config key 'numerics.linsys': block_cr needs mesh.NZ <= {MAX_NZ} (got {m['NZ']}); use auto, batched_cr or dense")


# Phi (N_sbn x 3 valleys x NX x NW x NPHI doubles) dominates memory; a numpy run peaks at about 10
# arrays of its size, and 16 copies leave a margin (the estimate workflow/rules/common.smk gives SLURM).
PHI_COPIES = 16


def memory_need_bytes(cfg: dict) -> int:
    m = cfg["mesh"]
    return PHI_COPIES * 8 * m["N_sbn"] * 3 * m["NX"] * m["NW"] * m["NPHI"]


def free_memory_bytes(backend) -> tuple[int, str]:
    """Free memory where the run's arrays live: the GPU's for cupy, else the host's (MemAvailable)."""
    if backend.is_gpu:
        return int(backend.xp.cuda.runtime.memGetInfo()[0]), "free GPU memory"
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024, "available host memory"
    except OSError:
        pass
    return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"), "free host memory"


def check_memory(cfg: dict, backend) -> None:
    """Refuse, before anything is allocated, a mesh whose estimate exceeds the free memory."""
    need = memory_need_bytes(cfg)
    free, where = free_memory_bytes(backend)
    if need > free:
        m = cfg["mesh"]
        mesh = "x".join(str(m[k]) for k in ("N_sbn", "NX", "NZ", "NW", "NPHI"))
        raise _config.ConfigError(
            f"config key 'mesh': {mesh} needs about {need / 2**30:.1f} GiB ({PHI_COPIES} copies of Phi, "
            f"N_sbn x 3 x NX x NW x NPHI doubles) but {free / 2**30:.1f} GiB of {where} is left; "
            "allowed: a smaller mesh or a machine with more memory")


def gate_volts(cfg: dict) -> tuple[float, float]:
    """(bottom z = 0, top z = 1) gate voltages in V: bias.V_G_bottom / V_G_top, each V_G where null."""
    b = cfg["bias"]
    return (b["V_G"] if b["V_G_bottom"] is None else b["V_G_bottom"],
            b["V_G"] if b["V_G_top"] is None else b["V_G_top"])


@dataclass
class Scales:
    Lx: float  # m
    Z: float  # m
    T: float  # K

    @property
    def energy_J(self):
        return K.K_B * self.T

    @property
    def energy_eV(self):
        return self.energy_J / K.Q

    @property
    def V(self):  # volts
        return self.energy_J / K.Q

    @property
    def t(self):  # s
        return self.Lx * math.sqrt(K.M_E / self.energy_J)

    @property
    def v(self):  # m/s
        return math.sqrt(self.energy_J / K.M_E)

    @property
    def rho(self):  # m^-2
        return K.M_E * self.energy_J / K.HBAR**2

    @property
    def n(self):  # m^-3
        return self.rho / self.Z

    @property
    def j(self):  # A/m
        return K.Q * self.rho * self.v


@dataclass
class Model:
    cfg: dict
    device_cache: dict = field(default_factory=dict, repr=False)

    # ------------------------------------------------------------------ scales, constants
    @cached_property
    def scales(self) -> Scales:
        d = self.cfg["device"]
        Lx = (d["L_source_nm"] + d["L_channel_nm"] + d["L_drain_nm"]) * 1e-9
        Z = (2 * d["t_ox_nm"] + d["t_si_nm"]) * 1e-9
        return Scales(Lx, Z, d["temperature_K"])

    @property
    def cs1(self):
        s = self.scales
        return K.HBAR**2 / (K.M_E * s.Z**2 * s.energy_J)

    @property
    def eta(self):
        return self.scales.Z / self.scales.Lx

    @property
    def cp(self):
        s = self.scales
        return K.Q * s.n * s.Z**2 / (s.V * K.EPS_0)

    @property
    def alpha(self):
        """Dimensionless Kane factor alpha~ = alpha k_B T."""
        return self.cfg["physics"]["kane_alpha_per_eV"] * self.scales.energy_eV

    @property
    def masses(self) -> np.ndarray:
        return np.array(K.VALLEY_MASSES)  # (3, 3): nu, (x, y, z)

    @property
    def sqrt_mxmy(self) -> np.ndarray:
        m = self.masses
        return np.sqrt(m[:, 0] * m[:, 1])

    # ------------------------------------------------------------------ meshes
    @property
    def N_sbn(self):
        return self.cfg["mesh"]["N_sbn"]

    @property
    def NX(self):
        return self.cfg["mesh"]["NX"]

    @property
    def NZ(self):
        return self.cfg["mesh"]["NZ"]

    @property
    def NW(self):
        return self.cfg["mesh"]["NW"]

    @property
    def NPHI(self):
        return self.cfg["mesh"]["NPHI"]

    @property
    def shape(self):
        """Shape of Phi, memory order i > nu > p > l > m (Table 1 of paper 000)."""
        return (self.NX, K.N_VALLEYS, self.N_sbn, self.NW, self.NPHI)

    @cached_property
    def x(self):
        return np.linspace(0.0, 1.0, self.NX)

    @cached_property
    def z(self):
        return np.linspace(0.0, 1.0, self.NZ)

    @property
    def dx(self):
        return 1.0 / (self.NX - 1)

    @property
    def dz(self):
        return 1.0 / (self.NZ - 1)

    @property
    def w_max(self):
        return self.cfg["mesh"]["w_max_eV"] / self.scales.energy_eV

    @property
    def dw(self):
        return self.w_max / (self.NW - 1)

    @cached_property
    def w(self):
        return (np.arange(self.NW) + 0.5) * self.dw

    @property
    def dphi(self):
        return 2.0 * math.pi / self.NPHI

    @cached_property
    def phi(self):
        return np.arange(self.NPHI) * self.dphi

    # ------------------------------------------------------------------ device maps
    @cached_property
    def _fractions(self):
        d = self.cfg["device"]
        L = d["L_source_nm"] + d["L_channel_nm"] + d["L_drain_nm"]
        Z = 2 * d["t_ox_nm"] + d["t_si_nm"]
        return {
            "ox_lo": d["t_ox_nm"] / Z,
            "ox_hi": (d["t_ox_nm"] + d["t_si_nm"]) / Z,
            "source": d["L_source_nm"] / L,
            "drain": (d["L_source_nm"] + d["L_channel_nm"]) / L,
            "gate_lo": d["gate_start_nm"] / L,
            "gate_hi": d["gate_end_nm"] / L,
        }

    @cached_property
    def oxide_z(self) -> np.ndarray:
        """Oxide nodes along z (interfaces included), physics.md §1."""
        f = self._fractions
        return (self.z <= f["ox_lo"] + TOL) | (self.z >= f["ox_hi"] - TOL)

    @cached_property
    def region_x(self) -> np.ndarray:
        """0 = source, 1 = channel, 2 = drain (junction nodes are high-doped)."""
        f = self._fractions
        r = np.ones(self.NX, dtype=np.int8)
        r[self.x <= f["source"] + TOL] = 0
        r[self.x >= f["drain"] - TOL] = 2
        return r

    @cached_property
    def gate_x(self) -> np.ndarray:
        """Gate (Dirichlet) nodes along x at j = 0 and NZ-1, only for 1 <= i <= NX-2."""
        f = self._fractions
        g = (self.x >= f["gate_lo"] - TOL) & (self.x <= f["gate_hi"] + TOL)
        g[0] = g[-1] = False
        return g

    @cached_property
    def N_D(self) -> np.ndarray:
        """Dimensionless doping (NX, NZ)."""
        d = self.cfg["device"]
        n = self.scales.n
        nx = np.where(self.region_x == 1, d["N_D_channel_m3"], d["N_D_contact_m3"]) / n
        return np.where(self.oxide_z[None, :], 0.0, nx[:, None])

    @cached_property
    def eps_r(self) -> np.ndarray:
        """Relative permittivity on the nodes (NX, NZ)."""
        p = self.cfg["physics"]
        ez = np.where(self.oxide_z, p["eps_r_ox"], p["eps_r_si"])
        return np.broadcast_to(ez, (self.NX, self.NZ)).copy()

    @cached_property
    def V_c(self) -> np.ndarray:
        """Conduction-band offset (dimensionless potential) along z: -barrier/V* in the oxide."""
        return np.where(self.oxide_z, -self.cfg["physics"]["barrier_eV"] / self.scales.V, 0.0)

    @cached_property
    def m_z(self) -> np.ndarray:
        """Confinement mass per valley along z (3, NZ): m_z,nu in Si, m_ox in the oxide."""
        mz = np.empty((K.N_VALLEYS, self.NZ))
        for nu in range(K.N_VALLEYS):
            mz[nu] = np.where(self.oxide_z, self.cfg["physics"]["m_ox"], self.masses[nu, 2])
        return mz

    @property
    def V_G(self) -> tuple[float, float]:
        """Dimensionless (bottom z = 0, top z = 1) gate voltages."""
        bot, top = gate_volts(self.cfg)
        return bot / self.scales.V, top / self.scales.V

    @property
    def V_DS(self) -> float:
        return self.cfg["bias"]["V_DS"] / self.scales.V

    @cached_property
    def int_ND_contact(self) -> float:
        """int N_D(0, z) dz by trapezoids on the z mesh (1.7317 for NZ = 65)."""
        return float(np.trapezoid(self.N_D[0], dx=self.dz))

    # ------------------------------------------------------------------ kinetic coefficients
    def s(self, w) -> np.ndarray:
        """Kane factor s_nu(w) = sqrt(m_x m_y)(1 + 2 alpha~ w), shape (3,) + w.shape."""
        w = np.asarray(w, dtype=float)
        return self.sqrt_mxmy.reshape((3,) + (1,) * w.ndim) * (1.0 + 2.0 * self.alpha * w)

    @cached_property
    def s_w(self) -> np.ndarray:
        """s_nu(w_l), shape (3, NW)."""
        return self.s(self.w)

    @cached_property
    def _speed(self) -> np.ndarray:
        """sqrt(2 w (1 + alpha~ w)), shape (NW,)."""
        return np.sqrt(2.0 * self.w * (1.0 + self.alpha * self.w))

    @cached_property
    def a1(self) -> np.ndarray:
        """a1_nu(w, phi), shape (3, NW, NPHI)."""
        mx = self.masses[:, 0]
        v = self._speed / (1.0 + 2.0 * self.alpha * self.w)
        return v[None, :, None] * np.cos(self.phi)[None, None, :] / np.sqrt(mx)[:, None, None]

    @cached_property
    def a3_factor(self) -> np.ndarray:
        """a3 / (d eps/dx) = sin(phi) / (sqrt(m_x) sqrt(2 w (1 + alpha~ w))), shape (3, NW, NPHI)."""
        mx = self.masses[:, 0]
        return np.sin(self.phi)[None, None, :] / (np.sqrt(mx)[:, None, None] * self._speed[None, :, None])

    @cached_property
    def A1(self) -> float:  # kept: a max over (3, NW, NPHI) costs the host ~40 us, asked every stage
        return float(np.abs(self.a1).max())

    @cached_property
    def A3(self) -> float:
        return float(np.abs(self.a3_factor).max())

    def dt_max(self, A_eps: float) -> float:
        """physics.md §8: 1/(A_1/dx + A_eps A_1/dw + A_eps A_3/dphi)."""
        return 1.0 / (self.A1 / self.dx + A_eps * self.A1 / self.dw + A_eps * self.A3 / self.dphi)

    @cached_property
    def maxwellian(self) -> np.ndarray:
        """M_nu(w_l) normalised by the discrete sum (physics.md §7), shape (3, NW)."""
        e = np.exp(-self.w)
        norm = self.dw * self.dphi * self.NPHI * (self.s_w * e[None, :]).sum(axis=1)
        return e[None, :] / norm[:, None]

    # ------------------------------------------------------------------ scattering tables
    @cached_property
    def phonons(self) -> list[dict]:
        table = self.cfg["physics"]["phonons"]
        return [dict(p) for p in (table if table is not None else K.PHONONS)]

    @cached_property
    def phonon_x(self) -> np.ndarray:
        """x_mu = Theta_mu / T (0 for the acoustic mode)."""
        T = self.scales.T
        return np.array([0.0 if p["kind"] == "acoustic" else p["temperature_K"] / T for p in self.phonons])

    @cached_property
    def phonon_C(self) -> np.ndarray:
        """Dimensionless prefactors C_mu (x kernel_scale), physics.md §6."""
        s = self.scales
        out = []
        for p in self.phonons:
            if p["kind"] == "acoustic":
                D = p["coupling"] * K.Q  # J
                c = K.M_E * s.energy_J * D**2 / (4 * math.pi**2 * K.HBAR**3 * s.Z * K.RHO_SI * K.U_L**2)
            else:
                D = p["coupling"] * 1e2 * K.Q  # eV/cm -> J/m
                omega = K.K_B * p["temperature_K"] / K.HBAR
                c = K.M_E * D**2 / (8 * math.pi**2 * K.HBAR**2 * K.RHO_SI * omega * s.Z)
            out.append(c * s.t * self.cfg["physics"]["kernel_scale"])
        return np.array(out)

    @cached_property
    def kane_ratio(self) -> np.ndarray:
        """R_ab = [sqrt(m_x m_y)_a (1 + 2 alpha~)] / [sqrt(m_x m_y)_b (1 + 2 alpha~)], shape (3, 3)."""
        k = self.sqrt_mxmy * (1.0 + 2.0 * self.alpha)
        return k[:, None] / k[None, :]

    def occupation(self, mu: int) -> np.ndarray:
        """Phonon occupation of mechanism mu: a scalar array for g-type, (3, 3) [a, b] = N^{a->b}
        for f-type (reference: valley-ordered; bose_einstein: plain)."""
        x = self.phonon_x[mu]
        be = 1.0 / math.expm1(x)
        if self.phonons[mu]["kind"] != "f" or self.cfg["physics"]["occupation"] == "bose_einstein":
            return np.full((3, 3), be) if self.phonons[mu]["kind"] == "f" else np.array(be)
        ex = math.exp(x)
        return (self.kane_ratio * ex + 1.0) / ((ex + 1.0) * (ex - 1.0))

    # ------------------------------------------------------------------ backends
    def on(self, backend, name: str):
        """Backend copy of a model array (cached per backend)."""
        key = (backend.name, name)
        if key not in self.device_cache:
            self.device_cache[key] = backend.asarray(np.ascontiguousarray(getattr(self, name)))
        return self.device_cache[key]
