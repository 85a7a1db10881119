"""numba fast paths of the BSP solver (solver/bsp/kernels/numba_cpu.py) against the array
reference (numerics.kernels=array, the test oracle): the fused WENO-5 x/w/phi operators with
every boundary rule (inflow ghosts, closed contacts, partner-angle ghosts, the bottom-face
average, periodic phi), scattering gain and loss (all mechanisms and a subset, both occupation
rules), the thread count of the backend, and a few time steps of a whole run.

The fast paths keep the arithmetic order of the array code, so the differences seen are 0; the
assertions allow 1e-12 relative (1e-10 for the run).  CPU only; skipped without numba.
"""
import importlib
import math
import sys

import numpy as np
import pytest

numba = pytest.importorskip("numba")

from solver.backend import get_backend  # noqa: E402
from solver.bsp import dens, kernels, scattering, weno  # noqa: E402
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


def test_fast_paths_are_found(be):
    m, ma = models()
    for name in ("dx_term", "dw_term", "dphi_term", "gain", "loss_coefficient"):
        assert kernels.lookup(m, be, name) is not None, name
        assert kernels.lookup(ma, be, name) is None, name
    assert set(kernels.available("numba")) >= {"dx_term", "dw_term", "dphi_term", "gain", "loss_coefficient"}


MESHES = [dict(NX=9, NS=2, NW=12, NPHI=8), dict(NX=10, NS=3, NW=10, NPHI=12)]


@pytest.mark.parametrize("mesh", MESHES, ids=["9x2x12x8", "10x3x10x12"])
def test_weno_fast_matches_array(be, rng, mesh):
    m, ma = models(**mesh)
    Phi = rng.random(m.shape) + 0.1  # positive, rough
    deps = 5.0 * rng.standard_normal((m.NX, 3, m.N_sbn))
    rho_eq = rng.random((m.NX, 3, m.N_sbn)) + 0.5
    rho, _ = dens.dens(ma, be, Phi)
    for closed in (False, True):
        a = weno.dx_term(m, be, Phi, rho_eq[0], rho_eq[-1], rho[0], rho[-1], closed=closed)
        b = weno.dx_term(ma, be, Phi, rho_eq[0], rho_eq[-1], rho[0], rho[-1], closed=closed)
        assert a.shape == b.shape and a.dtype == np.float64
        assert rel(a, b) <= TOL, ("dx", closed, rel(a, b))
    a, b = weno.dw_term(m, be, Phi, deps), weno.dw_term(ma, be, Phi, deps)
    assert rel(a, b) <= TOL, ("dw", rel(a, b))
    A = float(np.abs(deps).max())
    a, b = weno.dphi_term(m, be, Phi, deps, A), weno.dphi_term(ma, be, Phi, deps, A)
    assert rel(a, b) <= TOL, ("dphi", rel(a, b))
    # an explicit eps and a non-contiguous Phi take the same route
    Pt = np.asfortranarray(Phi)
    a, b = weno.dw_term(m, be, Pt, deps, eps=1e-3), weno.dw_term(ma, be, Phi, deps, eps=1e-3)
    assert rel(a, b) <= TOL


def test_weno_fast_on_equilibrium_state(be):
    """Smooth data of the size of a run (Maxwellian in w, inflow of the equilibrium)."""
    m, ma = models(NX=9, NS=2, NW=24, NPHI=8)
    eps = 1.5 * np.arange(2)[None, None, :] ** 2 + 2.0 * np.sin(math.pi * m.x)[:, None, None] + np.zeros((1, 3, 1))
    deps = 2.0 * math.pi * np.cos(math.pi * m.x)[:, None, None] + np.zeros((1, 3, 2))
    rho_eq = m.sqrt_mxmy[None, :, None] * np.exp(-eps)
    Phi = rho_eq[..., None, None] * (m.s_w * m.maxwellian)[None, :, None, :, None] * (1 + 0.5 * np.cos(m.phi))
    rho, _ = dens.dens(ma, be, Phi)
    for fn, args in ((weno.dx_term, (Phi, rho_eq[0], rho_eq[-1], rho[0], rho[-1])),
                     (weno.dw_term, (Phi, deps)), (weno.dphi_term, (Phi, deps, float(np.abs(deps).max())))):
        a, b = fn(m, be, *args), fn(ma, be, *args)
        assert rel(a, b) <= TOL, (fn.__name__, rel(a, b))


