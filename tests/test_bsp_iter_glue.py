"""The glue of ITER around the Newton kernels (docs/performance-iter-glue.md): POTENTIAL's boundary
values kept per bias (poisson._potential_boundary), the stage tail brought along by the last Newton
norms (IterResult.tail, poisson.norms_tail), the prediction of a stage's start as one function
(poisson.iter_start) and the right-hand side alone with a kept Jacobian (poisson.linsys_rhs).  The
CUDA kernels of these are tested in tests/test_bsp_kernels_cuda_newton.py."""
import numpy as np
import pytest

from solver.backend import get_backend
from solver.bsp import poisson
from solver.bsp.model import Model, load

NP = get_backend("numpy")
TINY = ["mesh.N_sbn=4", "mesh.NX=9", "mesh.NZ=13", "mesh.NW=12", "mesh.NPHI=8", "numerics.backend=numpy"]


def _model(*extra):
    return Model(load(None, TINY + list(extra)))


def test_potential_boundary_values_are_kept_per_bias(monkeypatch):
    """One host read of V_b per bias: the same read-only array while V_b and the bias stay, fresh
    values when the bias ramps (Simulation._ramp_bias replaces model.cfg) or V_b is another array."""
    m = _model()
    sysm = poisson._system(m, "dirichlet")
    V_b = np.linspace(0.1, 0.3, m.NZ)
    reads = []
    monkeypatch.setattr(NP, "to_numpy", lambda a: reads.append(1) or np.asarray(a))
    b1 = poisson._potential_boundary(m, NP, sysm, V_b)
    assert b1.ndim == 1 and not b1.flags.writeable
    np.testing.assert_array_equal(b1, sysm.boundary_values(m, V_b, V_b + m.V_DS).ravel())
    assert poisson._potential_boundary(m, NP, sysm, V_b) is b1 and len(reads) == 1
    m.cfg = {**m.cfg, "bias": {**m.cfg["bias"], "V_DS": m.cfg["bias"]["V_DS"] + 0.1}}
    b2 = poisson._potential_boundary(m, NP, sysm, V_b)
    assert b2 is not b1 and len(reads) == 2
    np.testing.assert_array_equal(b2, sysm.boundary_values(m, V_b, V_b + m.V_DS).ravel())
    assert not np.array_equal(b1, b2)
    m.cfg = {**m.cfg, "bias": {**m.cfg["bias"], "V_G": m.cfg["bias"]["V_G"] + 0.05}}
    b3 = poisson._potential_boundary(m, NP, sysm, V_b)
    np.testing.assert_array_equal(b3, sysm.boundary_values(m, V_b, V_b + m.V_DS).ravel())
    assert len(reads) == 3 and not np.array_equal(b2, b3)
    b4 = poisson._potential_boundary(m, NP, sysm, V_b.copy())
    assert b4 is not b3 and len(reads) == 4
    np.testing.assert_array_equal(b4, b3)


def _fake_tail_lookup(real):
    """kernels.lookup with newton_norms and newton_norms_tail served by the array references (the
    shape of the cupy path: the tail formed with the last norms), everything else as it was."""
    def norms_fast(model, backend, V_new, V_old, N_new, N_old, x):
        xp = backend.xp
        return poisson.norms(xp, model, V_new, V_old, N_new, N_old), bool(xp.all(xp.isfinite(x)))

    def lookup(model, backend, name):
        if name == "newton_norms":
            return norms_fast
        if name == "newton_norms_tail":
            return poisson.norms_tail
        return real(model, backend, name)
    return lookup


