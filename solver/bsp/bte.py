"""The BTE right-hand side and the TVD-RK3 stage combination (physics.md §4, §7, §8; phase BTE).

    dPhi/dt = H(Phi) = -(d_x(a1 Phi) + d_w(a2 Phi) + d_phi(a3 Phi)) + G - L

``rhs`` evaluates H on the data of one RK stage, timed as the nested phases ``WENO_x``,
``WENO_w``, ``WENO_phi``, ``scat_gain`` and ``scat_loss`` (the caller opens ``BTE``).
``rk3_combine`` is the Shu-Osher TVD-RK3 update (paper 000, eqs. 10-12):

    s = 0: Phi^1   = Phi^0 + dt H^0
    s = 1: Phi^2   = 3/4 Phi^0 + 1/4 (Phi^1 + dt H^1)
    s = 2: Phi^n+1 = 1/3 Phi^0 + 2/3 (Phi^2 + dt H^2)

``advance`` runs one stage (phases above plus ``RK``).  With the RK fast path (cupy,
numerics.bte_kernels fast) H is never formed: the terms G, Lc and the three WENO terms go to one
kernel that writes Phi^{s+1} and its densities (DENS); ``rk_update`` is that path's reference.
With the fused fast path RK_wphi (cupy) the same kernel also forms the w and phi terms, so the
phases WENO_w and WENO_phi run inside ``RK``; ``stage_update`` is its reference.  With
numerics.bte_graph (cupy, default false; ``graphed``) the whole stage (scat_gain, scat_loss, WENO_x
and the fused kernel) is one replay of a CUDA graph, timed as ``RK``, on the graph's buffers: the
Phi, rho and PhiHat it returns stay valid until two stages later (kernels/cuda/bte_graph.py).
"""
from __future__ import annotations

from contextlib import nullcontext
from dataclasses import dataclass
from typing import Any

from solver.bsp import dens as _dens
from solver.bsp import kernels as _kernels
from solver.bsp import scattering as _scat
from solver.bsp import weno


@dataclass
class StageData:
    """What the right-hand side needs besides Phi (backend arrays unless noted).

    eps:     (NX, 3, N_sbn) subband levels of the stage (scattering energies).
    deps_dx: (NX, 3, N_sbn) d eps/dx of the stage (a2, a3).
    W:       (NX, 3, N_sbn, 3, N_sbn) overlap integrals from the stage's chi (scattering.overlap).
    PhiHat:  (NX, 3, N_sbn, NW) dphi sum_m Phi of the stage (dens.dens).
    rho:     (NX, 3, N_sbn) dw dphi sum Phi of the stage (dens.dens); rho[0], rho[-1] enter the
             inflow ghosts.
    rho_eq:  (NX, 3, N_sbn) THERMEQUIL densities (only rho_eq[0] and rho_eq[-1] are used).
    A_eps:   max |d eps/dx| (float or 0-d array): phi-splitting alpha = A_eps * A_3.
    closed:  True = zero flux through both contact faces (mass-conservation checks).
    scattering: include G - L (None = config key physics.scattering).
    mechanisms: subset of phonon mechanism indices (None = all; for checks).
    """
    eps: Any
    deps_dx: Any
    W: Any
    PhiHat: Any
    rho: Any
    rho_eq: Any
    A_eps: Any
    closed: bool = False
    scattering: bool | None = None
    mechanisms: tuple | None = None


def _phase(timer, name):
    return timer.phase(name) if timer is not None else nullcontext()


def x_term(model, backend, Phi, sd: StageData):
    """The WENO x-derivative term d_x(a1 Phi) of the stage (phase WENO_x).  It needs only Phi,
    rho and rho_eq of the stage (not the ITER results), so it can be formed before ITER (paper 000,
    section 3.4: numerics.overlap)."""
    return weno.weno_x(model, backend, Phi, sd.rho_eq[0], sd.rho_eq[-1], sd.rho[0], sd.rho[-1],
                        closed=sd.closed)


