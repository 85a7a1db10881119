"""numba fast path of the RK phase (solver/bsp/kernels/numba/rk.py) against its reference
bte.rk_update: every stage, with and without scattering, meshes whose NW and NPHI take each branch
of NumPy's pairwise sum (< 8, <= 128, split in halves); the same bits at 1 and 2 threads; whole
time steps of the numba backend (RK fast path on) against the NumPy array reference.

The kernel keeps the reference's arithmetic order (sums in NumPy's pairwise order), so the results
are asserted bit-identical.  CPU only; skipped without numba.
"""
import numpy as np
import pytest

numba = pytest.importorskip("numba")

from solver.backend import get_backend  # noqa: E402
from solver.bsp import bte, dens, kernels  # noqa: E402
from solver.bsp.kernels.numba import rk  # noqa: E402
from solver.bsp.model import Model, load  # noqa: E402

NP_BE = get_backend("numpy")


def model(NX, NS, NW, NPHI):
    return Model(load(None, [f"mesh.NX={NX}", f"mesh.N_sbn={NS}", f"mesh.NW={NW}", f"mesh.NPHI={NPHI}",
                             "mesh.NZ=13"]))


def stage_inputs(m, rng):
    sh = m.shape
    Phi, Phi0 = rng.random(sh), rng.random(sh)
    G, Lc = rng.random(sh[:4]), rng.random(sh[:4])
    terms = tuple(rng.standard_normal(sh) * 10.0 ** rng.integers(-3, 3, sh) for _ in range(3))
    return Phi0, Phi, G, Lc, terms


# NW / NPHI: 6 (< 8), 12 and 24 (one block), 130, 150 and 300 (split once, twice: the standard mesh)
MESHES = [dict(NX=9, NS=2, NW=12, NPHI=6), dict(NX=9, NS=3, NW=150, NPHI=24), dict(NX=9, NS=1, NW=300, NPHI=130)]


@pytest.mark.parametrize("mesh", MESHES)
@pytest.mark.parametrize("scat", [True, False])
def test_rk_update_matches_reference(rng, mesh, scat):
    m = model(**mesh)
    be = get_backend("numba", threads=2)
    Phi0, Phi, G, Lc, terms = stage_inputs(m, rng)
    if not scat:
        G = Lc = None
    before = [a.copy() for a in (Phi0, Phi, *terms)]
    for s in range(3):
        dt = 0.37 / (s + 1)
        got = rk.rk_update(m, be, s, Phi0, Phi, G, Lc, terms, dt)
        ref = bte.rk_update(m, NP_BE, s, Phi0, Phi, G, Lc, terms, dt)
        for name, a, b in zip(("Phi1", "rho", "PhiHat"), got, ref):
            assert a.shape == b.shape and a.dtype == b.dtype, name
            assert np.array_equal(a, b), (s, name, float(np.abs(a - b).max()))
    assert all(np.array_equal(a, b) for a, b in zip(before, (Phi0, Phi, *terms)))  # inputs kept
    # DENS of the result: the densities of Phi1
    rho, PhiHat = dens.dens(m, NP_BE, got[0])
    assert np.array_equal(rho, got[1]) and np.array_equal(PhiHat, got[2])


def test_rk_update_thread_count_independent(rng):
    m = model(**MESHES[1])
    Phi0, Phi, G, Lc, terms = stage_inputs(m, rng)
    one = rk.rk_update(m, get_backend("numba", threads=1), 2, Phi0, Phi, G, Lc, terms, 0.1)
    two = rk.rk_update(m, get_backend("numba", threads=2), 2, Phi0, Phi, G, Lc, terms, 0.1)
    for a, b in zip(one, two):
        assert np.array_equal(a, b)


def test_rk_update_rejects_too_long_sums(rng):
    m = model(NX=9, NS=1, NW=6, NPHI=5000)
    Phi0, Phi, G, Lc, terms = stage_inputs(m, rng)
    with pytest.raises(ValueError, match="pairwise"):
        rk.rk_update(m, get_backend("numba", threads=1), 0, Phi0, Phi, G, Lc, terms, 0.1)


def test_numba_steps_match_numpy_with_rk_fast_path():
    """Five whole time steps on the numba backend (every numba fast path, RK included) against the
    NumPy array reference: equal within 1e-10 (ITER's numba kernels are not bit-identical)."""
    from solver.bsp.simulation import Simulation

    states = {}
    for backend in ("numpy", "numba"):
        cfg = load(None, ["mesh.N_sbn=3", "mesh.NX=9", "mesh.NZ=13", "mesh.NW=16", "mesh.NPHI=8",
                          "output.progress=false", f"numerics.backend={backend}", "numerics.threads=2",
                          "time.steps=5", "time.t_end_ps=null", "output.checkpoint_every_steps=0"])
        sim = Simulation(cfg, progress=False)
        if backend == "numba":
            assert kernels.lookup(sim.model, sim.backend, "RK") is rk.rk_update
        sim.run(resume=False)
        assert sim.state.step == 5
        states[backend] = {k: np.asarray(getattr(sim.state, k)) for k in ("Phi", "V", "eps", "rho", "PhiHat")}
    for k, v in states["numba"].items():
        ref = states["numpy"][k]
        r = float(np.abs(v - ref).max() / np.abs(ref).max())
        assert r <= 1e-10, (k, r)


@pytest.mark.parametrize("scat", [True, False])
@pytest.mark.parametrize("mesh", [dict(NX=9, NS=2, NW=24, NPHI=8), dict(NX=9, NS=1, NW=6, NPHI=6)])
def test_stage_update_matches_reference(bte_cases, rng, scat, mesh):
    """rk.stage_update (w and phi terms formed inside the RK pass, one w level at a time) against
    bte.rk_update on the array reference's WENO terms, every stage: within 1e-12.  NW = 6 (the least): the top
    ghost rows of the w sweep are reached while the faces of the lowest levels are formed."""
    from solver.bsp import weno

    m, ma = bte_cases.pair(**mesh)
    be = get_backend("numba", threads=2)
    Phi0, Phi, G, Lc, _ = stage_inputs(m, rng)
    if not scat:
        G = Lc = None
    deps = 5.0 * rng.standard_normal((m.NX, 3, m.N_sbn))
    A = float(np.abs(deps).max())
    tx = rng.standard_normal(m.shape)
    terms = (tx, weno.weno_w(ma, NP_BE, Phi, deps), weno.weno_phi(ma, NP_BE, Phi, deps, A))
    for s in range(3):
        got = rk.stage_update(m, be, s, Phi0, Phi, G, Lc, tx, deps, A, 0.01)
        ref = bte.rk_update(ma, NP_BE, s, Phi0, Phi, G, Lc, terms, 0.01)
        for name, a, b in zip(("Phi1", "rho", "PhiHat"), got, ref):
            assert a.shape == b.shape
            assert bte_cases.rel(a, b) <= 1e-12, (s, name, bte_cases.rel(a, b))
