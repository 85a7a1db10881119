"""numerics.iter_graph (docs/performance-iter-graph.md): POTENTIAL's kept-Jacobian Newton iteration as
one call (phase newton_iteration; cupy: a CUDA graph replay, kernels/cuda/iter_graph.py).

CPU: the schema key and the dispatch; poisson._newton_loop's graph branch driven by the array
reference poisson.newton_iteration as a stand-in fast path on numpy (bitwise the run without it: the
same operations); the density kernel and the IterGraph's buffers and launches in the g++ emulation
(the capture itself stood in: the emulation cannot capture a graph).  GPU (``gpu`` marker): the density
kernel against CuPy's einsum, and whole runs with the graph against runs without it."""
from __future__ import annotations

import types

import numpy as np
import pytest

from solver.backend import get_backend
from solver.bsp import kernels, poisson
from solver.bsp.model import Model, load
from solver.config import ConfigError
from solver.dispatch import Registry

NP_BE = get_backend("numpy")
TINY = ["mesh.N_sbn=3", "mesh.NX=9", "mesh.NZ=13", "mesh.NW=16", "mesh.NPHI=8", "output.progress=false",
        "numerics.backend=numpy", "time.steps=4", "time.t_end_ps=null"]


def rel(a, b):
    a, b = np.asarray(a), np.asarray(b)
    return float(np.max(np.abs(a - b)) / max(np.max(np.abs(b)), 1e-300))


def test_schema_and_dispatch():
    assert load(None, [])["numerics"]["iter_graph"] == "auto"
    assert load(None, ["numerics.iter_graph=false"])["numerics"]["iter_graph"] is False
    assert load(None, ["numerics.iter_graph=true"])["numerics"]["iter_graph"] is True
    try:
        import jsonschema  # noqa: F401
    except ImportError:
        pass
    else:
        with pytest.raises(ConfigError):
            load(None, ["numerics.iter_graph=maybe"])
    cupy_like = types.SimpleNamespace(name="cupy")
    for value, on_cupy, on_numpy in (("auto", True, False), ("true", True, True), ("false", False, False)):
        m = Model(load(None, [f"numerics.iter_graph={value}"]))
        assert kernels.iter_graph(m, cupy_like) is on_cupy
        assert kernels.iter_graph(m, NP_BE) is on_numpy
    # numpy has no fast path: the reference is recorded, and _newton_loop keeps its own statements
    m = Model(load(None, ["numerics.iter_graph=true"]))
    assert kernels.lookup(m, NP_BE, "newton_iteration") is None
    assert kernels.implementations(m, NP_BE)["newton_iteration"] == "solver.bsp.poisson.newton_iteration"
    # a table that has it: returned only where numerics.iter_graph is on for the backend
    table = {"newton_iteration": poisson.newton_iteration}
    reg = Registry("bsp", {"numpy": lambda: table})
    real = kernels.REGISTRY
    try:
        kernels.REGISTRY = reg
        assert kernels.lookup(m, NP_BE, "newton_iteration") is poisson.newton_iteration
        assert kernels.lookup(Model(load(None, [])), NP_BE, "newton_iteration") is None  # auto: cupy only
        assert kernels.lookup(Model(load(None, ["numerics.iter_graph=true", "numerics.kernels=array"])), NP_BE,
                              "newton_iteration") is None
    finally:
        kernels.REGISTRY = real


def test_implementations_cupy_record_iter_graph(emulated_cuda, monkeypatch):
    """run.json's kernels.implementations on cupy (the emulated table behind a stand-in backend): the
    graph's function with the note that its iterations time ITER only; false: the reference."""
    monkeypatch.setattr(kernels, "REGISTRY", Registry("bsp", {"cupy": lambda: emulated_cuda.TABLE}))
    be = types.SimpleNamespace(name="cupy")
    on = kernels.implementations(Model(load(None, [])), be)["newton_iteration"]
    assert on == ("solver.bsp.kernels.cuda.iter_graph.newton_iteration [numerics.iter_graph=true; its iterations "
                  "time ITER only: eigen, Frechet, construct_linsys and solve_linsys are not timed apart there; "
                  "numerics.resolve=fused]")
    lv = kernels.implementations(Model(load(None, ["numerics.resolve=levels"])), be)["newton_iteration"]
    assert lv.endswith("not timed apart there; numerics.resolve=levels]")
    off = kernels.implementations(Model(load(None, ["numerics.iter_graph=false"])), be)["newton_iteration"]
    assert off == "solver.bsp.poisson.newton_iteration"
    assert kernels.lookup(Model(load(None, [])), be, "newton_iteration") is emulated_cuda.iter_graph.newton_iteration


