"""The dispatch of the BSP fast paths (solver/bsp/kernels/__init__.py): one table per backend,
phase name -> function; only a missing CuPy or numba means no fast path; the variant keys
numerics.linsys / numerics.eigen / numerics.ipim; implementations() for run.json; and whole runs
with every fast path against the array reference (numerics.kernels auto vs array), and with the
array-code variant numerics.linsys = batched_cr against SuperLU."""
import importlib
import sys

import numpy as np
import pytest

from solver.backend import get_backend
from solver.bsp import kernels, poisson, weno
from solver.bsp.model import Model, load
from solver.config import ConfigError
from solver.dispatch import Registry

NP_BE = get_backend("numpy")
BTE_PHASES = ("WENO_x", "WENO_w", "WENO_phi", "scat_gain", "scat_loss")


def model(*overrides):
    return Model(load(None, list(overrides)))


def rel(a, b):
    return float(np.abs(a - b).max() / np.abs(b).max())


def test_phases_are_the_papers_names():
    assert kernels.PHASES == ("WENO_x", "WENO_w", "WENO_phi", "scat_gain", "scat_loss", "eigen", "Frechet",
                              "construct_linsys", "solve_linsys", "newton_rhs", "newton_norms")
    with pytest.raises(KeyError, match="no BSP phase 'gain'"):
        kernels.lookup(model(), NP_BE, "gain")


def test_numpy_has_no_fast_paths():
    m = model()
    assert kernels.REGISTRY.table("numpy") == {}
    assert all(kernels.lookup(m, NP_BE, p) is None for p in kernels.PHASES)


def test_numba_table():
    pytest.importorskip("numba")
    from solver.bsp.kernels.numba import scattering, weno as nweno
    be = get_backend("numba", threads=2)
    m, ma = model(), model("numerics.kernels=array")
    assert kernels.REGISTRY.table("numba") == {"WENO_x": nweno.weno_x, "WENO_w": nweno.weno_w,
                                               "WENO_phi": nweno.weno_phi, "scat_gain": scattering.scat_gain,
                                               "scat_loss": scattering.scat_loss}
    for name in BTE_PHASES:
        assert kernels.lookup(m, be, name) is not None, name
        assert kernels.lookup(ma, be, name) is None, name


def test_cupy_table_behind_a_stand_in(emulated_cuda):
    assert set(emulated_cuda.TABLE) == set(kernels.PHASES)
    assert emulated_cuda.TABLE["solve_linsys"] is emulated_cuda.newton.solve_linsys
    assert emulated_cuda.TABLE["eigen"] is emulated_cuda.eigen.eigen
    assert emulated_cuda.TABLE["Frechet"] is emulated_cuda.frechet.frechet


def test_missing_numba_means_no_fast_path(monkeypatch):
    """With numba missing the numba table is empty (the phases run the array reference)."""
    for k in [k for k in sys.modules if k.startswith("solver.bsp.kernels.numba")]:
        monkeypatch.delitem(sys.modules, k)
    monkeypatch.setitem(sys.modules, "numba", None)
    reg = Registry("bsp", dict(kernels.REGISTRY.loaders))
    assert reg.table("numba") == {}
    monkeypatch.setattr(kernels, "REGISTRY", reg)
    m = model()
    assert kernels.lookup(m, get_backend("numpy"), "WENO_x") is None


def test_a_broken_fast_path_module_fails_loudly(monkeypatch, tmp_path, stub_cupy):
    """A fast-path module that cannot be imported for any other reason than a missing CuPy/numba
    (here: a missing module of the package itself, a syntax error) raises instead of falling back."""
    for k in [k for k in sys.modules if k.startswith("solver.bsp.kernels.cuda")]:
        monkeypatch.delitem(sys.modules, k)
    monkeypatch.setitem(sys.modules, "solver.bsp.kernels.cuda.newton", None)
    reg = Registry("bsp", dict(kernels.REGISTRY.loaders))
    with pytest.raises(ImportError, match="solver.bsp.kernels.cuda.newton"):
        reg.table("cupy")
    (tmp_path / "bsp_broken_fast_path.py").write_text("TABLE = {'WENO_x': lambda *a: (}\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(kernels, "REGISTRY", Registry(
        "bsp", {"numpy": lambda: importlib.import_module("bsp_broken_fast_path").TABLE}))
    m = model("mesh.NX=9", "mesh.NZ=11", "mesh.NW=8", "mesh.NPHI=4", "mesh.N_sbn=2")
    with pytest.raises(SyntaxError):
        weno.weno_w(m, NP_BE, np.ones(m.shape), np.ones((m.NX, 3, m.N_sbn)))


