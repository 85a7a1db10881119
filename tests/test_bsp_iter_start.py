"""numerics.iter_start = extrapolate and numerics.iter_stop = estimate, the defaults (solver/bsp/poisson.py,
Simulation._iter_start): the POTENTIAL Newton of each RK stage starts from a second-order
prediction and stops once the error left is estimated below tol_potential.  Known answers: the
stopping test on hand-made norms, the predictor exact for V linear in time, and on a tiny device
the same potential as the reference within the tolerance with fewer Newton iterations."""
from types import SimpleNamespace

import numpy as np
import pytest

from solver.backend import get_backend
from solver.bsp import poisson
from solver.bsp.model import load
from solver.bsp.simulation import Simulation

TINY = ["mesh.N_sbn=6", "mesh.NX=9", "mesh.NZ=13", "mesh.NW=12", "mesh.NPHI=8",
        "output.progress=false", "numerics.backend=numpy", "time.t_end_ps=null"]


def norms(v):
    return dict.fromkeys(poisson.NORM_KEYS, v)


def test_estimate_stops_when_theta_over_one_minus_theta_times_change_is_below_tol():
    assert poisson.converged_by_estimate(norms(1e-4), 1e-3, 1e-6)  # 1e-3 / 0.999 x 1e-4 ~ 1.0e-7
    assert not poisson.converged_by_estimate(norms(1e-4), 2e-2, 1e-6)  # ~ 2.0e-6
    assert not poisson.converged_by_estimate(norms(1e-4), 7e-3, 1e-6)  # ~ 7.0e-7: above half the tolerance
    assert not poisson.converged_by_estimate(norms(1e-4), None, 1e-6)  # nothing measured: off
    assert not poisson.converged_by_estimate(norms(1e-9), 0.2, 1e-6)  # slow iteration: change test only
    mixed = norms(1e-8) | {"dN_l2": 1e-2}
    assert not poisson.converged_by_estimate(mixed, 1e-3, 1e-6)  # every norm must pass


def test_stage_predictions_are_exact_for_a_potential_linear_in_time():
    cfg = load(None, TINY + ["time.steps=1"])
    sim = Simulation(cfg, get_backend("numpy"), progress=False)
    a, b, c = np.full((9, 13), 0.3), np.full((9, 13), -0.2), np.full((9, 13), 0.45)
    V = lambda t: a + b * t  # noqa: E731
    dt, dt_o = 0.7, 0.5
    sim.state = SimpleNamespace(step=2)  # V^n of a POTENTIAL solve (step >= 1)
    sim._V_last, sim._last_dt = (V(-dt_o), V(0)), dt_o  # V^(n-1) and its Euler stage V^(1)
    exact = dict(rtol=0, atol=1e-14)
    np.testing.assert_allclose(sim._iter_start(0, V(0), [], dt), V(dt), **exact)
    np.testing.assert_allclose(sim._iter_start(1, V(0), [V(dt)], dt), V(dt / 2), **exact)
    np.testing.assert_allclose(sim._iter_start(2, V(0), [V(dt), V(dt / 2)], dt), V(dt), **exact)
    # quadratic in time: the Euler stage V^n + dt V'(t_n) still exactly (V' from the last step)
    Vq = lambda t: a + b * t + c * t * t  # noqa: E731
    sim._V_last = (Vq(-dt_o), Vq(-dt_o) + dt_o * (b - 2 * c * dt_o))
    np.testing.assert_allclose(sim._iter_start(0, Vq(0), [], dt), a + b * dt, **exact)
    sim.cfg["numerics"]["iter_start"] = "previous"
    assert sim._iter_start(2, V(0), [V(dt), V(dt / 2)], dt) is None
    sim.cfg["numerics"]["iter_start"] = "extrapolate"
    sim.state.step = 0  # V^n is THERMEQUIL's: no prediction
    assert sim._iter_start(1, V(0), [V(dt)], dt) is None
    sim.state.step, sim._V_last = 1, None  # no last step: stage 1 as the reference, stage 2 to first order
    assert sim._iter_start(0, V(0), [], dt) is None
    np.testing.assert_allclose(sim._iter_start(1, V(0), [V(dt)], dt), V(dt / 2), **exact)


def _run(*extra, steps=8):
    cfg = load(None, TINY + [f"time.steps={steps}", *extra])
    sim = Simulation(cfg, get_backend("numpy"), progress=False)
    newton = []
    step = sim.step

    def counted():
        step()
        newton.append(sim.state.newton_iterations)
    sim.step = counted
    sim.run()
    return sim, newton


@pytest.fixture(scope="module")
def runs():
    return {"reference": _run("numerics.iter_start=previous", "numerics.iter_stop=change"),
            "fast": _run()}  # the defaults: extrapolate, estimate


def test_fewer_newton_iterations_and_the_same_run_to_well_below_its_accuracy(runs):
    (ref, n_ref), (fast, n_fast) = runs["reference"], runs["fast"]
    assert n_fast[0] == n_ref[0]  # the first step starts from the equilibrium: no prediction
    assert sum(n_fast[2:]) < 0.6 * sum(n_ref[2:]), (n_ref, n_fast)
    rel = abs(fast.scalars[-1]["mean_current_A_per_m"] / ref.scalars[-1]["mean_current_A_per_m"] - 1)
    assert rel < 1e-6
    assert np.max(np.abs(fast.state.V - ref.state.V)) < 1e-6 * np.max(np.abs(ref.state.V))


def test_a_solve_stopped_by_the_estimate_is_within_tol_of_the_converged_potential(runs):
    fast = runs["fast"][0]
    st, be, m = fast.state, fast.backend, fast.model
    tol = fast.cfg["numerics"]["tol_potential"]
    assert max(fast._iter.norms.values()) > tol  # the last solve stopped by the estimate, not the change test
    tight = poisson.potential(m, be, st.V, st.rho, fast.eq.V_b, tol=1e-13)  # the same rho, to round-off
    assert tight.converged
    assert 0 < np.max(np.abs(st.V - tight.V)) < tol


def test_the_checkpoint_carries_the_predictor_and_the_contraction(tmp_path, dies_after):
    cfg = load(None, TINY + ["time.steps=4", "output.checkpoint_every_steps=2"])  # extrapolate, estimate
    s = dies_after(cfg, get_backend("numpy"), tmp_path, progress=False, n=3)
    saved = {}
    save = s.save_checkpoint

    def recording(*a, **k):  # what the run held when it wrote the checkpoint (step 2)
        save(*a, **k)
        saved.update(it=(s._iter.contraction, s._iter.contraction_age), dt=s._last_dt,
                     V=[np.copy(v) for v in s._V_last])
    s.save_checkpoint = recording
    with pytest.raises(dies_after.Interrupted):
        s.run()
    r = Simulation(cfg, get_backend("numpy"), tmp_path, progress=False)
    r.startup()
    assert r.load_checkpoint(tmp_path / "checkpoint.h5") and r.state.step == 2
    assert saved["it"][0] is not None
    assert (r._iter.contraction, r._iter.contraction_age) == saved["it"]
    assert r._last_dt == saved["dt"]
    for a, b in zip(r._V_last, saved["V"], strict=True):
        np.testing.assert_array_equal(a, b)
