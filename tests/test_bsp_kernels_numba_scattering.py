"""numba fast paths of the scattering phases (solver/bsp/kernels/numba/scattering.py) against the
array reference (numerics.kernels=array, the test oracle): gain and loss for all mechanisms and a
subset, both occupation rules.  CPU only; skipped without numba.
"""
import numpy as np
import pytest

numba = pytest.importorskip("numba")

from solver.backend import get_backend  # noqa: E402
from solver.bsp import dens, scattering  # noqa: E402

TOL = 1e-12


@pytest.fixture(scope="module")
def be():
    return get_backend("numba", threads=2)


@pytest.mark.parametrize("occupation", ["reference", "bose_einstein"])
def test_scattering_fast_matches_array(bte_cases, be, rng, occupation):
    m, ma = bte_cases.pair(NX=9, NS=3, NW=20, NPHI=8, extra=[f"physics.occupation={occupation}"])
    eps = rng.uniform(-4, 4, (m.NX, 3, m.N_sbn))
    chi = rng.standard_normal((m.NX, 3, m.N_sbn, m.NZ))
    W = scattering.overlap(ma, be, chi)
    Phi = rng.random(m.shape)
    _, PH = dens.dens(ma, be, Phi)
    for mech in (None, (0,), (1, 4, 6)):
        a, b = scattering.scat_gain(m, be, PH, eps, W, mech), scattering.scat_gain(ma, be, PH, eps, W, mech)
        assert bte_cases.rel(a, b) <= TOL, ("gain", mech, bte_cases.rel(a, b))
        a = scattering.scat_loss(m, be, eps, W, mech)
        b = scattering.scat_loss(ma, be, eps, W, mech)
        assert bte_cases.rel(a, b) <= TOL, ("loss", mech, bte_cases.rel(a, b))
    # the elastic intrasubband term lands on the top node exactly (the documented rule)
    Wd = np.zeros_like(W)
    for nu in range(3):
        for p in range(m.N_sbn):
            Wd[:, nu, p, nu, p] = W[:, nu, p, nu, p]
    a, b = scattering.scat_gain(m, be, PH, eps, Wd, (0,)), scattering.scat_gain(ma, be, PH, eps, Wd, (0,))
    assert bte_cases.rel(a, b) <= TOL
    assert np.all(a[..., -1] > 0)


@pytest.mark.parametrize("levels", ["grid", "near_grid", "wide"])
def test_gain_interpolation_ranges(bte_cases, be, rng, levels):
    """Energies on the w nodes (r_l integers: t = 0, the exact top node), a hair off them (r_l
    rounded onto a node: the fast path's node one below with t = 1) and far outside the w range
    (no contribution at all, or only node 0 / the top)."""
    m, ma = bte_cases.pair(NX=9, NS=3, NW=24, NPHI=8)
    k = rng.integers(-30, 31, (m.NX, 3, m.N_sbn)).astype(float)
    if levels == "near_grid":
        k += rng.choice([-1.0, 1.0], k.shape) * 1e-15 * np.maximum(np.abs(k), 1.0)
    elif levels == "wide":
        k *= 40.0
    eps = m.dw * k
    chi = rng.standard_normal((m.NX, 3, m.N_sbn, m.NZ))
    W = scattering.overlap(ma, be, chi)
    _, PH = dens.dens(ma, be, rng.random(m.shape))
    a, b = scattering.scat_gain(m, be, PH, eps, W), scattering.scat_gain(ma, be, PH, eps, W)
    assert bte_cases.rel(a, b) <= TOL, (levels, bte_cases.rel(a, b))