def test_the_stage_tail_comes_with_the_last_norms(monkeypatch):
    """Where newton_norms_tail has a fast path, POTENTIAL's result carries (d eps/dx, A_eps, finite V)
    of its V and eps, bit for bit schrodinger.deps_dx_max's; the numpy path carries none; V is the same."""
    from solver.bsp import schrodinger
    from solver.bsp.simulation import Simulation
    cfg = load(None, TINY + ["output.progress=false", "time.t_end_ps=null", "time.steps=3"])
    runs = {}
    for name in ("reference", "tail"):
        with monkeypatch.context() as mp:
            if name == "tail":
                mp.setattr(poisson._kernels, "lookup", _fake_tail_lookup(poisson._kernels.lookup))
            sim = Simulation(cfg, NP, progress=False)
            sim.startup()
            st = sim.state
            res = poisson.potential(sim.model, NP, st.V, st.rho, sim.eq.V_b, state=sim._iter, tail=True)
            runs[name] = (res, sim)
            sim._timer_rows = []
            for _ in range(3):
                sim.step()
    ref, tl = runs["reference"][0], runs["tail"][0]
    assert ref.tail is None and tl.tail is not None
    np.testing.assert_array_equal(tl.V, ref.V)
    d, A, fin = tl.tail
    d_ref, A_ref, fin_ref = schrodinger.deps_dx_max(runs["tail"][1].model, NP, tl.eps, tl.V)
    assert np.array_equal(d, d_ref) and A == A_ref and fin is fin_ref is True
    (sa, ta), (sb, tb) = ((r[1].state, r[1].timer) for r in (runs["reference"], runs["tail"]))
    for k in ("V", "eps", "deps_dx", "Phi"):
        np.testing.assert_array_equal(getattr(sb, k), getattr(sa, k), err_msg=k)
    assert sa.A_eps == sb.A_eps and sa.newton_iterations == sb.newton_iterations
    assert "step/ITER/deps_dx" in ta.totals and "step/ITER/deps_dx" not in tb.totals


def test_the_prediction_forms_the_last_steps_slope_once_per_step(monkeypatch):
    """poisson.LastStep.d_o is formed on first use and kept; Simulation._last_step gives one LastStep
    per step (a new one when _V_last or the last dt change)."""
    from solver.bsp.simulation import Simulation
    sim = Simulation(load(None, TINY + ["output.progress=false"]), NP, progress=False)
    V0, V1 = np.zeros((3, 4)), np.ones((3, 4))
    sim._V_last, sim._last_dt = (V0, V1), 0.5
    last = sim._last_step()
    assert sim._last_step() is last and last.d_o is last.d_o
    np.testing.assert_array_equal(last.d_o, (V1 - V0) / 0.5)
    sim._last_dt = 0.25
    assert sim._last_step() is not last and sim._last_step().dt_o == 0.25
    sim._V_last = (V0, 2 * V1)
    np.testing.assert_array_equal(sim._last_step().d_o, 2 * V1 / 0.25)
    sim._V_last = None
    assert sim._last_step() is None


@pytest.mark.parametrize("tail", [False, True])
def test_a_non_finite_update_fails_alike_with_the_tail(monkeypatch, tail):
    """The finite check of the Newton update x is made from the norms' host read with and without
    the tail (the same _LinearSolveFailed, 'non-finite Newton update')."""
    m = _model()
    sysm = poisson._system(m, "dirichlet")
    V_b = np.linspace(0.1, 0.3, m.NZ)
    V = np.broadcast_to(V_b, (m.NX, m.NZ)).copy()
    rho = np.full((m.NX, 3, m.N_sbn), 1e-3)
    solve = poisson.solve_linsys

    def bad_solve(*a, **k):
        x = solve(*a, **k)
        x[5] = np.nan
        return x
    monkeypatch.setattr(poisson._kernels, "lookup", _fake_tail_lookup(poisson._kernels.lookup))
    monkeypatch.setattr(poisson, "solve_linsys", bad_solve)
    bvals = poisson._potential_boundary(m, NP, sysm, V_b)
    with pytest.raises(poisson._LinearSolveFailed, match="non-finite Newton update in iteration 1"):
        poisson._newton_loop(m, NP, "POTENTIAL", V, sysm, bvals, lambda e: rho, None, 1e-6, 5, None, tail=tail)