@pytest.mark.parametrize("key,value", [("numerics.linsys", "thomas"), ("numerics.ipim", "c"),
                                       ("numerics.eigen", "jacobi"), ("numerics.linsys", "block_cr")])
def test_bad_variant_is_a_one_line_config_error(key, value):
    extra = ["mesh.NZ=129"] if value == "block_cr" else []
    with pytest.raises(ConfigError) as exc:
        load(None, [f"{key}={value}", *extra])
    msg = str(exc.value)
    assert msg.startswith(f"config key '{key}'") and "\n" not in msg


def test_variant_defaults_are_the_reference_behaviour():
    cfg = load(None, [])
    assert cfg["numerics"]["linsys"] == "auto" and cfg["numerics"]["ipim"] == "a"
    assert cfg["numerics"]["eigen"] == "auto"
    assert kernels.linsys_variant(model("mesh.NZ=65")) == "block_cr"
    assert kernels.linsys_variant(model("mesh.NZ=127")) == "block_cr"
    assert kernels.linsys_variant(model("mesh.NZ=129")) == "batched_cr"
    assert kernels.linsys_variant(model("mesh.NZ=65", "numerics.linsys=dense")) == "dense"
    assert kernels.linsys_variant(model("mesh.NZ=65", "numerics.linsys=batched_cr")) == "batched_cr"
    assert kernels.eigen_variant(model()) == "newton"
    assert kernels.eigen_variant(model("numerics.eigen=bisection")) == "bisection"


def test_batched_cr_is_an_array_variant_on_every_backend():
    """numerics.linsys = batched_cr, set explicitly, replaces SuperLU on numpy (and numba) by the
    array code of blocktri_batched; auto keeps the reference there, and kernels = array always
    runs the reference (the oracle)."""
    from solver.bsp import blocktri_batched
    m = model("numerics.linsys=batched_cr")
    assert kernels.lookup(m, NP_BE, "construct_linsys") is blocktri_batched.construct_linsys
    assert kernels.lookup(m, NP_BE, "solve_linsys") is blocktri_batched.solve_linsys
    assert all(kernels.lookup(m, NP_BE, p) is None for p in kernels.PHASES if not p.endswith("_linsys"))
    for other in ("numerics.linsys=auto", "mesh.NZ=129", "numerics.linsys=dense"):
        assert kernels.lookup(model(other), NP_BE, "solve_linsys") is None, other
    assert kernels.lookup(model("numerics.linsys=batched_cr", "numerics.kernels=array"), NP_BE, "solve_linsys") is None
    impl = kernels.implementations(m, NP_BE)
    assert impl["solve_linsys"] == "solver.bsp.blocktri_batched.solve_linsys [numerics.linsys=batched_cr]"
    assert impl["construct_linsys"] == "solver.bsp.blocktri_batched.construct_linsys [numerics.linsys=batched_cr]"
    assert impl["eigen"] == "solver.bsp.schrodinger.eigen"


def test_implementations_numpy():
    impl = kernels.implementations(model(), NP_BE)
    assert impl == kernels.REFERENCE
    assert impl["construct_linsys"] == "solver.bsp.poisson.construct_linsys"
    # every reference named exists
    for name in impl.values():
        mod, fn = name.rsplit(".", 1)
        assert callable(getattr(importlib.import_module(mod), fn)), name


def test_implementations_numba():
    pytest.importorskip("numba")
    be = get_backend("numba", threads=2)
    impl = kernels.implementations(model(), be)
    assert list(impl) == list(kernels.PHASES)
    for p in BTE_PHASES:
        assert impl[p].startswith("solver.bsp.kernels.numba."), impl[p]
    assert impl["eigen"] == "solver.bsp.schrodinger.eigen"
    assert kernels.implementations(model("numerics.kernels=array"), be) == kernels.REFERENCE


