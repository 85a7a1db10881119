"""numba fast paths of ITER (solver/bsp/kernels/numba/iter.py) against the reference ITER:
LAPACK eigenpairs (schrodinger.eigen_host), the NumPy Frechet kernel, the row-equilibrated CSC
matrix solved by SuperLU (poisson.construct / poisson.solve), the Newton rhs and norms of
poisson._newton_loop; bitwise determinism (run to run, 1 vs 2 threads); and a few time steps of
a whole run with the fast ITER routed in through kernels.lookup against the numpy backend.
Measured differences are ~1e-14 relative; the assertions allow 1e-12 (1e-10 for the run).
CPU only; skipped without numba."""
import math

import numpy as np
import pytest

numba = pytest.importorskip("numba")

from solver.backend import get_backend  # noqa: E402
from solver.bsp import blocktri, kernels, poisson, schrodinger  # noqa: E402
from solver.bsp.kernels.numba import iter as ni  # noqa: E402
from solver.bsp.model import Model, load  # noqa: E402

TOL = 1e-12
NP = get_backend("numpy")


def model(*overrides):
    return Model(load(None, list(overrides)))


def rel(a, b):
    return float(np.abs(np.asarray(a) - np.asarray(b)).max() / np.abs(np.asarray(b)).max())


@pytest.fixture(scope="module")
def be():
    return get_backend("numba", threads=2)


@pytest.fixture(scope="module")
def coarse():
    """A converged INITCOND state on 17 x 33 with 4 subbands (realistic V, eps, chi, rho)."""
    m = model("mesh.NX=17", "mesh.NZ=33", "mesh.N_sbn=4")
    return m, poisson.initcond(m, NP)


# ---------------------------------------------------------------------------- eigen
def test_eigen_matches_lapack(be, coarse, rng):
    m, ic = coarse
    for V in (ic.V, ic.V + 0.3 * rng.standard_normal(ic.V.shape), -2.0 * ic.V):
        e0, c0 = schrodinger.eigen_host(m, V)
        e1, c1 = ni.eigen(m, be, V)
        assert e1.shape == e0.shape and c1.shape == c0.shape and e1.dtype == c1.dtype == np.float64
        assert rel(e1, e0) <= TOL, rel(e1, e0)
        assert rel(c1, c0) <= TOL, rel(c1, c0)
        assert not c1[..., 0].any() and not c1[..., -1].any()  # chi = 0 at the gates
        G = np.einsum("ivpz,ivqz->ivpq", c1, c1) * m.dz  # dz sum chi chi = identity
        np.testing.assert_allclose(G, np.broadcast_to(np.eye(m.N_sbn), G.shape), atol=1e-13)
        a = np.abs(c1)  # the sign convention: the first component above 1e-3 max|chi| is positive
        first = np.argmax(a > schrodinger.SIGN_THRESHOLD * a.max(axis=-1, keepdims=True), axis=-1)
        assert (np.take_along_axis(c1, first[..., None], axis=-1) > 0).all()


def test_eigen_small_mesh_and_one_subband(be, rng):
    for ov in (("mesh.NX=9", "mesh.NZ=9", "mesh.N_sbn=3"), ("mesh.NX=9", "mesh.NZ=12", "mesh.N_sbn=1")):
        m = model(*ov)
        V = 2.0 + rng.standard_normal((m.NX, m.NZ))
        e0, c0 = schrodinger.eigen_host(m, V)
        e1, c1 = ni.eigen(m, be, V)
        assert rel(e1, e0) <= TOL and rel(c1, c0) <= TOL, (ov, rel(e1, e0), rel(c1, c0))