def _run(overrides, table=None, monkeypatch=None):
    from solver.bsp.simulation import Simulation
    if table is not None:
        monkeypatch.setattr(kernels, "REGISTRY", Registry("bsp", {"numpy": lambda: table}))
    sim = Simulation(load(None, TINY + list(overrides)), NP_BE, None, progress=False)
    sim.run(resume=False)
    st = sim.state
    return ({k: np.array(getattr(st, k)) for k in ("Phi", "V", "eps", "rho", "deps_dx", "N")},
            (st.A_eps, st.newton_iterations, st.t), set(sim.timer.totals))


def test_newton_loop_graph_branch_with_the_reference_stand_in(monkeypatch):
    """poisson.newton_iteration (the array reference) as the numpy fast path of newton_iteration: the
    run is bitwise the run without it, the kept-Jacobian iterations go through it (counted: every
    stage of steps 2-4 but the first of a fresh Jacobian), and numerics.iter_graph=false never calls it."""
    calls = []

    def counted(*a):
        calls.append(a[5] is None)  # N None: the start's eigenpairs and density inside the call
        return poisson.newton_iteration(*a)
    table = {"newton_iteration": counted}
    ref, _, t_ref = _run(["numerics.iter_graph=false"], table, monkeypatch)
    assert calls == []
    new, s_new, t_new = _run(["numerics.iter_graph=true"], table, monkeypatch)
    ref2, s_ref, _ = _run([], None, monkeypatch)  # the default (auto: off on numpy), the plain table
    for k in ref:
        assert np.array_equal(ref[k], new[k]), k
        assert np.array_equal(ref[k], ref2[k]), k
    assert s_new == s_ref
    # this tiny mesh takes 4-14 Newton iterations per stage (each step's Jacobian afresh: more than
    # KEEP_MAX_NEWTON), so the kept Jacobian's stages are stages 2-3 of each step: 8 stages, those of
    # steps 2-4 from a prediction (6: the start inside the first call, N None), step 1's from the last
    # stage (its eigenpairs known); 56 calls with their later iterations
    assert sum(calls) == 6 and len(calls) == 56, (sum(calls), len(calls))
    # the graphed iterations time no sub-phase; the launched ones (step 1's) still do
    assert "step/ITER/eigen" in t_new and "step/ITER/eigen" in t_ref


def test_newton_iteration_none_falls_back(monkeypatch):
    """A fast path that returns None (it cannot run this iteration): the loop launches the iteration
    itself, the start's eigenpairs included, bitwise the run without it."""
    calls = []
    table = {"newton_iteration": lambda *a: calls.append(1)}
    ref, s_ref, _ = _run(["numerics.iter_graph=false"], None, monkeypatch)
    new, s_new, _ = _run(["numerics.iter_graph=true"], table, monkeypatch)
    assert len(calls) == 8  # once per kept-Jacobian stage: after a None the stage runs without it
    for k in ref:
        assert np.array_equal(ref[k], new[k]), k
    assert s_new == s_ref


def test_emulated_iter_density_matches_einsum(emulated_cuda):
    rng = np.random.default_rng(3)
    for NX, NS, NZ in ((5, 3, 13), (9, 6, 33)):
        rho = rng.uniform(0.0, 1.0, (NX, 3, NS))
        chi = rng.standard_normal((NX, 3, NS, NZ))
        N = emulated_cuda.iter_graph.density(rho, chi)
        ref = poisson.density(np, rho, chi)
        assert N.shape == (NX, NZ)
        assert rel(N, ref) <= 1e-15, rel(N, ref)
        # the kernel's sum: chi^2 rounded, then fused multiply-adds in the order of k, times 2
        i, z = NX - 1, NZ // 2
        acc = 0.0
        for k in range(3 * NS):
            c2 = chi[i].reshape(3 * NS, NZ)[k, z] ** 2
            acc = float(np.float64(acc) + np.float64(rho[i].ravel()[k]) * np.float64(c2))  # fma to ~1 ulp
        assert abs(N[i, z] - 2.0 * acc) <= 1e-14 * abs(N[i, z])


class _EagerGraph:
    """IterGraph's device calls stood in on the emulation: host copies, and a 'graph' that reruns the
    launches on the fixed buffers (the capture itself cannot be emulated)."""

    def __init__(self, ig_mod, monkeypatch):
        G = ig_mod.IterGraph
        self.graphs = []
        fake = self

        def capture(self, prologue):
            ig_mod._run_launches(self._launches, prologue)  # the warm-up run
            self.captures += 1
            fake.graphs.append(self)
            return types.SimpleNamespace(launch=lambda: self._launches(prologue))
        monkeypatch.setattr(G, "_capture", capture)
        monkeypatch.setattr(G, "_pinned", lambda self, n: np.zeros(n))
        monkeypatch.setattr(ig_mod._build, "put", lambda dst, src: dst.__setitem__(Ellipsis, src))
        monkeypatch.setattr(G, "_to_host", lambda self: self.host.__setitem__(Ellipsis, self.o_nrm))
        monkeypatch.setattr(G, "_wait", lambda self: None)
        monkeypatch.setattr(G, "_read_mark", lambda self: None)  # numerics.bte_speculate's wait for the copies
        monkeypatch.setattr(G, "_wait_mark", lambda self, mark: None)