def _scattering_on(model, sd: StageData) -> bool:
    if sd.scattering is None:
        return bool(model.cfg["physics"].get("scattering", True))
    return sd.scattering


def rhs(model, backend, Phi, sd: StageData, timer=None, dx=None):
    """H(Phi) = -(WENO x + w + phi) + G - L, a new array of Phi's shape.  ``dx``: the x term of
    this Phi and stage, already computed (``x_term``; it is consumed), else computed here."""
    xp = backend.xp
    scat = _scattering_on(model, sd)
    if scat:
        with _phase(timer, "scat_gain"):
            G = _scat.scat_gain(model, backend, sd.PhiHat, sd.eps, sd.W, sd.mechanisms)
        with _phase(timer, "scat_loss"):
            Lc = _scat.scat_loss(model, backend, sd.eps, sd.W, sd.mechanisms)
            out = Lc[..., None] * Phi
            del Lc
            xp.subtract(G[..., None], out, out=out)
            del G
    with _phase(timer, "WENO_x") if dx is None else nullcontext():
        t = x_term(model, backend, Phi, sd) if dx is None else dx
        if scat:
            out -= t
        else:
            out = xp.negative(t, out=t)
        del t
    with _phase(timer, "WENO_w"):
        t = weno.weno_w(model, backend, Phi, sd.deps_dx)
        out -= t
        del t
    with _phase(timer, "WENO_phi"):
        t = weno.weno_phi(model, backend, Phi, sd.deps_dx, sd.A_eps)
        out -= t
        del t
    return out


def rhs_parts(model, backend, Phi, sd: StageData, timer=None, dx=None, w_phi=True):
    """The parts of H, for the RK fast path: (G, Lc, (x, w, phi terms)); G and Lc are None
    without scattering.  Phases and ``dx`` as ``rhs``.  ``w_phi=False`` (the fused kernel forms
    the w and phi terms itself): (G, Lc, x term)."""
    G = Lc = None
    if _scattering_on(model, sd):
        with _phase(timer, "scat_gain"):
            G = _scat.scat_gain(model, backend, sd.PhiHat, sd.eps, sd.W, sd.mechanisms)
        with _phase(timer, "scat_loss"):
            Lc = _scat.scat_loss(model, backend, sd.eps, sd.W, sd.mechanisms)
    with _phase(timer, "WENO_x") if dx is None else nullcontext():
        tx = x_term(model, backend, Phi, sd) if dx is None else dx
    if not w_phi:
        return G, Lc, tx
    with _phase(timer, "WENO_w"):
        tw = weno.weno_w(model, backend, Phi, sd.deps_dx)
    with _phase(timer, "WENO_phi"):
        tphi = weno.weno_phi(model, backend, Phi, sd.deps_dx, sd.A_eps)
    return G, Lc, (tx, tw, tphi)


def advance(model, backend, s, Phi0, Phi, sd: StageData, dt, timer=None, dx=None):
    """RK stage s on ``Phi``: (Phi^{s+1}, dens), dens = (rho, PhiHat) of Phi^{s+1} where the RK
    fast path formed them on the way, else None (the caller runs DENS).  Phases: those of ``rhs``
    and ``RK``."""
    fast = _kernels.lookup(model, backend, "RK")
    if fast is None:
        L = rhs(model, backend, Phi, sd, timer=timer, dx=dx)
        with _phase(timer, "RK"):
            return rk3_combine(s, Phi0, Phi, L, dt), None
    fused = _kernels.lookup(model, backend, "RK_wphi")
    if fused is not None and graphed(model, backend):
        from solver.bsp.kernels.cuda import bte_graph
        if bte_graph.usable(Phi):
            with _phase(timer, "RK"):
                Phi1, rho, PhiHat = bte_graph.stage(model, backend, s, Phi0, Phi, sd, dt, _scattering_on(model, sd),
                                                    dx=dx)
            return Phi1, (rho, PhiHat)
    if fused is not None:
        G, Lc, tx = rhs_parts(model, backend, Phi, sd, timer=timer, dx=dx, w_phi=False)
        with _phase(timer, "RK"):
            Phi1, rho, PhiHat = fused(model, backend, s, Phi0, Phi, G, Lc, tx, sd.deps_dx, sd.A_eps, dt)
        return Phi1, (rho, PhiHat)
    G, Lc, terms = rhs_parts(model, backend, Phi, sd, timer=timer, dx=dx)
    with _phase(timer, "RK"):
        Phi1, rho, PhiHat = fast(model, backend, s, Phi0, Phi, G, Lc, terms, dt)
    return Phi1, (rho, PhiHat)