def test_eigen_and_solve_are_bitwise_deterministic(coarse, rng, newton_cases):
    m, ic = coarse
    V = ic.V + 0.1 * rng.standard_normal(ic.V.shape)
    sysm, F, rhs, bvals = _problem(newton_cases, m, "dirichlet", rng)
    out = []
    for threads in (1, 2, 2):
        b = get_backend("numba", threads=threads)
        e, c = ni.eigen(m, b, V)
        A, bb = ni.construct_linsys(m, b, sysm, F, rhs, bvals)
        out.append((e, c, ni.solve_linsys(m, b, sysm, A, bb), ni.frechet(m, b, ic.eps, ic.chi, ic.rho)))
    for later in out[1:]:
        for x, y in zip(out[0], later):
            np.testing.assert_array_equal(x, y)


# ---------------------------------------------------------------------------- Frechet
def test_frechet_matches_reference(be, coarse):
    m, ic = coarse
    drho = poisson.fermi_dirac_drho(m, np, ic.eps)
    for d in (drho, None):
        F0 = poisson.frechet(m, NP, ic.eps, ic.chi, ic.rho, d)
        F1 = ni.frechet(m, be, ic.eps, ic.chi, ic.rho, d)
        assert F1.shape == F0.shape == (m.NX - 2, m.NZ - 2, m.NZ - 2)
        assert rel(F1, F0) <= TOL, rel(F1, F0)


# ---------------------------------------------------------------------------- the Newton system
def _problem(newton_cases, m, bc, rng):
    """(sysm, F, rhs, bvals) of conftest's Newton test problems (SPD Frechet-like blocks)."""
    sysm, F, rhs, bvals, *_ = newton_cases.problem(m, bc, rng)
    return sysm, F, rhs, bvals


MESHES = [("mesh.NX=13", "mesh.NZ=11"), ("mesh.NX=16", "mesh.NZ=9"), ("mesh.NX=17", "mesh.NZ=13"),
          ("mesh.NX=9", "mesh.NZ=17", "device.gate_start_nm=6", "device.gate_end_nm=14")]


@pytest.mark.parametrize("mesh", MESHES)
@pytest.mark.parametrize("bc", ["neumann", "dirichlet"])
def test_construct_and_solve_match_sparse_lu(be, mesh, bc, rng, newton_cases):
    m = model(*mesh)
    sysm, F, rhs, bvals = _problem(newton_cases, m, bc, rng)
    A0, b0 = poisson.construct_linsys(m, NP, sysm, F, rhs, bvals)
    x0 = poisson.solve_linsys(m, NP, sysm, A0, b0)
    (D, lo, up), b = ni.construct_linsys(m, be, sysm, F, rhs, bvals)
    Dr, lor, upr, br = blocktri.construct(np, blocktri.BlockSystem(sysm), F, rhs, bvals)
    for x, y in ((D, Dr), (lo, lor), (up, upr), (b, br)):  # the same arithmetic as blocktri.construct
        np.testing.assert_array_equal(x, y)
    np.testing.assert_allclose(b.ravel(), b0, rtol=1e-15, atol=1e-15)
    x1 = ni.solve_linsys(m, be, sysm, (D, lo, up), b)
    assert x1.shape == (m.NX * m.NZ,)
    assert rel(x1, x0) <= TOL, rel(x1, x0)
    d = sysm.dirichlet_flat
    np.testing.assert_array_equal(x1[d], bvals[d])


def test_solve_pivots_inside_blocks(be, rng, newton_cases):
    """A symmetric indefinite Frechet block (POTENTIAL's rho need not be monotone) chosen so that
    the leading 3 x 3 minor of block 1 vanishes: without pivoting the LU divides by ~0."""
    m, bs, sysm, F, rhs, bvals, x0, d0, minor3 = newton_cases.indefinite(rng)
    assert abs(minor3(0.0)) < 1e-9 * abs(d0)
    A1, b1 = ni.construct_linsys(m, be, sysm, F, rhs, bvals)
    x1 = ni.solve_linsys(m, be, sysm, A1, b1)
    assert rel(x1, x0) <= TOL, rel(x1, x0)


