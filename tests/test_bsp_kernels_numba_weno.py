"""numba fast paths of the WENO phases (solver/bsp/kernels/numba/weno.py) against the array
reference (numerics.kernels=array, the test oracle): the fused WENO-5 x/w/phi operators with every
boundary rule (inflow ghosts, closed contacts, partner-angle ghosts, the bottom-face average,
periodic phi), and the thread count of the backend.

The fast paths evaluate the WENO weights with one division per face (u_k / S instead of
(d_k / q_k) / sum) and with FMA contraction, so they agree to rounding (~1e-15 relative seen);
the assertions allow 1e-12 relative.  CPU only; skipped without numba.
"""
import math

import numpy as np
import pytest

numba = pytest.importorskip("numba")

from solver.backend import get_backend  # noqa: E402
from solver.bsp import dens, weno  # noqa: E402

TOL = 1e-12


@pytest.fixture(scope="module")
def be():
    return get_backend("numba", threads=2)


MESHES = [dict(NX=9, NS=2, NW=12, NPHI=8), dict(NX=10, NS=3, NW=10, NPHI=12)]


@pytest.mark.parametrize("mesh", MESHES, ids=["9x2x12x8", "10x3x10x12"])
def test_weno_fast_matches_array(bte_cases, be, rng, mesh):
    m, ma = bte_cases.pair(**mesh)
    Phi = rng.random(m.shape) + 0.1  # positive, rough
    deps = 5.0 * rng.standard_normal((m.NX, 3, m.N_sbn))
    rho_eq = rng.random((m.NX, 3, m.N_sbn)) + 0.5
    rho, _ = dens.dens(ma, be, Phi)
    for closed in (False, True):
        a = weno.weno_x(m, be, Phi, rho_eq[0], rho_eq[-1], rho[0], rho[-1], closed=closed)
        b = weno.weno_x(ma, be, Phi, rho_eq[0], rho_eq[-1], rho[0], rho[-1], closed=closed)
        assert a.shape == b.shape and a.dtype == np.float64
        assert bte_cases.rel(a, b) <= TOL, ("dx", closed, bte_cases.rel(a, b))
    a, b = weno.weno_w(m, be, Phi, deps), weno.weno_w(ma, be, Phi, deps)
    assert bte_cases.rel(a, b) <= TOL, ("dw", bte_cases.rel(a, b))
    A = float(np.abs(deps).max())
    a, b = weno.weno_phi(m, be, Phi, deps, A), weno.weno_phi(ma, be, Phi, deps, A)
    assert bte_cases.rel(a, b) <= TOL, ("dphi", bte_cases.rel(a, b))
    # an explicit eps and a non-contiguous Phi take the same route
    Pt = np.asfortranarray(Phi)
    a, b = weno.weno_w(m, be, Pt, deps, eps=1e-3), weno.weno_w(ma, be, Phi, deps, eps=1e-3)
    assert bte_cases.rel(a, b) <= TOL


def test_weno_fast_on_equilibrium_state(bte_cases, be):
    """Smooth data of the size of a run (Maxwellian in w, inflow of the equilibrium)."""
    m, ma = bte_cases.pair(NX=9, NS=2, NW=24, NPHI=8)
    eps = 1.5 * np.arange(2)[None, None, :] ** 2 + 2.0 * np.sin(math.pi * m.x)[:, None, None] + np.zeros((1, 3, 1))
    deps = 2.0 * math.pi * np.cos(math.pi * m.x)[:, None, None] + np.zeros((1, 3, 2))
    rho_eq = m.sqrt_mxmy[None, :, None] * np.exp(-eps)
    Phi = rho_eq[..., None, None] * (m.s_w * m.maxwellian)[None, :, None, :, None] * (1 + 0.5 * np.cos(m.phi))
    rho, _ = dens.dens(ma, be, Phi)
    for fn, args in ((weno.weno_x, (Phi, rho_eq[0], rho_eq[-1], rho[0], rho[-1])),
                     (weno.weno_w, (Phi, deps)), (weno.weno_phi, (Phi, deps, float(np.abs(deps).max())))):
        a, b = fn(m, be, *args), fn(ma, be, *args)
        assert bte_cases.rel(a, b) <= TOL, (fn.__name__, bte_cases.rel(a, b))


def test_thread_count_follows_the_backend(bte_cases, rng):
    m, _ = bte_cases.pair()
    Phi = rng.random(m.shape)
    deps = rng.standard_normal((m.NX, 3, m.N_sbn))
    out = {}
    for n in (1, 2):
        b = get_backend("numba", threads=n)
        get_backend("numba", threads=2)  # another backend resets numba's count; the call sets it back
        out[n] = weno.weno_w(m, b, Phi, deps)
        assert numba.get_num_threads() == min(n, numba.config.NUMBA_NUM_THREADS)
    np.testing.assert_array_equal(out[1], out[2])
