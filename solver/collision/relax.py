"""Space-homogeneous relaxation df/dt = I(f) and the paper's test problems.

Time stepping as the paper: explicit, dt = cfl / max_i nu_i with cfl = 0.5 (forward Euler);
``scheme: rk2`` (Heun, two corrected stages, same dt) is offered for the rate checks (BKW,
Chapman-Enskog) where Euler's O(dt) error in a decay rate would mask the collision operator's.
Each stage is conservatively corrected, so mass, momentum and energy are conserved to rounding.
"""
from __future__ import annotations

import math
import time

import numpy as np

from solver.collision.operator import CollisionOperator, VelocityGrid, hs_frequency_exact, maxwellian


def bimaxwellian(grid: VelocityGrid, u1=(1.75, 0.25, 0.0), u2=(-1.25, 0.25, 0.0)):
    """f = exp(-(xi - u1)^2) + exp(-(xi - u2)^2) (paper 004, Fig 1)."""
    X = grid.mesh()
    return sum(np.exp(-sum((X[a] - u[a]) ** 2 for a in range(3))) for u in (u1, u2))


def paper_grid(N=20, h=0.5):
    """The documented Fig-1 domain: cell centres at u + (i - N/2) h with u = (0.25, 0.25, 0), i.e.
    for N = 20, h = 0.5: xi_x, xi_y in [-5, 5], xi_z in [-5.25, 4.75]; the cuts xi_y = 0.25,
    xi_z = 0 and xi_x = 0.25 are cell centres."""
    u = (0.25, 0.25, 0.0)
    return VelocityGrid(N, h, tuple(ua - (N // 2 + 0.5) * h for ua in u))


def bkw(grid: VelocityGrid, t):
    """BKW solution for Maxwell molecules (kernel 1/(4 pi)), n = 1, T_var = 1:
    f = (2 pi K)^{-3/2} exp(-v^2/(2K)) [(5K - 3)/(2K) + (1 - K)/(2K^2) v^2], K = 1 - exp(-t/6)."""
    K = 1.0 - math.exp(-t / 6.0)
    X = grid.mesh()
    v2 = X[0] ** 2 + X[1] ** 2 + X[2] ** 2
    return (2 * math.pi * K) ** -1.5 * np.exp(-v2 / (2 * K)) * ((5 * K - 3) / (2 * K) + (1 - K) / (2 * K * K) * v2)


def bkw_m4(t):
    """<|v|^4> of the BKW solution: 15 K (2 - K)."""
    K = 1.0 - math.exp(-t / 6.0)
    return 15.0 * K * (2.0 - K)


def relax(op: CollisionOperator, f0, t_end=None, steps=None, cfl=0.5, scheme="euler", snapshots=(),
          log=None):
    """Integrate from f0; returns (history rows, {time: f}) with per-step conservation errors."""
    xp = op.xp
    f = xp.asarray(f0, dtype=op.dtype)
    inv0 = op.invariants(f)
    scale = np.array([abs(inv0[0]), *(abs(inv0[0]) * math.sqrt(abs(inv0[4] / inv0[0])),) * 3, abs(inv0[4])])
    t, k = 0.0, 0
    rows, snaps = [], {}
    want = sorted(snapshots)

    def record(dt, cons):
        m = op.moments(f)
        m.update(t=t, step=k, dt=dt, cons_err=cons)
        rows.append(m)

    record(0.0, 0.0)
    if 0.0 in want:
        snaps[0.0] = op.backend.to_numpy(f).copy()
    while True:
        if steps is not None and k >= steps:
            break
        if t_end is not None and t >= t_end - 1e-12:
            break
        t0 = time.perf_counter()
        I1, parts = op(f, parts=True)
        dt = cfl / float(parts["nu"].max())
        if t_end is not None:
            dt = min(dt, t_end - t)
        # snapshots: land exactly on requested times
        nxt = [s for s in want if s > t + 1e-12]
        if nxt and t + dt > nxt[0]:
            dt = nxt[0] - t
        inv_before = op.invariants(f)
        if scheme == "euler":
            f = f + dt * I1
        elif scheme == "rk2":
            f1 = f + dt * I1
            f = 0.5 * (f + f1 + dt * op(f1))
        else:
            raise ValueError(f"scheme {scheme!r}: allowed euler, rk2")
        t += dt
        k += 1
        inv_after = op.invariants(f)
        cons = float(np.max(np.abs(inv_after - inv_before) / scale))
        record(dt, cons)
        for s in want:
            if abs(t - s) < 1e-12 and s not in snaps:
                snaps[s] = op.backend.to_numpy(f).copy()
        if log:
            r = rows[-1]
            log(f"step {k} t={t:.5f} dt={dt:.3e} Tx-T={r['Tx'] - r['T']:.4e} H={r['H']:.8e} "
                f"fmin={r['fmin']:.2e} cons={cons:.1e} ({time.perf_counter() - t0:.2f} s)")
    return rows, snaps


def chapman_enskog_rate(n, T):
    """p/mu for hard spheres of unit diameter (first Chapman-Enskog approximation), unit mass,
    temperature in the convention M ~ exp(-c^2/T) (kT/m = T/2): mu = 5/16 sqrt(T/(2 pi)),
    p = n T / 2, so p/mu = (8/5) n sqrt(2 pi T)."""
    return 1.6 * n * math.sqrt(2.0 * math.pi * T)


def fit_decay(t, y, lo=1e-1, hi=1e-3):
    """Late-time rate: least-squares slope of -ln|y| over the window |y|/|y0| in [hi, lo]."""
    t, y = np.asarray(t), np.abs(np.asarray(y))
    r = y / y[0]
    sel = (r <= lo) & (r >= hi)
    if sel.sum() < 3:
        return float("nan"), sel
    p = np.polyfit(t[sel], np.log(y[sel]), 1)
    return float(-p[0]), sel


def maxwellian_check(op: CollisionOperator, n=1.0, u=(0.0, 0.0, 0.0), T=1.0, bulk=1e-1):
    """Gain and loss of a Maxwellian vs M nu(c) (relative errors over the bulk cells
    M > bulk * max M): max and mean of the pointwise error, the signed extremes, the L1 error
    sum |G - M nu| / sum M nu over all cells, the error of the totals sum G / sum M nu - 1, and the
    residual of the *corrected* integral max |G - P L| / (M nu) in the bulk (what the dynamics sees:
    the correction P = a0 + a.c + a2 c^2 absorbs the smooth part of the gain's bias)."""
    grid = op.grid
    f = maxwellian(grid, n, u, T)
    Ic, parts = op(f, parts=True, corrected=True)
    G = op.backend.to_numpy(parts["gain"])
    L = op.backend.to_numpy(parts["loss"])
    Ic = op.backend.to_numpy(Ic)
    X = grid.mesh()
    c = np.sqrt(sum((X[a] - u[a]) ** 2 for a in range(3)))
    ex = f * hs_frequency_exact(c, n, T)
    sel = f > bulk * f.max()
    rg = G / ex - 1
    return {"n": n, "T": T, "bulk": bulk, "cells": int(sel.sum()), "h_over_sqrtT": grid.h / math.sqrt(T),
            "gain_err_max": float(np.abs(rg)[sel].max()),
            "gain_err_mean": float(np.abs(rg)[sel].mean()),
            "gain_err_min_signed": float(rg[sel].min()), "gain_err_max_signed": float(rg[sel].max()),
            "gain_err_l1": float(np.abs(G - ex).sum() / ex.sum()),
            "gain_err_total": float(G.sum() / ex.sum() - 1),
            "loss_err_max": float(np.abs(L / ex - 1)[sel].max()),
            "loss_err_mean": float(np.abs(L / ex - 1)[sel].mean()),
            "corrected_residual_max": float(np.abs(Ic / ex)[sel].max()),
            "correction_a0": float(parts["a"][0]), "correction_a2": float(parts["a"][4])}


def anisotropic_maxwellian(grid: VelocityGrid, n=1.0, T=(1.0, 1.0, 1.0), u=(0.0, 0.0, 0.0)):
    """n / (pi^{3/2} sqrt(Tx Ty Tz)) exp(-sum (xi_a - u_a)^2 / T_a) at the cell centres."""
    X = grid.mesh()
    return n * math.pi ** -1.5 / math.sqrt(T[0] * T[1] * T[2]) * np.exp(
        -sum((X[a] - u[a]) ** 2 / T[a] for a in range(3)))


def anisotropy_rate(op: CollisionOperator, n=1.0, T=1.0, eps=1e-3, u=(0.0, 0.0, 0.0)):
    """Instantaneous relaxation rate of T_x - T near equilibrium: -d(T_x - T)/dt / (T_x - T) for
    the anisotropic Maxwellian T_x = T(1 + 2 eps), T_y = T_z = T(1 - eps) (a pure traceless-stress
    perturbation), from one evaluation of the corrected operator, centred in eps (+-eps) to remove the
    O(eps^2) part.  For the continuous operator this is the Grad / first Chapman-Enskog value p/mu_1
    exactly (the Rayleigh quotient of L on c_x^2 - c^2/3), for any molecular model."""
    xp = op.xp
    num, den, mom = [], [], []
    for s in (1.0, -1.0):
        e = s * eps
        f = anisotropic_maxwellian(op.grid, n, (T * (1 + 2 * e), T * (1 - e), T * (1 - e)), u)
        m = op.moments(f)
        I = op(f)
        c2x = (op.xi[0] - m["ux"]) ** 2
        dTx = 2.0 * float((xp.asarray(I, dtype=xp.float64) * c2x).sum()) * op.grid.cell_volume / m["n"]
        num.append(dTx)
        den.append(m["Tx"] - m["T"])
        mom.append(m)
    rate = -(num[0] - num[1]) / (den[0] - den[1])
    nd, Td = mom[0]["n"], 0.5 * (mom[0]["T"] + mom[1]["T"])
    return {"rate": rate, "n": nd, "T": Td, "p_over_mu1": chapman_enskog_rate(nd, Td)}


def bkw_m4_rate(op: CollisionOperator, t):
    """d<|v|^4>/dt of the BKW solution at time t: discrete (one evaluation of the corrected
    operator on the BKW f sampled at the cell centres) against the exact 5 (1 - K)^2."""
    xp = op.xp
    f = bkw(op.grid, t)
    I = xp.asarray(op(f), dtype=xp.float64)
    m = op.moments(f)
    X = op.xi
    v2 = X[0] ** 2 + X[1] ** 2 + X[2] ** 2
    d = float((I * v2 * v2).sum()) * op.grid.cell_volume / m["n"]
    K = 1.0 - math.exp(-t / 6.0)
    return {"dm4dt": d / (m["T"] / 2.0) ** 2, "exact": 5.0 * (1.0 - K) ** 2, "m4": m["m4"] / (m["T"] / 2.0) ** 2,
            "m4_exact": bkw_m4(t)}


def nu0_edge(n, T):
    """nu(0) = 2 sqrt(pi) n sqrt(T): the hard-sphere collision frequency of a particle at rest
    relative to the gas, the lower edge of the continuous spectrum of the linearised operator.
    Late-time relaxation of any moment is pulled towards this rate (slow particles relax last)."""
    return 2.0 * math.sqrt(math.pi) * n * math.sqrt(T)


def local_rates(t, y):
    """-d ln|y| / dt between consecutive samples (at the interval midpoints)."""
    t, y = np.asarray(t, float), np.abs(np.asarray(y, float))
    return 0.5 * (t[1:] + t[:-1]), -np.diff(np.log(y)) / np.diff(t)