@pytest.mark.parametrize("occupation", ["reference", "bose_einstein"])
def test_scattering_fast_matches_array(be, rng, occupation):
    m, ma = models(NX=9, NS=3, NW=20, NPHI=8, extra=[f"physics.occupation={occupation}"])
    eps = rng.uniform(-4, 4, (m.NX, 3, m.N_sbn))
    chi = rng.standard_normal((m.NX, 3, m.N_sbn, m.NZ))
    W = scattering.overlap(ma, be, chi)
    Phi = rng.random(m.shape)
    _, PH = dens.dens(ma, be, Phi)
    for mech in (None, (0,), (1, 4, 6)):
        a, b = scattering.gain(m, be, PH, eps, W, mech), scattering.gain(ma, be, PH, eps, W, mech)
        assert rel(a, b) <= TOL, ("gain", mech, rel(a, b))
        a = scattering.loss_coefficient(m, be, eps, W, mech)
        b = scattering.loss_coefficient(ma, be, eps, W, mech)
        assert rel(a, b) <= TOL, ("loss", mech, rel(a, b))
    # the elastic intrasubband term lands on the top node exactly (the documented rule)
    Wd = np.zeros_like(W)
    for nu in range(3):
        for p in range(m.N_sbn):
            Wd[:, nu, p, nu, p] = W[:, nu, p, nu, p]
    a, b = scattering.gain(m, be, PH, eps, Wd, (0,)), scattering.gain(ma, be, PH, eps, Wd, (0,))
    assert rel(a, b) <= TOL
    assert np.all(a[..., -1] > 0)


def test_thread_count_follows_the_backend(rng):
    m, _ = models()
    Phi = rng.random(m.shape)
    deps = rng.standard_normal((m.NX, 3, m.N_sbn))
    out = {}
    for n in (1, 2):
        b = get_backend("numba", threads=n)
        get_backend("numba", threads=2)  # another backend resets numba's count; the call sets it back
        out[n] = weno.dw_term(m, b, Phi, deps)
        assert numba.get_num_threads() == min(n, numba.config.NUMBA_NUM_THREADS)
    np.testing.assert_array_equal(out[1], out[2])


def test_import_error_without_numba(monkeypatch):
    """With numba missing the module raises ImportError (kernels.module_for then gives None)."""
    name = "solver.bsp.kernels.numba_cpu"
    saved = sys.modules.pop(name, None)
    monkeypatch.setitem(sys.modules, "numba", None)
    try:
        with pytest.raises(ImportError):
            importlib.import_module(name)
    finally:
        sys.modules.pop(name, None)
        if saved is not None:
            sys.modules[name] = saved


def test_few_steps_fast_equals_array():
    """Three steps of a whole run on a tiny mesh, numba fast paths vs the array code."""
    from solver.bsp.simulation import Simulation

    tiny = ["mesh.N_sbn=3", "mesh.NX=9", "mesh.NZ=13", "mesh.NW=12", "mesh.NPHI=8", "output.progress=false",
            "numerics.backend=numba", "numerics.threads=2", "time.steps=3", "time.t_end_ps=null",
            "output.checkpoint_every_steps=0"]
    states = {}
    for mode in ("auto", "array"):
        cfg = load(None, tiny + [f"numerics.kernels={mode}"])
        sim = Simulation(cfg, progress=False)
        assert sim.backend.name == "numba" and sim.backend.threads == min(2, numba.config.NUMBA_NUM_THREADS)
        sim.run(resume=False)
        states[mode] = {k: np.array(getattr(sim.state, k)) for k in ("Phi", "V", "eps", "rho")}
        assert sim.state.step == 3
    for k, v in states["auto"].items():
        assert rel(v, states["array"][k]) <= 1e-10, (k, rel(v, states["array"][k]))