@pytest.fixture
def cr_calls(monkeypatch):
    """Counts of the numba solve's factorizations (_cr_solve) and re-solves (_cr_resolve)."""
    counts = {"factor": 0, "resolve": 0}
    for key, name in (("factor", "_cr_solve"), ("resolve", "_cr_resolve")):
        fn = getattr(ni, name)

        def counted(*a, _fn=fn, _key=key, **k):
            counts[_key] += 1
            return _fn(*a, **k)
        monkeypatch.setattr(ni, name, counted)
    return counts


@pytest.mark.parametrize("mesh", [("mesh.NX=17", "mesh.NZ=33"), ("mesh.NX=65", "mesh.NZ=65"), ("mesh.NX=10", "mesh.NZ=129")])
def test_reuse_resolves_with_the_kept_factors(be, mesh, rng, newton_cases, cr_calls):
    """solve_linsys(..., reuse=True) with the very A of the system's last solve substitutes with its
    kept factors: for new right-hand sides the same bits as factoring again, and SuperLU's x to 1e-12;
    a solve of the other system in between keeps them (per system); an equal A that is another object,
    or a system factored since, is factored again."""
    m = model(*mesh)
    sysm, F, rhs, bvals = _problem(newton_cases, m, "dirichlet", rng)
    other = _problem(newton_cases, m, "neumann", rng)
    A, b = ni.construct_linsys(m, be, sysm, F, rhs, bvals)
    ni.solve_linsys(m, be, sysm, A, b)
    assert cr_calls == {"factor": 1, "resolve": 0}
    for k in range(3):
        rhs2 = (1.0 + 0.5 * rng.standard_normal(rhs.shape)) * rhs + k * rng.standard_normal(rhs.shape)
        bv2 = bvals * (1.0 + 0.1 * k)
        A2, b2 = ni.construct_linsys(m, be, sysm, F, rhs2, bv2)  # equal to A, another object
        Ao, bo = ni.construct_linsys(m, be, other[0], *other[1:])
        ni.solve_linsys(m, be, other[0], Ao, bo)  # the neumann system: its own factors
        x1 = ni.solve_linsys(m, be, sysm, A, b2, reuse=True)
        assert cr_calls["resolve"] == k + 1
        A0, b0 = poisson.construct_linsys(m, NP, sysm, F, rhs2, bv2)
        assert rel(x1, poisson.solve_linsys(m, NP, sysm, A0, b0)) <= TOL
        np.testing.assert_array_equal(x1[sysm.dirichlet_flat], bv2[sysm.dirichlet_flat])
        n = cr_calls["factor"]
        x2 = ni.solve_linsys(m, be, sysm, A2, b2, reuse=True)  # not the kept object: factored again
        assert cr_calls["factor"] == n + 1
        np.testing.assert_array_equal(x1, x2)  # the same operations in the same order
        ni.solve_linsys(m, be, sysm, A, b2, reuse=True)  # A2 was factored since: A is factored again
        assert cr_calls["factor"] == n + 2 and cr_calls["resolve"] == k + 1


def test_resolve_is_bitwise_deterministic(coarse, rng, newton_cases):
    m, ic = coarse
    sysm, F, rhs, bvals = _problem(newton_cases, m, "dirichlet", rng)
    out = []
    for threads in (1, 2, 2):
        b = get_backend("numba", threads=threads)
        A, bb = ni.construct_linsys(m, b, sysm, F, rhs, bvals)
        ni.solve_linsys(m, b, sysm, A, bb)
        out.append(ni.solve_linsys(m, b, sysm, A, 2.0 * bb, reuse=True))
    for later in out[1:]:
        np.testing.assert_array_equal(out[0], later)