def graphed(model, backend) -> bool:
    """numerics.bte_graph where the fused stage runs (cupy, numerics.bte_kernels fast / fast2): the stage
    replayed from a CUDA graph (solver/bsp/kernels/cuda/bte_graph.py) and W by one kernel; either contact
    rule (WENO_x's hybrid inflow shape is a cached device array, its flag a launch argument)."""
    return (backend.name == "cupy" and bool(model.cfg.get("numerics", {}).get("bte_graph", False))
            and _kernels.lookup(model, backend, "RK_wphi") is not None)


def stage_update(model, backend, s, Phi0, Phi, G, Lc, tx, deps_dx, A_eps, dt):
    """Reference of the fused stage kernel (phase key RK_wphi): the WENO w and phi terms of Phi,
    then ``rk_update`` with the x term ``tx``: (Phi^{s+1}, rho, PhiHat)."""
    terms = (tx, weno.weno_w(model, backend, Phi, deps_dx), weno.weno_phi(model, backend, Phi, deps_dx, A_eps))
    return rk_update(model, backend, s, Phi0, Phi, G, Lc, terms, dt)


def rk_update(model, backend, s, Phi0, Phi, G, Lc, terms, dt):
    """Reference of the RK fast path: H = G - Lc Phi - (x + w + phi terms) as ``rhs`` sums it
    (G, Lc None: no scattering), ``rk3_combine`` and DENS of the result: (Phi^{s+1}, rho, PhiHat)."""
    xp = backend.xp
    if G is not None:
        H = Lc[..., None] * Phi
        xp.subtract(G[..., None], H, out=H)
        H -= terms[0]
    else:
        H = xp.negative(terms[0])
    for t in terms[1:]:
        H -= t
    Phi1 = rk3_combine(s, Phi0, Phi, H, dt)
    rho, PhiHat = _dens.dens(model, backend, Phi1)
    return Phi1, rho, PhiHat


RK3 = ((1.0, 0.0), (0.25, 0.75), (2.0 / 3.0, 1.0 / 3.0))  # (c, 1 - c): Phi^{s+1} = (1-c) Phi^0 + c (Phi^s + dt H)


def rk3_combine(s, Phi0, Phi, L, dt):
    """Shu-Osher TVD-RK3 stage s (0, 1, 2): (1-c) Phi0 + c (Phi + dt L).

    ``L`` (the right-hand side of stage s, computed on ``Phi``) is consumed: the result is
    written into its buffer and returned.
    """
    c, c0 = RK3[s]
    L *= dt
    L += Phi
    if s > 0:
        L *= c
        L += c0 * Phi0
    return L


def initial_phi(model, backend, rho_eq, s_w, M, NPHI):
    """BTE_init: Phi(x, nu, p, w, phi) = rho_eq(x, nu, p) s_w(nu, w) M(nu, w), constant in phi, C-contiguous
    (NX, 3, N_sbn, NW, NPHI)."""
    xp = backend.xp
    prof = s_w * M  # (3, NW)
    Phi = rho_eq[:, :, :, None, None] * prof[None, :, None, :, None] * xp.ones(NPHI)
    return xp.ascontiguousarray(Phi)