def _emulated_iter_table(emulated_cuda, monkeypatch) -> dict:
    """The numpy backend's dispatch table: the emulated CUDA ITER kernels (newton_iteration among them); the table
    itself is returned (a test may wrap an entry)."""
    names = ("eigen", "Frechet", "construct_linsys", "solve_linsys", "newton_rhs", "newton_norms", "newton_norms_tail",
             "deps_dx", "iter_start", "linsys_rhs", "newton_iteration")
    table = {p: emulated_cuda.TABLE[p] for p in names}
    monkeypatch.setattr(kernels, "REGISTRY", Registry("bsp", {"numpy": lambda: table}))
    return table


def test_emulated_iter_graph_run(emulated_cuda, fake_graph_capture, monkeypatch):
    """Whole steps with the emulated ITER kernels (as test_bsp_kernels' emulated run), with and without
    newton_iteration (IterGraph's buffers and launches, its graph stood in by _EagerGraph): the same
    state to the density kernel's rounding (<= 1e-12), the same Newton counts, every kept-Jacobian
    stage through one 'stage' replay, two captures at most (stage, iteration)."""
    eager = _EagerGraph(emulated_cuda.iter_graph, monkeypatch)
    calls = []
    real = emulated_cuda.TABLE["newton_iteration"]
    _emulated_iter_table(emulated_cuda, monkeypatch)["newton_iteration"] = \
        lambda *a: calls.append(a[5] is None) or real(*a)
    from solver.bsp.simulation import Simulation
    runs = {}
    for flag in ("false", "true"):
        sim = Simulation(load(None, TINY + [f"numerics.iter_graph={flag}"]), NP_BE, None, progress=False)
        sim.run(resume=False)
        st = sim.state
        runs[flag] = ({k: np.array(getattr(st, k)) for k in ("Phi", "V", "eps", "rho", "deps_dx", "N")},
                      st.newton_iterations)
        if flag == "false":
            assert calls == []
    (a, na), (b, nb) = runs["false"], runs["true"]
    assert na == nb
    for k in a:
        assert rel(b[k], a[k]) <= 1e-12, (k, rel(b[k], a[k]))
    assert len(eager.graphs) in (1, 2) and len({id(g) for g in eager.graphs}) == 1
    g = eager.graphs[0]
    assert g.replays["stage"] == sum(calls) >= 2 and g.captures == len(eager.graphs) == 2
    assert g.replays["stage"] + g.replays["iteration"] == len(calls)


# ---------------------------------------------------------------------------- GPU
@pytest.mark.gpu
def test_cuda_iter_density_against_einsum(cupy_backend):
    """The graph's density kernel against CuPy's einsum (cuBLAS): equal to 1e-15 relative (H200: not the
    same bits, 2.6e-16 at most; the test prints it)."""
    import cupy as cp
    from solver.bsp.kernels.cuda import iter_graph
    rng = np.random.default_rng(5)
    for NX, NS, NZ in ((65, 6, 65), (65, 6, 129), (129, 6, 129), (17, 3, 17)):
        rho = cp.asarray(rng.uniform(0.0, 1.0, (NX, 3, NS)))
        chi = cp.asarray(rng.standard_normal((NX, 3, NS, NZ)))
        ref = cp.asnumpy(poisson.density(cp, rho, chi))
        a = cp.asnumpy(iter_graph.density(rho, chi))
        print(f"density {NX}x{NS}x{NZ}: kernel bitwise {np.array_equal(a, ref)} (max rel {rel(a, ref):.3e}, "
              f"{int(np.sum(a != ref))} of {a.size} differ)")
        assert rel(a, ref) <= 1e-15


@pytest.mark.gpu
@pytest.mark.parametrize("mesh", [("mesh.NX=17", "mesh.NZ=17", "mesh.NW=40", "mesh.NPHI=12"),
                                  ("mesh.NX=65", "mesh.NZ=65", "mesh.NW=24", "mesh.NPHI=8")])
