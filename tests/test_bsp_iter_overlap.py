"""numerics.iter_overlap (docs/performance-iter-overlap.md): the prologue of a stage's first kept-Jacobian
Newton iteration (its start V_start and the start's eigenpairs) launched on a second stream while the
stage's BTE runs (poisson.iter_prologue; cupy: kernels/cuda/iter_graph.py ``Early``), the ``stage`` graph
then replayed less its eigen launches (``stage_o``).

CPU: the schema key, the dispatch and run.json's record; whole runs in the g++ emulation (IterGraph's
graph stood in as in test_bsp_iter_graph.py, the streams and events by a logger): the same bits as
without it, the events in the order that keeps the side stream and the main stream apart, and the
cases where the early eigenpairs must not be used (a fresh Jacobian, the first steps, iter_start =
previous, a graph that returns None, damped restarts, Gummel, a start that is not the launched one),
there poisoned with NaN.  GPU (``gpu`` marker): whole runs with and without it bitwise equal, two runs
bitwise equal, a resumed run byte-identical."""
from __future__ import annotations

import types

import numpy as np
import pytest

from solver.bsp import bte, kernels, poisson
from solver.bsp.model import Model, load
from solver.config import ConfigError
from solver.dispatch import Registry
from test_bsp_iter_graph import NP_BE, TINY, _EagerGraph

STATE = ("Phi", "V", "eps", "chi", "rho", "deps_dx", "N")
NAMES = ("eigen", "Frechet", "construct_linsys", "solve_linsys", "newton_rhs", "newton_norms", "newton_norms_tail",
         "deps_dx", "iter_start", "linsys_rhs", "newton_iteration", "iter_prologue")


def test_schema_dispatch_and_record(emulated_cuda, monkeypatch):
    assert load(None, [])["numerics"]["iter_overlap"] == "auto"
    assert load(None, ["numerics.iter_overlap=false"])["numerics"]["iter_overlap"] is False
    assert load(None, ["numerics.iter_overlap=true"])["numerics"]["iter_overlap"] is True
    with pytest.raises(ConfigError) as err:
        load(None, ["numerics.iter_overlap=maybe"])
    msg = str(err.value)
    assert "numerics.iter_overlap" in msg and "maybe" in msg and "\n" not in msg
    cupy_like = types.SimpleNamespace(name="cupy")
    for over, graph, on_cupy, on_numpy in (("auto", "auto", False, False), ("true", "true", True, True),
                                           ("true", "auto", True, False),
                                           ("false", "auto", False, False), ("true", "false", False, False),
                                           ("auto", "false", False, False)):
        m = Model(load(None, [f"numerics.iter_overlap={over}", f"numerics.iter_graph={graph}"]))
        assert kernels.iter_overlap(m, cupy_like) is on_cupy, (over, graph)
        assert kernels.iter_overlap(m, NP_BE) is on_numpy, (over, graph)
    # numpy has no fast path: the reference (nothing early) runs and is recorded
    m = Model(load(None, ["numerics.iter_overlap=true", "numerics.iter_graph=true"]))
    assert kernels.lookup(m, NP_BE, "iter_prologue") is None
    assert poisson.iter_prologue(m, NP_BE, (None, None), np.zeros(3)) is None
    assert kernels.implementations(m, NP_BE)["iter_prologue"] == "solver.bsp.poisson.iter_prologue"
    # cupy's table (the emulated one behind a stand-in backend): recorded with its variant
    monkeypatch.setattr(kernels, "REGISTRY", Registry("bsp", {"cupy": lambda: emulated_cuda.TABLE}))
    on = kernels.implementations(Model(load(None, ["numerics.iter_overlap=true"])), cupy_like)
    assert on["iter_prologue"] == ("solver.bsp.kernels.cuda.iter_graph.iter_prologue [numerics.iter_overlap=true: "
                                   "the start's eigenpairs on a second stream during the BTE, timed as "
                                   "ITER_prologue there]")
    assert kernels.lookup(Model(load(None, ["numerics.iter_overlap=true"])), cupy_like,
                          "iter_prologue") is emulated_cuda.iter_graph.iter_prologue
    for off in ([], ["numerics.iter_overlap=false"], ["numerics.iter_overlap=true", "numerics.iter_graph=false"],
                ["numerics.iter_overlap=true", "numerics.kernels=array"]):
        assert kernels.implementations(Model(load(None, off)), cupy_like)["iter_prologue"] == \
            "solver.bsp.poisson.iter_prologue", off
        assert kernels.lookup(Model(load(None, off)), cupy_like, "iter_prologue") is None


