"""numerics.bte_speculate: the next RK stage's BTE launched inside ITER, before the first kept-Jacobian Newton
iteration's host read (Simulation's _Speculation, poisson.newton_iteration's ``before_read``, PhaseTimer.aside).
On numba nothing overlaps (the same work in another order), which is what these tests need: the state equals the
run without it bit for bit, a stage is taken where ITER accepted the iterate it was launched from, dropped where
not, and the key resolves as documented.  The cupy path (A_eps on the device, bsp_scal, the graphs) is tested in
test_bsp_speculate_gpu.py."""
import types

import numpy as np
import pytest

from solver import provenance
from solver.backend import get_backend
from solver.bsp import kernels
from solver.bsp.model import load
from solver.bsp.simulation import Simulation

pytest.importorskip("numba")

# cfl 0.01: one Newton iteration per stage after the first steps (0.05: several, so every launch is dropped)
BASE = ["mesh.N_sbn=3", "mesh.NX=9", "mesh.NZ=13", "mesh.NW=12", "mesh.NPHI=8", "output.progress=false",
        "numerics.backend=numba", "time.t_end_ps=null", "time.steps=12"]
FIELDS = ("Phi", "V", "eps", "chi", "rho", "PhiHat", "deps_dx", "N")


def _run(*extra):
    sim = Simulation(load(None, BASE + list(extra)), get_backend("numba", 2), None, progress=False)
    rec = sim.run(resume=False)
    return sim, rec


def _same_state(a, b):
    for k in FIELDS:
        assert np.array_equal(np.asarray(getattr(a.state, k)), np.asarray(getattr(b.state, k))), k
    assert a.state.t == b.state.t and a.state.A_eps == b.state.A_eps
    assert [r["mean_current_A_per_m"] for r in a.scalars] == [r["mean_current_A_per_m"] for r in b.scalars]


def test_speculated_stages_equal_the_stages_launched_after_iter():
    off, rec_off = _run("time.cfl=0.01", "numerics.bte_speculate=false")
    on, rec_on = _run("time.cfl=0.01", "numerics.bte_speculate=true")
    _same_state(off, on)
    n = on.speculation["bte_speculated"]
    assert n >= 15 and on.speculation["bte_speculation_dropped"] == 0  # stages 2 and 3 of the one-iteration steps
    assert rec_on["timers"]["bte_speculated"] == n and "bte_speculated" not in rec_off["timers"]
    assert rec_on["kernels"]["bte_speculate"] is True and rec_off["kernels"]["bte_speculate"] is False
    # every stage's BTE timed once as step/BTE (a speculated one beside ITER), ITER once per stage
    for rec in (rec_off, rec_on):
        assert rec["timers"]["calls"]["step/BTE"] == 36 and rec["timers"]["calls"]["step/ITER"] == 36
    assert rec_on["summary"]["steps"] == 12


def test_a_launch_from_an_iterate_that_iter_does_not_accept_is_dropped(monkeypatch):
    """cfl 0.05: the first Newton iteration is never the last; with the one-iteration condition taken away every
    stage 2 and 3 of a kept-Jacobian step launches its BTE, drops it, and launches it again after ITER: the state is
    the run's without speculation, bit for bit."""
    monkeypatch.setattr(Simulation, "_speculating", lambda self: self._speculate)
    off, _ = _run("time.cfl=0.05", "numerics.bte_speculate=false")
    on, rec = _run("time.cfl=0.05", "numerics.bte_speculate=true")
    _same_state(off, on)
    assert on.speculation["bte_speculated"] == 0 and on.speculation["bte_speculation_dropped"] >= 10
    assert rec["timers"]["calls"]["step/BTE"] == 36 + on.speculation["bte_speculation_dropped"]


def test_the_one_iteration_condition_keeps_launches_from_multi_iteration_stages():
    on, _ = _run("time.cfl=0.05", "numerics.bte_speculate=true")
    assert on.speculation == {"bte_speculated": 0, "bte_speculation_dropped": 0}


@pytest.mark.parametrize("sets, backend, expected", [
    ([], "cupy", True),
    ([], "numba", False),
    ([], "numpy", False),
    (["numerics.bte_speculate=true"], "numba", True),
    (["numerics.bte_speculate=false"], "cupy", False),
    (["numerics.overlap=true"], "cupy", False),
    (["numerics.iter_overlap=true"], "cupy", False),
    (["numerics.iter_graph=false"], "cupy", False),
    (["numerics.bte_speculate=true", "numerics.iter_graph=false"], "numba", False),
])
def test_the_key_resolves(sets, backend, expected):
    model = types.SimpleNamespace(cfg=load(None, sets))
    assert kernels.bte_speculate(model, types.SimpleNamespace(name=backend)) is expected


def test_the_key_leaves_the_configuration_hash_alone():
    """Same bits either way: a checkpoint written with it resumes without it and back."""
    a, b = load(None, ["numerics.bte_speculate=true"]), load(None, ["numerics.bte_speculate=false"])
    assert provenance.config_hash(a) == provenance.config_hash(b)
    assert provenance.config_hash(a) != provenance.config_hash(load(None, ["numerics.bte_graph=true"]))


def test_emulated_scal_kernel_forms_the_hosts_alpha(emulated_cuda, bte_cases):
    """Kernel bsp_scal (rk.cu, built on the host): alpha = A_eps A_3 as the host forms it, and dt, bit for bit."""
    rk = emulated_cuda.rk
    m = bte_cases.model(kernels_mode="auto", NX=9, NS=2, NW=13, NPHI=8)
    rng = np.random.default_rng(3)
    for a in np.concatenate([rng.uniform(0.0, 50.0, 8), [0.0, 1e-300, 3.7e12]]):
        scal = rk.scal_into(m, np.array([a]), 0.125, np.empty(2))
        assert scal[0] == float(float(a) * m.A3) and scal[1] == 0.125