def test_implementations_cupy_behind_a_stand_in(emulated_cuda, monkeypatch):
    monkeypatch.setattr(kernels, "REGISTRY", Registry("bsp", {"cupy": lambda: emulated_cuda.TABLE}))
    be = type("B", (), {"name": "cupy"})()
    impl = kernels.implementations(model("mesh.NZ=65", "numerics.ipim=b"), be)
    assert list(impl) == list(kernels.PHASES)
    assert impl["WENO_x"] == "solver.bsp.kernels.cuda.weno.weno_x"
    assert impl["eigen"] == "solver.bsp.kernels.cuda.eigen.eigen [numerics.eigen=newton, numerics.ipim=b]"
    assert impl["solve_linsys"] == "solver.bsp.kernels.cuda.newton.solve_linsys [numerics.linsys=block_cr]"
    assert impl["construct_linsys"].endswith("[numerics.linsys=block_cr]")
    assert impl["Frechet"] == "solver.bsp.kernels.cuda.frechet.frechet"
    assert impl["newton_norms"] == "solver.bsp.kernels.cuda.newton.newton_norms"
    big = kernels.implementations(model("mesh.NZ=129", "numerics.eigen=bisection"), be)
    assert big["solve_linsys"] == "solver.bsp.kernels.cuda.newton.solve_linsys [numerics.linsys=batched_cr]"
    assert big["eigen"].endswith("[numerics.eigen=bisection, numerics.ipim=a]")
    dense = kernels.implementations(model("mesh.NZ=129", "numerics.linsys=dense"), be)
    assert dense["construct_linsys"].endswith("[numerics.linsys=dense]")


def test_run_records_the_implementations(tmp_path):
    from solver.bsp.simulation import Simulation
    cfg = load(None, ["mesh.N_sbn=3", "mesh.NX=9", "mesh.NZ=13", "mesh.NW=8", "mesh.NPHI=4", "output.progress=false",
                      "time.steps=1", "time.t_end_ps=null", "output.checkpoint_every_steps=0"])
    sim = Simulation(cfg, NP_BE, tmp_path, progress=False)
    rec = sim.run(resume=False)
    assert rec["kernels"] == {"mode": "auto", "implementations": kernels.REFERENCE}


# ---------------------------------------------------------------------------- whole runs
def test_emulated_run_fast_vs_array(emulated_cuda, monkeypatch):
    """Whole time steps through the hooks (numpy backend dispatching to the emulated BTE kernels)."""
    from solver.bsp.simulation import Simulation

    table = {p: emulated_cuda.TABLE[p] for p in BTE_PHASES}
    monkeypatch.setattr(kernels, "REGISTRY", Registry("bsp", {"numpy": lambda: table}))
    states = {}
    for mode in ("array", "auto"):
        cfg = load(None, ["mesh.N_sbn=3", "mesh.NX=9", "mesh.NZ=13", "mesh.NW=16", "mesh.NPHI=8",
                          "output.progress=false", "numerics.backend=numpy", f"numerics.kernels={mode}",
                          "time.steps=5", "time.t_end_ps=null"])
        sim = Simulation(cfg, NP_BE, None, progress=False)
        assert (kernels.lookup(sim.model, NP_BE, "scat_gain") is emulated_cuda.scattering.scat_gain) == (mode == "auto")
        sim.run(resume=False)
        states[mode] = {k: np.asarray(getattr(sim.state, k)) for k in ("Phi", "V", "eps", "rho")}
    for k, v in states["auto"].items():
        assert rel(v, states["array"][k]) <= 1e-12, (k, rel(v, states["array"][k]))


def test_emulated_iter_run_fast_vs_array(emulated_cuda, monkeypatch):
    """Whole time steps with the ITER fast paths of the default GPU config at NZ > 127 (the numpy
    backend dispatching to the emulated eigen, Frechet and Newton kernels): warm-started
    Newton-Raphson eigenvalues and the batched block solve (cuBLAS stood in by numpy's batched
    LU), against the array reference (LAPACK + SuperLU).  (The CR kernels emulate one OS thread
    per CUDA thread: too slow for whole runs; test_bsp_kernels_cuda_newton checks them.)"""
    from solver.bsp.simulation import Simulation

    eigen, linsys = "newton", "batched_cr"

    names = ("eigen", "Frechet", "construct_linsys", "solve_linsys", "newton_rhs", "newton_norms")
    table = {p: emulated_cuda.TABLE[p] for p in names}
    monkeypatch.setattr(kernels, "REGISTRY", Registry("bsp", {"numpy": lambda: table}))
    states = {}
    for mode in ("array", "auto"):
        cfg = load(None, ["mesh.N_sbn=3", "mesh.NX=9", "mesh.NZ=13", "mesh.NW=16", "mesh.NPHI=8",
                          "output.progress=false", "numerics.backend=numpy", f"numerics.kernels={mode}",
                          f"numerics.eigen={eigen}", f"numerics.linsys={linsys}", "time.steps=4", "time.t_end_ps=null"])
        sim = Simulation(cfg, NP_BE, None, progress=False)
        impl = kernels.implementations(sim.model, NP_BE)
        assert (impl["eigen"] == f"solver.bsp.kernels.cuda.eigen.eigen [numerics.eigen={eigen}, numerics.ipim=a]"
                if mode == "auto" else impl == kernels.REFERENCE)
        sim.run(resume=False)
        states[mode] = {k: np.asarray(getattr(sim.state, k)) for k in ("Phi", "V", "eps", "rho")}
    for k, v in states["auto"].items():
        assert rel(v, states["array"][k]) <= 1e-10, (k, rel(v, states["array"][k]))