# ---------------------------------------------------------------------------- Newton glue
def test_newton_rhs_and_norms(be, coarse, rng):
    m, ic = coarse
    sysm = poisson.NewtonSystem(m, "dirichlet")
    F = poisson.frechet(m, NP, ic.eps, ic.chi, ic.rho)
    ND = m.on(NP, "N_D")
    V = ic.V + 0.01 * rng.standard_normal(ic.V.shape)
    ref = -m.cp * (ic.N[1:-1, 1:-1] - ND[1:-1, 1:-1]) + sysm.cp_dz * np.einsum("ijk,ik->ij", F, V[1:-1, 1:-1])
    got = ni.newton_rhs(m, be, sysm, F, V, ic.N, ND)
    assert got.shape == ref.shape and rel(got, ref) <= TOL
    N2 = ic.N * (1.0 + 1e-3 * rng.standard_normal(ic.N.shape))
    x = V.ravel().copy()
    nrm, finite = ni.newton_norms(m, be, V, ic.V, N2, ic.N, x)
    ref = poisson.norms(np, m, V, ic.V, N2, ic.N)
    assert finite and set(nrm) == set(poisson.NORM_KEYS)
    for k in poisson.NORM_KEYS:
        assert math.isclose(nrm[k], ref[k], rel_tol=TOL), (k, nrm[k], ref[k])
    x[7] = np.inf
    V3 = V.copy()
    V3[3, 4] = np.nan
    nrm, finite = ni.newton_norms(m, be, V3, ic.V, N2, ic.N, x)
    assert not finite and math.isnan(nrm["dV_inf"]) and math.isnan(nrm["dV_l2"]) and math.isfinite(nrm["dN_inf"])


# ---------------------------------------------------------------------------- a whole run
def test_few_steps_with_fast_iter_equal_numpy():
    """Three steps of a tiny run: the numba backend (its table runs every ITER phase: run.json's
    implementations say so) against the numpy backend (array reference everywhere)."""
    from solver.bsp.simulation import Simulation

    tiny = ["mesh.N_sbn=3", "mesh.NX=9", "mesh.NZ=13", "mesh.NW=12", "mesh.NPHI=8", "output.progress=false",
            "time.steps=3", "time.t_end_ps=null", "output.checkpoint_every_steps=0"]
    states = {}
    for name in ("numba", "numpy"):
        sim = Simulation(load(None, tiny + [f"numerics.backend={name}", "numerics.threads=2"]), progress=False)
        sim.run(resume=False)
        states[name] = {k: np.array(getattr(sim.state, k)) for k in ("Phi", "V", "eps", "rho")}
        assert sim.state.step == 3
        impl = kernels.implementations(sim.model, sim.backend)
        for phase in ("eigen", "Frechet", "construct_linsys", "solve_linsys", "newton_rhs", "newton_norms"):
            assert impl[phase].startswith("solver.bsp.kernels.numba.iter." if name == "numba" else "solver.bsp."), impl
    for k, v in states["numba"].items():
        assert rel(v, states["numpy"][k]) <= 1e-10, (k, rel(v, states["numpy"][k]))


