"""numerics.iter_jacobian = step, the default (solver/bsp/poisson.py _newton_loop's ``keep``,
Simulation.step): simplified Newton, the Frechet kernel and Newton matrix of the first iteration of a
step's first RK stage kept for the later iterations and stages of up to numerics.iter_jacobian_steps
steps (default 10; into the next step only after one of at most poisson.KEEP_MAX_NEWTON iterations),
the matrix factored once in that time (docs/performance-iter-jacobian.md).  Against iter_jacobian = iteration (Newton): the same run to
well below the Newton tolerance, fewer Jacobian evaluations and factorizations, and a failing kept
Jacobian falls back to plain Newton."""
import numpy as np
import pytest
import scipy.sparse.linalg as spla

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
    frechet, splu = poisson.frechet, spla.splu

    def counted_frechet(*a, **k):
        counts["frechet"] += 1
        return frechet(*a, **k)

    def counted_splu(*a, **k):
        counts["factor"] += 1
        return splu(*a, **k)
    with monkeypatch.context() as mp:
        mp.setattr(poisson, "frechet", counted_frechet)
        mp.setattr(spla, "splu", counted_splu)
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
        loose = "numerics.tol_potential=1.0e-4"  # 1 iteration per stage: Jacobians kept across steps
        return {"newton": _run(mp, "numerics.iter_jacobian=iteration"), "step": _run(mp),
                "newton_loose": _run(mp, loose, "numerics.iter_jacobian=iteration"), "step_loose": _run(mp, loose),
                "step_loose_1": _run(mp, loose, "numerics.iter_jacobian_steps=1")}
    finally:
        mp.undo()


@pytest.mark.parametrize("ref_name, name, jacobians, extra", [
    ("newton", "step", (STEPS, STEPS), 1),  # 6 iterations per step: evaluated afresh every step
    ("newton_loose", "step_loose", (2, 4), STEPS // 2),  # 3-5 per step: kept across steps
    ("newton_loose", "step_loose_1", (STEPS, STEPS), 1)])  # iter_jacobian_steps = 1
def test_few_jacobians_and_the_same_run_to_well_below_the_tolerance(runs, ref_name, name, jacobians, extra):
    ref, n_ref, fr_ref, lu_ref = runs[ref_name]
    fast, n_fast, fr_fast, lu_fast = runs[name]
    assert fr_ref == lu_ref == sum(n_ref)  # Newton: a Jacobian and a factorization per iteration
    assert fr_fast == lu_fast and jacobians[0] <= fr_fast <= jacobians[1], (fr_fast, n_fast)
    assert sum(n_fast) <= sum(n_ref) + extra, (n_ref, n_fast)
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


def test_a_run_resumed_with_a_kept_jacobian_is_byte_identical(tmp_path, dies_after):
    """The checkpoint carries the kept Jacobian's Frechet blocks; the resumed run rebuilds and refactors
    the matrix (the same bits) and continues as the uninterrupted run, which keeps it across step 3."""
    import h5py
    import pandas as pd

    cfg = load(None, TINY + ["time.steps=6", "output.checkpoint_every_steps=3", "numerics.tol_potential=1.0e-4"])
    a, b = tmp_path / "a", tmp_path / "b"
    full = Simulation(cfg, get_backend("numpy"), a, progress=False)
    kept = []
    step = full.step

    def recording():
        jac = getattr(full, "_jacobian", None)
        step()
        kept.append(jac is not None and full._jacobian is not None and full._jacobian[0] is jac[0])
    full.step = recording
    full.run()
    assert kept[3], kept  # step 4 (after the checkpoint at step 3) kept step 3's Jacobian
    s = dies_after(cfg, get_backend("numpy"), b, progress=False, n=4)
    with pytest.raises(dies_after.Interrupted):
        s.run()
    with h5py.File(b / "checkpoint.h5", "r") as f:
        assert f.attrs["step"] == 3 and "iter_jacobian_F" in f
    Simulation(cfg, get_backend("numpy"), b, progress=False).run(resume=True)
    for name in ("scalars.csv", "profiles.csv"):
        np.testing.assert_array_equal(pd.read_csv(a / name).to_numpy(), pd.read_csv(b / name).to_numpy())
    with h5py.File(a / "fields.h5", "r") as fa, h5py.File(b / "fields.h5", "r") as fb:
        np.testing.assert_array_equal(fa["V"][...], fb["V"][...])