class _Streams:
    """The side stream and events of iter_graph.Early stood in (the emulation runs in program order):
    every record / wait / side-stream section, every BTE stage and every IterGraph replay logged."""

    def __init__(self, ig, monkeypatch):
        self.log = log = []
        self.launches = []  # (Early, stage index) of every launch

        class Stream:
            def __enter__(self):
                log.append("side enter")
                return self

            def __exit__(self, *exc):
                log.append("side exit")
                return False

        def side(g):
            return Stream(), types.SimpleNamespace(name="ready"), types.SimpleNamespace(name="done")
        monkeypatch.setattr(ig.IterGraph, "_side", side)
        monkeypatch.setattr(ig.Early, "_record",
                            lambda e, ev, stream=None: log.append(f"record {ev.name} on {'side' if stream else 'main'}"))
        monkeypatch.setattr(ig.Early, "_wait_event",
                            lambda e, stream, ev: log.append(f"{'side' if stream else 'main'} waits {ev.name}"))
        real_run = ig.IterGraph.run

        def run(g, *a):
            before = dict(g.replays)
            out = real_run(g, *a)
            kind = [k for k in g.replays if g.replays[k] != before[k]]
            log.append("replay " + ("stage_o" if "early" in kind else kind[0]))
            return out
        monkeypatch.setattr(ig.IterGraph, "run", run)
        self.stage = -1
        real_advance = bte.advance

        def advance(*a, **kw):
            self.stage += 1
            log.append(f"BTE {self.stage}")
            return real_advance(*a, **kw)
        monkeypatch.setattr(bte, "advance", advance)
        real_launch = ig.Early.launch

        def launch(e, *a, **kw):
            V = real_launch(e, *a, **kw)
            self.launches.append((e, self.stage))
            return V
        monkeypatch.setattr(ig.Early, "launch", launch)


def _table(emulated_cuda, monkeypatch, newton_iteration=None):
    table = {p: emulated_cuda.TABLE[p] for p in NAMES}
    if newton_iteration is not None:
        table["newton_iteration"] = newton_iteration
    monkeypatch.setattr(kernels, "REGISTRY", Registry("bsp", {"numpy": lambda: table}))


def _sim_run(overrides):
    from solver.bsp.simulation import Simulation
    sim = Simulation(load(None, TINY + ["numerics.iter_graph=true"] + list(overrides)), NP_BE, None, progress=False)
    sim.run(resume=False)
    st = sim.state
    g = sim.model.device_cache.get(("cuda.iter_graph", "dirichlet"))
    return ({k: np.array(getattr(st, k)) for k in STATE}, (st.A_eps, st.newton_iterations, st.t),
            None if g is None else dict(g.replays), set(sim.timer.totals))


def _same(a, b):
    for k in a[0]:
        assert np.array_equal(a[0][k], b[0][k]), k
    assert a[1] == b[1]