def test_kept_jacobian_run_equals_numpy_and_factors_once_per_step(monkeypatch, cr_calls):
    """numerics.iter_jacobian = step (the default), iter_jacobian_steps = 1: four steps of a tiny run on
    the numba backend agree with the numpy backend to 1e-12; numba factors once per step (as numpy's
    SuperLU) and re-solves in the step's other Newton iterations (with the default 10 steps, the
    Jacobian is kept across steps: still no more factorizations than numpy's)."""
    import scipy.sparse.linalg as spla

    from solver.bsp.simulation import Simulation

    splu = spla.splu
    lu = [0]

    def counted_splu(*a, **k):
        lu[0] += 1
        return splu(*a, **k)
    monkeypatch.setattr(spla, "splu", counted_splu)
    tiny = ["mesh.N_sbn=3", "mesh.NX=9", "mesh.NZ=13", "mesh.NW=12", "mesh.NPHI=8", "output.progress=false",
            "time.steps=4", "time.t_end_ps=null", "output.checkpoint_every_steps=0", "numerics.threads=2"]
    for steps in ("1", "10"):
        states, per_step = {}, {}
        for name in ("numba", "numpy"):
            sim = Simulation(load(None, tiny + [f"numerics.backend={name}", f"numerics.iter_jacobian_steps={steps}"]),
                             progress=False)
            assert sim.cfg["numerics"]["iter_jacobian"] == "step"
            rows = per_step[name] = []
            step = sim.step

            def counted(sim=sim, step=step, rows=rows):  # per step: (Newton iterations, factorizations, re-solves)
                f0, r0, l0 = cr_calls["factor"], cr_calls["resolve"], lu[0]
                step()
                fac = cr_calls["factor"] - f0 if sim.backend.name == "numba" else lu[0] - l0
                rows.append((int(sim.state.newton_iterations), fac, cr_calls["resolve"] - r0))
            sim.step = counted
            sim.run(resume=False)
            assert sim.state.step == 4
            states[name] = {k: np.array(getattr(sim.state, k)) for k in ("Phi", "V", "eps", "rho", "chi")}
        for k, v in states["numba"].items():
            assert rel(v, states["numpy"][k]) <= TOL, (steps, k, rel(v, states["numpy"][k]))
        nb, npy = per_step["numba"], per_step["numpy"]
        assert [r[0] for r in nb] == [r[0] for r in npy] and [r[1] for r in nb] == [r[1] for r in npy], (nb, npy)
        assert all(n == f + r for n, f, r in nb), nb  # every other Newton iteration re-solves
        if steps == "1":
            assert [r[1] for r in nb] == [1, 1, 1, 1], nb
            assert all(r[2] >= 2 for r in nb), nb  # 3 stages: at least 2 re-solves per step
        else:
            assert sum(r[1] for r in nb) <= 4, nb


# ---------------------------------------------------------------------------- the kept-Jacobian iteration
def _kept(m, b, rng):
    """A POTENTIAL-like kept Jacobian on model m: (sysm, (F, A), V, rho, bflat), A factored by solve_linsys."""
    ic = poisson.initcond(m, NP)
    sysm = poisson._system(m, "dirichlet")
    bflat = sysm.boundary_values(m, ic.V[0], ic.V[-1] + 0.1).ravel()
    rho = ic.rho * 1.01
    F = ni.frechet(m, b, ic.eps, ic.chi, rho)
    A, bb = ni.construct_linsys(m, b, sysm, F, np.zeros((m.NX - 2, m.NZ - 2)), bflat)
    ni.solve_linsys(m, b, sysm, A, bb, False)
    V = ic.V + 1e-3 * rng.standard_normal(ic.V.shape)
    return sysm, (F, A), V, rho, bflat


def _same(ref, got, n_tol=0.0):
    """newton_iteration results: V, eps, chi, the tail and max |dV| bitwise; N and its norms within n_tol
    relative (0: bitwise), and so the l2 norm of dV: a sum, which NumPy (the reference's norms: pairwise,
    its own SIMD order, which changed between NumPy versions) and the numba rows add in different orders."""
    for k in (0, 1, 2):
        np.testing.assert_array_equal(got[k], ref[k])
    assert rel(got[3], ref[3]) <= n_tol
    for k in poisson.NORM_KEYS:
        if k == "dV_inf" or n_tol == 0:
            assert got[4][k] == ref[4][k], k
        else:
            assert math.isclose(got[4][k], ref[4][k], rel_tol=1e-12), k
    assert got[5] is ref[5] is True
    np.testing.assert_array_equal(got[6][0], ref[6][0])
    assert got[6][1:] == ref[6][1:]