def test_gpu_run_iter_graph_against_launched(cupy_backend, mesh):
    """12 cupy steps (the kept Jacobian across steps, afresh at step 11) with numerics.iter_graph true
    and false: the same Newton counts, the states equal to 1e-10 relative (the density kernel's rounding
    against the einsum's; the test prints whether bitwise), every kept-Jacobian stage through one
    'stage' replay (counted), two runs with the graph bitwise equal.  (H200, 2026-11-27: not bitwise,
    states within 2e-13, deps_dx within 2e-12 relative.)"""
    from solver.bsp.simulation import Simulation
    runs = {}
    for name in ("false", "true", "true2"):
        cfg = load(None, ["mesh.N_sbn=3", *mesh, "output.progress=false", "numerics.backend=cupy",
                          "time.steps=12", "time.t_end_ps=null", f"numerics.iter_graph={name[:5].rstrip('2')}"])
        sim = Simulation(cfg, cupy_backend, None, progress=False)
        sim.run(resume=False)
        st = sim.state
        g = sim.model.device_cache.get(("cuda.iter_graph", "dirichlet"))
        runs[name] = ({k: cupy_backend.to_numpy(getattr(st, k)) for k in ("Phi", "V", "eps", "rho", "deps_dx")},
                      (st.newton_iterations, st.t), None if g is None else dict(g.replays), set(sim.timer.totals))
    a, b, c = runs["false"], runs["true"], runs["true2"]
    bitwise = all(np.array_equal(a[0][k], b[0][k]) for k in a[0])
    print(f"iter_graph true vs false {mesh}: bitwise {bitwise}, "
          + ", ".join(f"{k} {rel(b[0][k], a[0][k]):.2e}" for k in a[0]) + f"; replays {b[2]}; Newton, t {a[1]} {b[1]}")
    assert a[2] is None and b[2] is not None
    # 36 stages; steps 2-12 start from a prediction (33, less those with a fresh Jacobian: step 11's first,
    # and each step's first after a step of more than KEEP_MAX_NEWTON iterations); step 1's stages 2-3
    # from the last stage's eigenpairs ("iteration" replays)
    assert 22 <= b[2]["stage"] <= 32 and b[2]["iteration"] >= 2, b[2]
    assert a[1][0] == b[1][0] and abs(a[1][1] - b[1][1]) <= 1e-12 * a[1][1]  # Newton count; t (dt from A_eps)
    for k in a[0]:
        assert rel(b[0][k], a[0][k]) <= 1e-10, k
        assert np.array_equal(b[0][k], c[0][k]), k  # run to run
    assert "step/ITER" in b[3]
    assert b[1] == c[1]


def test_emulated_resume_factors_the_checkpoints_kept_jacobian(emulated_cuda, fake_graph_capture, monkeypatch,
                                                               kept_jacobian_resume):
    """A checkpoint written between two Jacobian evaluations holds the kept Jacobian; the resumed step's first
    kept-Jacobian iteration finds no factorization of it (a new process's solver) and factors it first, launched
    (iter_graph.newton_iteration), then runs as the uninterrupted run: the same bytes.  (Before 8a1fd67 that
    factorization got a flat b and the resumed cupy run failed: docs/performance.md §25.)  cfl 0.01: one Newton
    iteration per stage, so the steps keep their Jacobian."""
    _EagerGraph(emulated_cuda.iter_graph, monkeypatch)
    _emulated_iter_table(emulated_cuda, monkeypatch)
    cfg = load(None, TINY + ["time.cfl=0.01", "time.steps=8", "output.checkpoint_every_steps=6",
                             "numerics.iter_graph=true"])
    kept_jacobian_resume(cfg, NP_BE, n=7, checkpoint_step=6)


def test_emulated_speculation_through_the_iteration_graph(emulated_cuda, fake_graph_capture, monkeypatch):
    """numerics.bte_speculate with IterGraph.run's ``before_read`` (called between the replay and the read; the
    emulation's A_eps is a host value, so the device scalar kernel is not on this path: test_bsp_speculate.py and the
    gpu tests have it): 8 steps with and without it bitwise equal, stages taken."""
    from solver.bsp.simulation import Simulation
    _EagerGraph(emulated_cuda.iter_graph, monkeypatch)
    _emulated_iter_table(emulated_cuda, monkeypatch)
    runs = {}
    for flag in ("false", "true"):
        sim = Simulation(load(None, TINY + ["time.cfl=0.01", "time.steps=8", "numerics.iter_graph=true",
                                            f"numerics.bte_speculate={flag}"]), NP_BE, None, progress=False)
        sim.run(resume=False)
        runs[flag] = ({k: np.array(getattr(sim.state, k)) for k in ("Phi", "V", "eps", "rho", "deps_dx", "N")},
                      dict(sim.speculation))
    assert runs["false"][1] == {"bte_speculated": 0, "bte_speculation_dropped": 0}
    assert runs["true"][1]["bte_speculated"] >= 6, runs["true"][1]
    for k in runs["false"][0]:
        assert np.array_equal(runs["false"][0][k], runs["true"][0][k]), k
