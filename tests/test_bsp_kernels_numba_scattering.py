"""numba fast paths of the scattering phases (solver/bsp/kernels/numba/scattering.py) against the
array reference (numerics.kernels=array, the test oracle): gain and loss for all mechanisms and a
subset, both occupation rules.  CPU only; skipped without numba.
"""
import numpy as np
import pytest

numba = pytest.importorskip("numba")

from solver.backend import get_backend  # noqa: E402
from solver.bsp import dens, scattering  # noqa: E402
from solver.bsp.model import Model, load  # noqa: E402

TOL = 1e-12


def models(NX=9, NS=2, NW=12, NPHI=8, NZ=17, extra=()):
    """(fast, array) models of the same mesh: numerics.kernels auto and array."""
    ov = [f"mesh.NX={NX}", f"mesh.N_sbn={NS}", f"mesh.NW={NW}", f"mesh.NPHI={NPHI}", f"mesh.NZ={NZ}", *extra]
    return Model(load(None, ov)), Model(load(None, ov + ["numerics.kernels=array"]))


def rel(a, b):
    return float(np.abs(a - b).max() / np.abs(b).max())


@pytest.fixture(scope="module")
def be():
    return get_backend("numba", threads=2)


@pytest.mark.parametrize("occupation", ["reference", "bose_einstein"])
def test_scattering_fast_matches_array(be, rng, occupation):
    m, ma = models(NX=9, NS=3, NW=20, NPHI=8, extra=[f"physics.occupation={occupation}"])
    eps = rng.uniform(-4, 4, (m.NX, 3, m.N_sbn))
    chi = rng.standard_normal((m.NX, 3, m.N_sbn, m.NZ))
    W = scattering.overlap(ma, be, chi)
    Phi = rng.random(m.shape)
    _, PH = dens.dens(ma, be, Phi)
    for mech in (None, (0,), (1, 4, 6)):
        a, b = scattering.scat_gain(m, be, PH, eps, W, mech), scattering.scat_gain(ma, be, PH, eps, W, mech)
        assert rel(a, b) <= TOL, ("gain", mech, rel(a, b))
        a = scattering.scat_loss(m, be, eps, W, mech)
        b = scattering.scat_loss(ma, be, eps, W, mech)
        assert rel(a, b) <= TOL, ("loss", mech, rel(a, b))
    # the elastic intrasubband term lands on the top node exactly (the documented rule)
    Wd = np.zeros_like(W)
    for nu in range(3):
        for p in range(m.N_sbn):
            Wd[:, nu, p, nu, p] = W[:, nu, p, nu, p]
    a, b = scattering.scat_gain(m, be, PH, eps, Wd, (0,)), scattering.scat_gain(ma, be, PH, eps, Wd, (0,))
    assert rel(a, b) <= TOL
    assert np.all(a[..., -1] > 0)