def test_numba_few_steps_fast_equals_array():
    """Three steps of a whole run on a tiny mesh, numba fast paths vs the array code."""
    numba = pytest.importorskip("numba")
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


@pytest.mark.gpu
def test_cuda_table_is_the_block_versions(cupy_backend):
    from solver.bsp.kernels.cuda import eigen, frechet, newton, scattering, weno as cweno
    m = model("mesh.NX=13", "mesh.NZ=11")
    for name in ("construct_linsys", "solve_linsys", "newton_rhs", "newton_norms"):
        assert kernels.lookup(m, cupy_backend, name) is getattr(newton, name)
    assert kernels.lookup(m, cupy_backend, "Frechet") is frechet.frechet
    assert kernels.lookup(m, cupy_backend, "eigen") is eigen.eigen
    assert kernels.lookup(m, cupy_backend, "WENO_x") is cweno.weno_x
    assert kernels.lookup(m, cupy_backend, "scat_loss") is scattering.scat_loss


@pytest.mark.gpu
@pytest.mark.parametrize("mesh,steps", [(("mesh.NX=9", "mesh.NZ=13", "mesh.NW=16", "mesh.NPHI=8"), 20),
                                        (("mesh.NX=17", "mesh.NZ=17", "mesh.NW=40", "mesh.NPHI=12"), 5)])
def test_gpu_run_auto_vs_array(cupy_backend, mesh, steps):
    """Whole time steps with every fast path (numerics.kernels = auto) against the array code."""
    from solver.bsp.simulation import Simulation
    states = {}
    for mode in ("array", "auto"):
        cfg = load(None, ["mesh.N_sbn=3", *mesh, "output.progress=false", "numerics.backend=cupy",
                          f"numerics.kernels={mode}", f"time.steps={steps}", "time.t_end_ps=null"])
        sim = Simulation(cfg, cupy_backend, None, progress=False)
        sim.run(resume=False)
        assert sim.state.step == steps
        states[mode] = {k: cupy_backend.to_numpy(getattr(sim.state, k)) for k in ("Phi", "V", "eps", "rho")}
    for k in ("Phi", "V", "eps", "rho"):
        r = rel(states["auto"][k], states["array"][k])
        print(f"{steps} steps auto vs array: {k} max rel diff {r:.3e}")
        assert r <= 1e-10, (k, r)


@pytest.mark.gpu
def test_cuda_iter_startup_and_potential_match_array(cupy_backend):
    """INITCOND, THERMEQUIL and POTENTIAL with the fast ITER equal the array ITER on the GPU."""
    runs = {}
    for mode in ("array", "auto"):
        m = model("mesh.NX=17", "mesh.NZ=33", f"numerics.kernels={mode}")
        ic = poisson.initcond(m, cupy_backend)
        te = poisson.thermequil(m, cupy_backend, ic.V[0])
        po = poisson.potential(m, cupy_backend, te.V, te.rho, ic.V[0])
        runs[mode] = [cupy_backend.to_numpy(r.V) for r in (ic, te, po)] + [ic.iterations, te.iterations]
    a, b = runs["array"], runs["auto"]
    for x, y in zip(a[:3], b[:3]):
        np.testing.assert_allclose(y, x, rtol=1e-10, atol=1e-12)
    assert abs(a[3] - b[3]) <= 1 and abs(a[4] - b[4]) <= 1