@pytest.mark.parametrize("mesh", [("mesh.NX=17", "mesh.NZ=33", "mesh.N_sbn=4"), ("mesh.NX=10", "mesh.NZ=13", "mesh.N_sbn=3")])
def test_newton_iteration_equals_the_phases(be, mesh, rng, cr_calls):
    """numba's newton_iteration (numerics.iter_graph) against poisson.newton_iteration, the array code
    calling the numba phases one by one: V, eps, chi, the norms and the tail bitwise (b is newton_rhs +
    construct_linsys's b, the same operations); the density kernel within 1e-14 of NumPy's einsum
    (measured: bitwise); with the start deferred (N None: the start's eigenpairs and density inside)
    within 1e-12 (measured: bitwise).  It re-solves with the kept factors (no factorization)."""
    m = model(*mesh)
    sysm, jac, V, rho, bflat = _kept(m, be, rng)
    eps, chi = ni.eigen(m, be, V)
    N = poisson.density(np, rho, chi)
    ref = poisson.newton_iteration(m, be, sysm, jac, V, N, eps, rho, bflat)
    f0 = cr_calls["factor"]
    got = ni.newton_iteration(m, be, sysm, jac, V, N, eps, rho, bflat)
    assert cr_calls["factor"] == f0 and cr_calls["resolve"] >= 1
    _same(ref, got, 1e-14)
    ref = poisson.newton_iteration(m, be, sysm, jac, V, None, None, rho, bflat, levels=eps)
    got = ni.newton_iteration(m, be, sysm, jac, V, None, None, rho, bflat, levels=eps)
    assert ni.newton_iteration(m, be, sysm, jac, V, None, None, rho, bflat) is None  # no start: the caller's
    for k in range(4):
        assert rel(got[k], ref[k]) <= TOL, k
    # a resumed run: no factors of the kept A held -> factored once here, the same bits
    ni._cr_factors(m, sysm, m.NX, m.NZ)["A"] = None
    again = ni.newton_iteration(m, be, sysm, jac, V, N, eps, rho, bflat)
    assert cr_calls["factor"] == f0 + 1
    _same(ni.newton_iteration(m, be, sysm, jac, V, N, eps, rho, bflat), again)


def test_newton_iteration_is_bitwise_deterministic(coarse, rng):
    m = model("mesh.NX=17", "mesh.NZ=33", "mesh.N_sbn=4")
    out = []
    for threads in (1, 2, 2):
        b = get_backend("numba", threads=threads)
        sysm, jac, V, rho, bflat = _kept(m, b, np.random.default_rng(5))
        eps, chi = ni.eigen(m, b, V)
        out.append(ni.newton_iteration(m, b, sysm, jac, V, poisson.density(np, rho, chi), eps, rho, bflat))
    for later in out[1:]:
        _same(out[0], later)


def test_newton_iteration_results_held_are_not_overwritten(be, rng):
    """newton_iteration's results come from per-model pools (_common.out_array, OUT_POOL per kind): every
    result the caller still holds (more than the pool keeps, views too) keeps its values while later
    iterations run, each equal to a recomputation from the same inputs; released ones are handed out again."""
    m = model("mesh.NX=10", "mesh.NZ=13", "mesh.N_sbn=3")
    sysm, jac, V, rho, bflat = _kept(m, be, rng)
    eps, chi = ni.eigen(m, be, V)
    N = poisson.density(np, rho, chi)
    starts = [V + 1e-3 * k * rng.standard_normal(V.shape) for k in range(ni.OUT_POOL + 3)]

    def run(Vs, deferred=False):
        if deferred:
            return ni.newton_iteration(m, be, sysm, jac, Vs, None, None, rho, bflat, levels=eps)
        return ni.newton_iteration(m, be, sysm, jac, Vs, N, eps, rho, bflat)

    def arrays(out):
        return [out[0], out[1], out[2], out[3], out[6][0]]

    held, seen = [], set()
    for k, Vs in enumerate(starts):
        out = run(Vs, deferred=k % 2 == 1)
        seen |= {a.ctypes.data for a in arrays(out)}
        kept = arrays(out) if k % 3 else [a[1:] for a in arrays(out)]  # some held only through views
        held.append((kept, [a.copy() for a in kept]))
    del out
    for k, Vs in enumerate(starts):  # the same inputs again: the same bits
        for a, c in zip(arrays(run(Vs, deferred=k % 2 == 1)), held[k][1]):
            np.testing.assert_array_equal(a if k % 3 else a[1:], c)
    for kept, copies in held:  # nothing held was overwritten by the later iterations
        for a, c in zip(kept, copies):
            np.testing.assert_array_equal(a, c)
    assert not np.array_equal(held[0][1][0], held[1][1][0][1:])
    del held, kept
    again = arrays(run(starts[1]))  # everything released: the results come from the pools
    assert all(a.ctypes.data in seen for a in again)


