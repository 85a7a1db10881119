"""numerics.iter_jacobian = step, the default (solver/bsp/poisson.py _newton_loop's ``keep``,
Simulation.step): simplified Newton, the Frechet kernel and Newton matrix of the first iteration of a
step's first RK stage kept for the step's later iterations and stages, the matrix factored once per
step (docs/performance-iter-jacobian.md).  Against iter_jacobian = iteration (Newton): the same run to
well below the Newton tolerance, fewer Jacobian evaluations and factorizations, and a failing kept
Jacobian falls back to plain Newton."""
import numpy as np
import pytest

from solver.backend import get_backend
from solver.bsp import poisson
from solver.bsp.model import load
from solver.bsp.simulation import Simulation

TINY = ["mesh.N_sbn=6", "mesh.NX=9", "mesh.NZ=13", "mesh.NW=12", "mesh.NPHI=8",
        "output.progress=false", "numerics.backend=numpy", "time.t_end_ps=null"]
STEPS = 10


def _run(monkeypatch, *extra):
    """(sim, Newton iterations per step, Frechet evaluations, factorizations) of a TINY run."""
    counts = {"frechet": 0, "factor": 0}
    frechet, splu = poisson.frechet, poisson.spla.splu

    def counted_frechet(*a, **k):
        counts["frechet"] += 1
        return frechet(*a, **k)

    def counted_splu(*a, **k):
        counts["factor"] += 1
        return splu(*a, **k)
    with monkeypatch.context() as mp:
        mp.setattr(poisson, "frechet", counted_frechet)
        mp.setattr(poisson.spla, "splu", counted_splu)
        sim = Simulation(load(None, TINY + [f"time.steps={STEPS}", *extra]), get_backend("numpy"), progress=False)
        newton, start = [], {}
        step = sim.step

        def counted():  # the counts from the first step on (not INITCOND / THERMEQUIL)
            start.update(start or counts)
            step()
            newton.append(sim.state.newton_iterations)
        sim.step = counted
        sim.run()
    return sim, newton, counts["frechet"] - start["frechet"], counts["factor"] - start["factor"]


@pytest.fixture(scope="module")
def runs():
    mp = pytest.MonkeyPatch()
    try:
        return {"newton": _run(mp, "numerics.iter_jacobian=iteration"), "step": _run(mp)}
    finally:
        mp.undo()


def test_one_jacobian_per_step_and_the_same_run_to_well_below_the_tolerance(runs):
    ref, n_ref, fr_ref, lu_ref = runs["newton"]
    fast, n_fast, fr_fast, lu_fast = runs["step"]
    assert fr_ref == lu_ref == sum(n_ref)  # Newton: a Jacobian and a factorization per iteration
    assert fr_fast == lu_fast == STEPS  # simplified Newton: one per step, no refresh on this run
    assert sum(n_fast) <= sum(n_ref) + 1, (n_ref, n_fast)
    tol = ref.cfg["numerics"]["tol_potential"]
    assert np.max(np.abs(fast.state.V - ref.state.V)) < 0.05 * tol
    rel = abs(fast.scalars[-1]["mean_current_A_per_m"] / ref.scalars[-1]["mean_current_A_per_m"] - 1)
    assert rel < 1e-6


@pytest.mark.parametrize("scale", [-1.0, np.nan])
def test_a_kept_jacobian_that_fails_is_evaluated_afresh(runs, scale):
    """A kept Jacobian far off (F x -1: the change shrinks by less than THETA_REFRESH, evaluated afresh
    within the solve) or unusable (NaN: the update is not finite, plain Newton from the start): the
    solve converges to the one from a fresh Jacobian to well below the tolerance and keeps a fresh one."""
    sim = runs["step"][0]
    st, be, m = sim.state, sim.backend, sim.model
    tol = sim.cfg["numerics"]["tol_potential"]
    V0 = st.V.copy()
    V0[1:-1, 1:-1] += 0.05  # a start off the solution
    fresh = poisson.potential(m, be, st.V, st.rho, sim.eq.V_b, V_start=V0)
    F = fresh.jacobian[0]
    sysm = poisson._system(m, "dirichlet")
    bad_F = scale * F
    bad = (bad_F, poisson.construct_linsys(m, be, sysm, bad_F, np.zeros_like(F[..., 0]), np.zeros(m.NX * m.NZ))[0])
    res = poisson.potential(m, be, st.V, st.rho, sim.eq.V_b, V_start=V0, jacobian=bad)
    assert res.converged and res.method == "newton" and res.jacobian is not None
    assert res.jacobian[0] is not bad_F and np.all(np.isfinite(res.jacobian[0]))
    assert res.iterations > fresh.iterations
    assert np.max(np.abs(res.V - fresh.V)) < tol


def test_iteration_mode_keeps_no_jacobian(runs):
    sim = runs["newton"][0]
    assert sim._iter.jacobian is None
    assert runs["step"][0]._iter.jacobian is not None