def test_emulated_runs_overlap_bitwise_and_event_order(emulated_cuda, fake_graph_capture, monkeypatch):
    """3 emulated steps with numerics.iter_overlap false and true: the same bits and Newton counts; the
    early launches exactly where a stage starts from a prediction with the kept Jacobian (the tiny mesh
    evaluates each step's Jacobian afresh at stage 1, and the first two steps' first stages have no
    prediction: stages 2-3 of steps 2-3, 4), each taken by that stage's first replay (``stage_o``); per
    stage the order ready (main) < BTE < side waits ready < its launches < done (side) < main waits done
    < the stage's replays < the next stage's ready; numerics.iter_start = previous launches nothing."""
    ig = emulated_cuda.iter_graph
    _EagerGraph(ig, monkeypatch)
    streams = _Streams(ig, monkeypatch)
    _table(emulated_cuda, monkeypatch)
    off = _sim_run(["time.steps=3", "numerics.iter_overlap=false"])
    assert streams.launches == [] and "record ready on main" not in streams.log
    streams.log.clear()
    streams.stage = -1
    on = _sim_run(["time.steps=3", "numerics.iter_overlap=true"])
    _same(off, on)
    assert [s for _, s in streams.launches] == [4, 5, 7, 8]
    assert on[2]["early"] == 4 and off[2]["early"] == 0
    assert on[2]["stage"] == off[2]["stage"] and on[2]["iteration"] == off[2]["iteration"]
    assert "step/ITER_prologue" in on[3] and "step/ITER_prologue" not in off[3]
    log = streams.log
    marks = [i for i, e in enumerate(log) if e == "record ready on main"]
    assert len(marks) == 4
    for n, i in enumerate(marks):
        stage = streams.launches[n][1]
        j = log.index(f"BTE {stage}", i)
        seq = log[j:log.index(f"BTE {stage + 1}") if f"BTE {stage + 1}" in log else len(log)]
        assert log[i + 1] == f"BTE {stage}"  # the mark just before the stage's BTE
        assert seq[1:6] == ["side waits ready", "side enter", "record done on side", "side exit",
                            "main waits done"], seq[:8]
        replays = [e for e in seq if e.startswith("replay")]
        assert replays[0] == "replay stage_o" and all(e == "replay iteration" for e in replays[1:]), replays
    # every replay of a stage is logged before the next stage's mark (the next prologue's writes wait for it)
    for i in marks:
        prev = [e for e in log[:i] if e.startswith("replay") or e == "record ready on main"]
        assert prev[-1].startswith("replay")
    streams.launches.clear()
    prev = _sim_run(["time.steps=2", "numerics.iter_overlap=true", "numerics.iter_start=previous"])
    assert streams.launches == [] and prev[2]["early"] == 0


def test_emulated_fallbacks_never_use_the_early_eigenpairs(emulated_cuda, fake_graph_capture, monkeypatch):
    """3 emulated steps, overlap true against false under the same forced detours, the early eigenpairs
    poisoned (NaN) right after their launch where the stage must not use them (stages counted from 0):
    stage 4 (step 2, stage 2): the graph returns None for the stage's first iteration (the loop launches
    it, the start's eigenpairs from the levels); stage 5: the kept-Jacobian Newton fails, plain Newton
    stalls, the damped restart converges; stage 7: as usual (taken); stage 8: the kept Jacobian's
    Newton fails, plain and damped Newton stall, Gummel converges from the last iterate.  Then a run whose pending start is an equal copy, not the launched array: never taken.  Every run the same
    bits as without the overlap."""
    ig = emulated_cuda.iter_graph
    _EagerGraph(ig, monkeypatch)
    streams = _Streams(ig, monkeypatch)
    real_ni = emulated_cuda.TABLE["newton_iteration"]

    def newton_iteration(*a):
        if streams.stage == 4 and a[5] is None:
            return None
        return real_ni(*a)
    _table(emulated_cuda, monkeypatch, newton_iteration)
    real_loop = poisson._newton_loop

    def loop(*a, **kw):
        if streams.stage in (5, 8) and not kw.get("gummel"):
            if kw.get("jacobian") is not None:  # the kept Jacobian's Newton fails at once
                raise poisson._LinearSolveFailed("forced", None, 0)
            if kw.get("omega", 1.0) == 1.0 or streams.stage == 8:  # plain (stage 8: and damped) Newton stalls
                res = real_loop(*a, **kw)
                res.converged, res.stalled = False, True
                return res
        return real_loop(*a, **kw)
    monkeypatch.setattr(poisson, "_newton_loop", loop)
    real_launch = ig.Early.launch

    def poisoned(e, *a, **kw):
        V = real_launch(e, *a, **kw)
        if streams.stage in (4, 5, 8):
            e.g.eps_p[...] = np.nan
            e.g.chi_p[...] = np.nan
        return V
    monkeypatch.setattr(ig.Early, "launch", poisoned)
    over = ["time.steps=3"]
    with pytest.warns(RuntimeWarning):
        off = _sim_run(over + ["numerics.iter_overlap=false"])
    streams.launches.clear()
    streams.stage = -1
    with pytest.warns(RuntimeWarning):
        on = _sim_run(over + ["numerics.iter_overlap=true"])
    _same(off, on)
    assert [s for _, s in streams.launches] == [4, 5, 7, 8]
    assert on[2]["early"] == 1  # stage 7 only
    assert all(np.isfinite(on[0][k]).all() for k in on[0])

    # a pending start that is not the array the stage starts from (an equal copy): not taken
    def copied(e, *a, **kw):
        V = poisoned(e, *a, **kw)
        if V is not None:
            e.g._pending = (V.copy(), e.g._pending[1])
            e.g.eps_p[...] = np.nan
            e.g.chi_p[...] = np.nan
        return V
    monkeypatch.setattr(ig.Early, "launch", copied)
    streams.launches.clear()
    streams.stage = -1
    with pytest.warns(RuntimeWarning):
        cp_run = _sim_run(over + ["numerics.iter_overlap=true"])
    _same(off, cp_run)
    assert cp_run[2]["early"] == 0 and len(streams.launches) == 4


