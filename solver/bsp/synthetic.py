"""Synthetic stage data for kernel benchmarks and tests: an eps(x) ladder, sine chi normalised on
the z mesh, the equilibrium densities, and an equilibrium Phi with 20 % multiplicative noise."""
from __future__ import annotations

import math

import numpy as np


def synthetic_stage(m, seed=0):
    """dict(eps, deps, chi, rho_eq, Phi) as host arrays for the model ``m``."""
    NX, NS = m.NX, m.N_sbn
    x = m.x[:, None, None]
    base = 1.5 * np.arange(NS)[None, None, :] ** 2 + np.array([0.0, 0.0, -1.0])[None, :, None]
    eps = base + 2.0 * np.sin(math.pi * x)
    deps = np.broadcast_to(2.0 * math.pi * np.cos(math.pi * x), eps.shape).copy()
    chi = np.zeros((NX, 3, NS, m.NZ))
    for p in range(NS):
        chi[:, :, p, :] = np.sin((p + 1) * math.pi * m.z)
    chi /= np.sqrt(m.dz * (chi**2).sum(-1, keepdims=True))
    rho_eq = m.sqrt_mxmy[None, :, None] * np.exp(-eps)
    rng = np.random.default_rng(seed)
    Phi = rho_eq[..., None, None] * (m.s_w * m.maxwellian)[None, :, None, :, None] * np.ones(m.NPHI)
    Phi *= 1.0 + 0.2 * rng.random(m.shape)
    return dict(eps=eps, deps=deps, chi=chi, rho_eq=rho_eq, Phi=Phi)