def test_newton_iteration_not_with_batched_cr(be, rng):
    """numerics.linsys = batched_cr keeps its own factors: numba's newton_iteration declines (None)."""
    m = model("mesh.NX=10", "mesh.NZ=13", "mesh.N_sbn=3", "numerics.linsys=batched_cr")
    sysm, jac, V, rho, bflat = _kept(m, be, rng)
    eps, chi = ni.eigen(m, be, V)
    assert ni.newton_iteration(m, be, sysm, jac, V, poisson.density(np, rho, chi), eps, rho, bflat) is None


def test_iter_start_is_bitwise_the_array_code(be, rng):
    m = model("mesh.NX=17", "mesh.NZ=33")
    Vs = [rng.standard_normal((m.NX, m.NZ)) for _ in range(5)]
    for last in (None, poisson.LastStep(Vs[3], Vs[4], 0.37)):
        for s in range(3):
            ref = poisson.iter_start(m, NP, s, Vs[0], Vs[1:1 + s], last, 0.29)
            got = ni.iter_start(m, be, s, Vs[0], Vs[1:1 + s], last, 0.29)
            if ref is None:
                assert got is None and s == 0 and last is None
            else:
                np.testing.assert_array_equal(got, ref)


def test_iter_graph_run_equals_the_phases_one_by_one(monkeypatch):
    """Five steps of a tiny numba run with numerics.iter_graph auto (numba's newton_iteration for the kept
    Jacobian's iterations) and false (the phases one by one): the same Newton counts, Phi, V, eps, chi, rho
    and deps_dx within 1e-12 (measured: the same bits); newton_iteration ran, and run.json's
    implementations name it."""
    from solver.bsp.simulation import Simulation

    import functools

    calls = [0]
    fn = ni.newton_iteration

    @functools.wraps(fn)  # run.json's name: the function's
    def counted(*a, **k):
        calls[0] += 1
        return fn(*a, **k)
    monkeypatch.setitem(kernels.REGISTRY.table("numba"), "newton_iteration", counted)
    tiny = ["mesh.N_sbn=3", "mesh.NX=9", "mesh.NZ=13", "mesh.NW=12", "mesh.NPHI=8", "output.progress=false",
            "time.steps=5", "time.t_end_ps=null", "output.checkpoint_every_steps=0", "numerics.backend=numba",
            "numerics.threads=2"]
    runs = {}
    for flag in ("auto", "false"):
        calls[0] = 0
        sim = Simulation(load(None, tiny + [f"numerics.iter_graph={flag}"]), progress=False)
        newton = []
        step = sim.step

        def counted_step(sim=sim, step=step, newton=newton):
            step()
            newton.append(int(sim.state.newton_iterations))
        sim.step = counted_step
        sim.run(resume=False)
        runs[flag] = ({k: np.array(getattr(sim.state, k)) for k in ("Phi", "V", "eps", "chi", "rho", "deps_dx")},
                      newton, calls[0])
        impl = kernels.implementations(sim.model, sim.backend)
        if flag == "auto":
            assert impl["newton_iteration"].startswith("solver.bsp.kernels.numba.iter.newton_iteration [numerics.iter_graph=true"), impl
            assert impl["iter_start"] == "solver.bsp.kernels.numba.iter.iter_start"
        else:
            assert impl["newton_iteration"] == "solver.bsp.poisson.newton_iteration"
    (a, na, ca), (b, nb, cb) = runs["auto"], runs["false"]
    assert na == nb and ca >= 8 and cb == 0, (na, nb, ca, cb)
    for k in a:  # measured: the same bits (the density kernel sums as NumPy's einsum does here)
        assert rel(a[k], b[k]) <= TOL, (k, rel(a[k], b[k]))