# ---------------------------------------------------------------------------- GPU
def _gpu_cfg(*extra):
    return load(None, ["mesh.N_sbn=3", "mesh.NX=17", "mesh.NZ=17", "mesh.NW=40", "mesh.NPHI=12",
                       "numerics.backend=cupy", "time.t_end_ps=null", "output.progress=false", *extra])


@pytest.mark.gpu
@pytest.mark.parametrize("mesh", [(), ("mesh.NX=65", "mesh.NZ=65", "mesh.NW=24", "mesh.NPHI=8")])
def test_gpu_runs_overlap_on_off_bitwise(cupy_backend, mesh):
    """12 cupy steps with numerics.iter_overlap true (twice) and false: bitwise equal states and the same
    Newton counts and times; the early prologue taken (counted; the test prints the replays)."""
    from solver.bsp.simulation import Simulation
    runs = {}
    for name in ("false", "true", "true2"):
        flag = "false" if name == "false" else "true"
        sim = Simulation(_gpu_cfg("time.steps=12", *mesh, f"numerics.iter_overlap={flag}"), cupy_backend, None,
                         progress=False)
        sim.run(resume=False)
        st = sim.state
        g = sim.model.device_cache.get(("cuda.iter_graph", "dirichlet"))
        runs[name] = ({k: cupy_backend.to_numpy(getattr(st, k)) for k in STATE}, (st.A_eps, st.newton_iterations, st.t),
                      dict(g.replays), set(sim.timer.totals))
    a, b, c = runs["false"], runs["true"], runs["true2"]
    print(f"iter_overlap {mesh}: replays off {a[2]} on {b[2]}")
    assert a[2]["early"] == 0 and 1 <= b[2]["early"] <= b[2]["stage"] == a[2]["stage"], (a[2], b[2])
    assert "step/ITER_prologue" in b[3]
    _same(a, b)
    _same(b, c)


@pytest.mark.gpu
def test_gpu_run_with_iter_overlap_resumes_bytewise(cupy_backend, tmp_path):
    """Killed after its checkpoint and resumed (the first stage after the resume without the early
    prologue: no IterGraph yet), a run with numerics.iter_overlap writes the bytes of the uninterrupted
    one, and of a run without it."""
    from solver.bsp.simulation import Simulation
    cfg = _gpu_cfg("time.steps=7", "output.checkpoint_every_steps=2")
    off = _gpu_cfg("time.steps=7", "output.checkpoint_every_steps=2", "numerics.iter_overlap=false")

    class DiesAfter(Simulation):
        def step(self):
            super().step()
            if self.state.step == 5:
                raise KeyboardInterrupt

    a, b, c = tmp_path / "a", tmp_path / "b", tmp_path / "c"
    Simulation(cfg, cupy_backend, a, progress=False).run()
    with pytest.raises(KeyboardInterrupt):
        DiesAfter(cfg, cupy_backend, b, progress=False).run()
    Simulation(cfg, cupy_backend, b, progress=False).run(resume=True)
    Simulation(off, cupy_backend, c, progress=False).run()
    for name in ("profiles.csv", "scalars.csv"):
        assert (a / name).read_bytes() == (b / name).read_bytes(), name
        assert (a / name).read_bytes() == (c / name).read_bytes(), name
