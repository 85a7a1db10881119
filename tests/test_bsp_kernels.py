"""The dispatch of the BSP fast paths (solver/bsp/kernels/__init__.py): one table per backend,
phase name -> function; only a missing CuPy or numba means no fast path; the variant keys
numerics.linsys / numerics.eigen / numerics.ipim / numerics.bte_kernels; implementations() for
run.json; and whole runs with every fast path against the array reference (numerics.kernels auto
vs array), and with the array-code variant numerics.linsys = batched_cr against SuperLU."""
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
    assert kernels.PHASES == ("WENO_x", "WENO_w", "WENO_phi", "scat_gain", "scat_loss", "RK", "RK_wphi", "overlap", "eigen",
                              "Frechet", "construct_linsys", "solve_linsys", "newton_rhs", "newton_norms", "deps_dx",
                              "newton_norms_tail", "iter_start", "linsys_rhs", "newton_iteration", "density_probe",
                              "iter_prologue", "scalars_probe")
    with pytest.raises(KeyError, match="no BSP phase 'gain'"):
        kernels.lookup(model(), NP_BE, "gain")


def test_numpy_has_no_fast_paths():
    m = model()
    assert kernels.REGISTRY.table("numpy") == {}
    assert all(kernels.lookup(m, NP_BE, p) is None for p in kernels.PHASES)


def test_numba_table():
    pytest.importorskip("numba")
    from solver.bsp.kernels.numba import iter as niter, rk, scattering, weno as nweno
    be = get_backend("numba", threads=2)
    m, ma = model(), model("numerics.kernels=array")
    assert kernels.REGISTRY.table("numba") == {"WENO_x": nweno.weno_x, "WENO_w": nweno.weno_w,
                                               "WENO_phi": nweno.weno_phi, "scat_gain": scattering.scat_gain,
                                               "scat_loss": scattering.scat_loss, "RK": rk.rk_update, "RK_wphi": rk.stage_update, "eigen": niter.eigen,
                                               "Frechet": niter.frechet, "construct_linsys": niter.construct_linsys,
                                               "solve_linsys": niter.solve_linsys, "newton_rhs": niter.newton_rhs,
                                               "newton_norms": niter.newton_norms,
                                               "newton_iteration": niter.newton_iteration,
                                               "iter_start": niter.iter_start}
    for name in BTE_PHASES + ("eigen", "Frechet", "construct_linsys", "solve_linsys"):
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
                                       ("numerics.eigen", "jacobi"), ("numerics.linsys", "block_cr"),
                                       ("numerics.bte_kernels", "bitwise"), ("numerics.resolve", "persistent")])
def test_bad_variant_is_a_one_line_config_error(key, value):
    extra = ["mesh.NZ=129", "numerics.backend=cupy"] if value == "block_cr" else []
    with pytest.raises(ConfigError) as exc:
        load(None, [f"{key}={value}", *extra])
    msg = str(exc.value)
    assert msg.startswith(f"config key '{key}'") and "\n" not in msg


def test_cuda_only_variant_is_ignored_on_the_cpu():
    """numerics.linsys chooses among CUDA kernels: block_cr beyond NZ 127 stops a cupy (or auto)
    config but not a numpy or numba one, which never runs it."""
    for backend in ("numpy", "numba"):
        cfg = load(None, ["mesh.NZ=129", "numerics.linsys=block_cr", f"numerics.backend={backend}"])
        assert cfg["numerics"]["linsys"] == "block_cr"


def test_variant_defaults_are_the_reference_behaviour():
    cfg = load(None, [])
    assert cfg["numerics"]["linsys"] == "auto" and cfg["numerics"]["ipim"] == "a"
    assert cfg["numerics"]["eigen"] == "auto"
    assert cfg["numerics"]["bte_kernels"] == "fast2"  # the issue-13 kernels; exact = the bit-identical baseline
    assert cfg["numerics"]["eigen_division"] == "auto"
    assert cfg["numerics"]["batched_blocks"] == "auto"
    for nz in (33, 65, 127, 129, 257):  # auto: the batched solve at every NZ (measured, performance-iter-next.md 9)
        assert kernels.linsys_variant(model(f"mesh.NZ={nz}")) == "batched_cr", nz
    assert kernels.linsys_variant(model("mesh.NZ=65", "numerics.linsys=block_cr")) == "block_cr"
    assert kernels.batched_blocks(model("mesh.NZ=129")) == "gauss_jordan"
    assert kernels.batched_blocks(model("mesh.NZ=257")) == "lu"
    assert kernels.linsys_variant(model("mesh.NZ=65", "numerics.linsys=dense")) == "dense"
    assert kernels.linsys_variant(model("mesh.NZ=65", "numerics.linsys=batched_cr")) == "batched_cr"
    assert kernels.eigen_variant(model()) == "twisted"  # auto (docs/performance-iter-eigen.md)
    assert kernels.eigen_variant(model("numerics.eigen=newton")) == "newton"
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


def test_batched_cr_replaces_the_numba_newton_system():
    """On numba, batched_cr set explicitly runs instead of the numba table's CR kernels."""
    pytest.importorskip("numba")
    from solver.bsp import blocktri_batched
    from solver.bsp.kernels.numba import iter as niter
    nb = get_backend("numba", threads=2)
    m = model("numerics.linsys=batched_cr")
    assert kernels.lookup(m, nb, "construct_linsys") is blocktri_batched.construct_linsys
    assert kernels.lookup(m, nb, "solve_linsys") is blocktri_batched.solve_linsys
    assert kernels.lookup(model(), nb, "solve_linsys") is niter.solve_linsys
    impl = kernels.implementations(m, nb)
    assert impl["solve_linsys"] == "solver.bsp.blocktri_batched.solve_linsys [numerics.linsys=batched_cr]"
    assert impl["eigen"] == "solver.bsp.kernels.numba.iter.eigen"


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
    for p in ("WENO_x", "scat_gain", "scat_loss"):
        assert impl[p].startswith("solver.bsp.kernels.numba."), impl[p]
    assert impl["eigen"] == "solver.bsp.kernels.numba.iter.eigen"  # no variant key on the CPU
    for p in ("WENO_w", "WENO_phi", "RK"):  # bte.advance calls the fused stage instead
        assert impl[p] == "inside RK_wphi", (p, impl[p])
    exact = kernels.implementations(model("numerics.bte_kernels=exact"), be)
    assert exact["WENO_w"] == "solver.bsp.kernels.numba.weno.weno_w"  # no RK fast path: the WENO kernels apart
    assert exact["RK"] == "solver.bsp.bte.rk3_combine"
    assert impl["RK_wphi"] == "solver.bsp.kernels.numba.rk.stage_update [numerics.bte_kernels=fast2 (as fast)]"  # the default
    fast = kernels.implementations(model("numerics.bte_kernels=fast"), be)
    assert fast["RK_wphi"] == "solver.bsp.kernels.numba.rk.stage_update [numerics.bte_kernels=fast]"  # w + phi + RK
    fast2 = kernels.implementations(model("numerics.bte_kernels=fast2"), be)  # numba runs fast for fast2
    assert fast2["RK_wphi"] == "solver.bsp.kernels.numba.rk.stage_update [numerics.bte_kernels=fast2 (as fast)]"
    assert fast2["WENO_x"] == impl["WENO_x"] and fast2["WENO_w"] == "inside RK_wphi"
    assert kernels.implementations(model("numerics.kernels=array"), be) == kernels.REFERENCE


def test_implementations_cupy_behind_a_stand_in(emulated_cuda, monkeypatch):
    monkeypatch.setattr(kernels, "REGISTRY", Registry("bsp", {"cupy": lambda: emulated_cuda.TABLE}))
    be = type("B", (), {"name": "cupy"})()
    impl = kernels.implementations(model("mesh.NZ=65", "numerics.ipim=b"), be)
    assert list(impl) == list(kernels.PHASES)
    assert impl["WENO_x"] == ("solver.bsp.kernels.cuda.weno.weno_x [numerics.bte_kernels=fast2, numerics.wenox_kernel=tile "
                              "(bsp_weno_dx_tile)]")  # the default (performance-bte-kernels §20.5)
    assert impl["RK"] == impl["WENO_w"] == impl["WENO_phi"] == "inside RK_wphi"
    assert impl["RK_wphi"] == "solver.bsp.kernels.cuda.rk.stage_update [numerics.bte_kernels=fast2]"
    fast = kernels.implementations(model("numerics.bte_kernels=fast"), be)
    assert fast["WENO_x"] == "solver.bsp.kernels.cuda.weno.weno_x [numerics.bte_kernels=fast]"
    assert fast["RK_wphi"] == "solver.bsp.kernels.cuda.rk.stage_update [numerics.bte_kernels=fast]"
    assert impl["scat_gain"] == "solver.bsp.kernels.cuda.scattering.scat_gain"
    assert impl["density_probe"] == "solver.bsp.kernels.cuda.dens.density_probe"
    assert impl["eigen"] == ("solver.bsp.kernels.cuda.eigen.eigen [numerics.eigen=twisted, eigen_division=reciprocal "
                             "(kernels eigenvalues_tw, ipim_t; numerics.ipim not used)]")
    div = kernels.implementations(model("mesh.NZ=65", "numerics.eigen_division=divide"), be)
    assert div["eigen"] == ("solver.bsp.kernels.cuda.eigen.eigen [numerics.eigen=twisted, eigen_division=divide "
                            "(kernels eigenvalues_tw, ipim_t; numerics.ipim not used)]")
    nr = kernels.implementations(model("mesh.NZ=65", "numerics.ipim=b", "numerics.eigen=newton"), be)
    assert nr["eigen"] == "solver.bsp.kernels.cuda.eigen.eigen [numerics.eigen=newton, numerics.ipim=b]"
    assert impl["solve_linsys"] == ("solver.bsp.kernels.cuda.newton.solve_linsys [numerics.linsys=batched_cr, "
                                    "numerics.linsys_graph=true, numerics.batched_blocks=gauss_jordan, "
                                    "numerics.resolve=fused]")
    lv = kernels.implementations(model("mesh.NZ=65", "numerics.resolve=levels"), be)
    assert lv["solve_linsys"].endswith("numerics.batched_blocks=gauss_jordan, numerics.resolve=levels]")
    assert impl["construct_linsys"].endswith("[numerics.linsys=batched_cr]")
    cr = kernels.implementations(model("mesh.NZ=65", "numerics.linsys=block_cr"), be)
    assert cr["solve_linsys"] == "solver.bsp.kernels.cuda.newton.solve_linsys [numerics.linsys=block_cr]"
    assert impl["Frechet"] == "solver.bsp.kernels.cuda.frechet.frechet"
    assert impl["newton_norms"] == "solver.bsp.kernels.cuda.newton.newton_norms"
    big = kernels.implementations(model("mesh.NZ=257", "numerics.eigen=bisection"), be)
    assert big["solve_linsys"] == ("solver.bsp.kernels.cuda.newton.solve_linsys "
                                   "[numerics.linsys=batched_cr, numerics.linsys_graph=true, numerics.batched_blocks=lu]")
    assert big["construct_linsys"].endswith("[numerics.linsys=batched_cr]")
    nograph = kernels.implementations(model("mesh.NZ=129", "numerics.linsys_graph=false",
                                            "numerics.batched_blocks=gauss_jordan"), be)
    assert nograph["solve_linsys"].endswith(
        "[numerics.linsys=batched_cr, numerics.linsys_graph=false, numerics.batched_blocks=gauss_jordan, "
        "numerics.resolve=fused]")
    assert big["eigen"].endswith("[numerics.eigen=bisection, numerics.ipim=a]")
    dense = kernels.implementations(model("mesh.NZ=129", "numerics.linsys=dense"), be)
    assert dense["construct_linsys"].endswith("[numerics.linsys=dense]")
    exact = kernels.implementations(model("numerics.bte_kernels=exact"), be)
    assert exact["WENO_phi"] == "solver.bsp.kernels.cuda.weno.weno_phi [numerics.bte_kernels=exact]"
    assert exact["RK"] == "solver.bsp.bte.rk3_combine"  # no RK fast path: rhs + rk3_combine, DENS as array code
    assert exact["RK_wphi"] == "solver.bsp.bte.stage_update"
    fast2 = kernels.implementations(model("numerics.bte_kernels=fast2"), be)  # the fused stage and WENO_x differ
    assert fast2["RK_wphi"] == "solver.bsp.kernels.cuda.rk.stage_update [numerics.bte_kernels=fast2]"
    assert fast2["WENO_x"] == ("solver.bsp.kernels.cuda.weno.weno_x [numerics.bte_kernels=fast2, numerics.wenox_kernel=tile "
                               "(bsp_weno_dx_tile)]")  # fast2's x faces, by the tile kernel
    assert fast2["RK"] == fast2["WENO_w"] == fast2["WENO_phi"] == "inside RK_wphi"
    assert fast2["overlap"].endswith("[numerics.bte_kernels=fast2 (as fast)]")


def test_rk_fast_path_only_with_fast_bte_kernels(emulated_cuda, monkeypatch):
    monkeypatch.setattr(kernels, "REGISTRY", Registry("bsp", {"cupy": lambda: emulated_cuda.TABLE}))
    be = type("B", (), {"name": "cupy"})()
    assert kernels.lookup(model(), be, "RK") is emulated_cuda.rk.rk_update
    assert kernels.lookup(model("numerics.bte_kernels=exact"), be, "RK") is None
    assert kernels.lookup(model(), be, "RK_wphi") is emulated_cuda.rk.stage_update
    assert kernels.lookup(model("numerics.bte_kernels=exact"), be, "RK_wphi") is None
    assert kernels.lookup(model(), be, "overlap") is emulated_cuda.scattering.overlap
    assert kernels.lookup(model("numerics.bte_kernels=exact"), be, "overlap") is None
    assert kernels.lookup(model("numerics.bte_kernels=exact"), be, "WENO_x") is emulated_cuda.weno.weno_x
    assert kernels.lookup(model("numerics.kernels=array"), be, "RK") is None
    for name, fn in (("RK", emulated_cuda.rk.rk_update), ("RK_wphi", emulated_cuda.rk.stage_update),
                     ("overlap", emulated_cuda.scattering.overlap)):  # fast2: the fast paths of fast
        assert kernels.lookup(model("numerics.bte_kernels=fast2"), be, name) is fn


def test_run_records_the_implementations(tmp_path):
    from solver.bsp.simulation import Simulation
    cfg = load(None, ["mesh.N_sbn=3", "mesh.NX=9", "mesh.NZ=13", "mesh.NW=8", "mesh.NPHI=4", "output.progress=false",
                      "time.steps=1", "time.t_end_ps=null", "output.checkpoint_every_steps=0"])
    sim = Simulation(cfg, NP_BE, tmp_path, progress=False)
    rec = sim.run(resume=False)
    impl = rec["kernels"]["implementations"]
    assert rec["kernels"]["mode"] == "auto" and list(impl) == list(kernels.PHASES)
    # literal names of what a numpy run executes (not the code's own table)
    assert impl["WENO_phi"] == "solver.bsp.weno.weno_phi"
    assert impl["RK"] == "solver.bsp.bte.rk3_combine"
    assert impl["eigen"] == "solver.bsp.schrodinger.eigen"
    assert impl["solve_linsys"] == "solver.bsp.poisson.solve_linsys"


# ---------------------------------------------------------------------------- whole runs
@pytest.mark.parametrize("variant,tol", [("exact", 1e-12), ("fast", 1e-10)])
def test_emulated_run_fast_vs_array(emulated_cuda, monkeypatch, variant, tol):
    """Whole time steps through the hooks (numpy backend dispatching to the emulated BTE kernels,
    RK included) against the NumPy array path; numerics.bte_kernels exact and fast."""
    from solver.bsp.simulation import Simulation

    table = {p: emulated_cuda.TABLE[p] for p in BTE_PHASES + ("RK",)}  # RK_wphi: test_bsp_kernels_cuda_rk
    monkeypatch.setattr(kernels, "REGISTRY", Registry("bsp", {"numpy": lambda: table}))
    states = {}
    for mode in ("array", "auto"):
        cfg = load(None, ["mesh.N_sbn=3", "mesh.NX=9", "mesh.NZ=13", "mesh.NW=16", "mesh.NPHI=8",
                          "output.progress=false", "numerics.backend=numpy", f"numerics.kernels={mode}",
                          f"numerics.bte_kernels={variant}", "time.steps=5", "time.t_end_ps=null"])
        sim = Simulation(cfg, NP_BE, None, progress=False)
        assert (kernels.lookup(sim.model, NP_BE, "scat_gain") is emulated_cuda.scattering.scat_gain) == (mode == "auto")
        fast_rk = mode == "auto" and variant == "fast"
        assert (kernels.lookup(sim.model, NP_BE, "RK") is emulated_cuda.rk.rk_update) == fast_rk
        sim.run(resume=False)
        states[mode] = {k: np.asarray(getattr(sim.state, k)) for k in ("Phi", "V", "eps", "rho", "PhiHat")}
        assert sim.state.step == 5
        if fast_rk:  # DENS came from the RK kernel: the densities of the final Phi
            from solver.bsp import dens
            rho, PhiHat = dens.dens(sim.model, NP_BE, sim.state.Phi)
            assert rel(sim.state.rho, rho) <= 1e-14 and rel(sim.state.PhiHat, PhiHat) <= 1e-14
    for k, v in states["auto"].items():
        assert rel(v, states["array"][k]) <= tol, (k, rel(v, states["array"][k]))


def test_emulated_iter_run_fast_vs_array(emulated_cuda, fake_graph_capture, monkeypatch):
    """Whole time steps with the ITER fast paths of the default GPU config beyond MAX_NZ (the numpy
    backend dispatching to the emulated eigen, Frechet and Newton kernels; newton.solve_linsys runs
    numerics.linsys auto = batched_cr there; MAX_NZ lowered to 11 so that NZ = 13 is beyond it and
    the run stays small): warm-started Newton-Raphson eigenvalues and the batched block solve
    (cuBLAS stood in by numpy's batched LU, its CUDA graph by fake_graph_capture), against the array reference (LAPACK + SuperLU).
    (The CR kernels emulate one OS thread per CUDA thread: too slow for whole runs;
    test_bsp_kernels_cuda_newton checks them.)"""
    from solver.bsp import blocktri
    from solver.bsp.simulation import Simulation

    monkeypatch.setattr(blocktri, "MAX_NZ", 11)

    names = ("eigen", "Frechet", "construct_linsys", "solve_linsys", "newton_rhs", "newton_norms", "newton_norms_tail", "deps_dx", "iter_start",
             "linsys_rhs")
    calls = {}

    def counted(p, f):
        return lambda *a: calls.__setitem__(p, calls.get(p, 0) + 1) or f(*a)
    table = {p: counted(p, emulated_cuda.TABLE[p]) if p not in names[:6] else emulated_cuda.TABLE[p] for p in names}
    monkeypatch.setattr(kernels, "REGISTRY", Registry("bsp", {"numpy": lambda: table}))
    solves = []
    real = emulated_cuda.newton.solve_linsys_batched
    monkeypatch.setattr(emulated_cuda.newton, "solve_linsys_batched", lambda *a: solves.append(1) or real(*a))
    states = {}
    for mode in ("array", "auto"):
        cfg = load(None, ["mesh.N_sbn=3", "mesh.NX=9", "mesh.NZ=13", "mesh.NW=16", "mesh.NPHI=8",
                          "output.progress=false", "numerics.backend=numpy", f"numerics.kernels={mode}",
                          "time.steps=4", "time.t_end_ps=null"])
        sim = Simulation(cfg, NP_BE, None, progress=False)
        impl = kernels.implementations(sim.model, NP_BE)
        assert impl["eigen"] == ("solver.bsp.kernels.cuda.eigen.eigen" if mode == "auto" else "solver.bsp.schrodinger.eigen")
        sim.run(resume=False)
        states[mode] = {k: np.asarray(getattr(sim.state, k)) for k in ("Phi", "V", "eps", "rho")}
    assert solves  # the batched block solve ran (auto beyond MAX_NZ)
    assert calls["newton_norms_tail"] >= 12 and calls.get("deps_dx", 0) == 1  # THERMEQUIL's only: the stages' from the norms
    assert calls["iter_start"] == 9  # steps 2-4 (step 1 starts from THERMEQUIL)
    assert calls["linsys_rhs"] >= 8  # the kept Jacobian's iterations: b alone
    ev = fake_graph_capture.events  # through one graph per system, INITCOND's and the Dirichlet one, and the
    # Dirichlet system's resolve graph (numerics.iter_jacobian = step: the kept factorization substituted)
    assert ev.count("capture") == 3 and ev.count("launch") == len(solves), (ev.count("capture"), len(solves))
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
    from solver.bsp.kernels.cuda import eigen, frechet, newton, rk, scattering, weno as cweno
    m = model("mesh.NX=13", "mesh.NZ=11")
    assert kernels.lookup(m, cupy_backend, "RK") is rk.rk_update
    assert kernels.lookup(m, cupy_backend, "RK_wphi") is rk.stage_update
    assert kernels.lookup(m, cupy_backend, "overlap") is scattering.overlap
    for name in ("construct_linsys", "solve_linsys", "newton_rhs", "newton_norms", "newton_norms_tail",
                 "iter_start", "linsys_rhs"):
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
@pytest.mark.parametrize("variant", ["fast", "exact", "fast2"])
def test_gpu_run_bitwise_reproducible_and_close_to_numpy(cupy_backend, variant):
    """Two GPU runs with every fast path (numerics.bte_kernels fast / exact / fast2) are bitwise identical
    (no order-varying reductions) and stay within 1e-10 of the NumPy array run after 10 steps."""
    from solver.bsp.simulation import Simulation
    base = ["mesh.N_sbn=3", "mesh.NX=17", "mesh.NZ=17", "mesh.NW=40", "mesh.NPHI=12", "output.progress=false",
            f"numerics.bte_kernels={variant}", "time.steps=10", "time.t_end_ps=null"]
    runs = []
    for be, extra in ((cupy_backend, ["numerics.backend=cupy"]), (cupy_backend, ["numerics.backend=cupy"]),
                      (NP_BE, ["numerics.backend=numpy", "numerics.kernels=array"])):
        sim = Simulation(load(None, base + extra), be, None, progress=False)
        sim.run(resume=False)
        runs.append({k: be.to_numpy(getattr(sim.state, k)) for k in ("Phi", "V", "eps", "rho")})
    for k in ("Phi", "V", "eps", "rho"):
        assert np.array_equal(runs[0][k], runs[1][k]), k
        r = rel(runs[0][k], runs[2][k])
        print(f"10 steps cupy {variant} vs numpy: {k} max rel diff {r:.3e}")
        assert r <= 1e-10, (k, r)


@pytest.mark.gpu
@pytest.mark.parametrize("mesh", [("mesh.NX=17", "mesh.NZ=17", "mesh.NW=40", "mesh.NPHI=12"),
                                  ("mesh.NX=65", "mesh.NZ=65", "mesh.NW=24", "mesh.NPHI=8")])
def test_gpu_run_iter_glue_changes_no_bit(cupy_backend, mesh, monkeypatch):
    """The ITER glue of docs/performance-iter-glue.md (newton_norms_tail, iter_start, linsys_rhs): a
    cupy run with them is bitwise the cupy run without them (each forms the bits of what it replaces),
    over 12 steps (the kept Jacobian across steps, afresh at step 11), and times no ITER/deps_dx."""
    from solver.bsp.simulation import Simulation
    glue = ("newton_norms_tail", "iter_start", "linsys_rhs")
    real = kernels.lookup
    cfg = load(None, ["mesh.N_sbn=3", *mesh, "output.progress=false", "numerics.backend=cupy",
                      "time.steps=12", "time.t_end_ps=null"])
    runs = {}
    for name in ("without", "with"):
        with monkeypatch.context() as mp:
            if name == "without":
                mp.setattr(kernels, "lookup", lambda m, b, n: None if n in glue else real(m, b, n))
            sim = Simulation(cfg, cupy_backend, None, progress=False)
            sim.run(resume=False)
        st = sim.state
        runs[name] = ({k: cupy_backend.to_numpy(getattr(st, k)) for k in ("Phi", "V", "eps", "rho", "deps_dx")},
                      (st.A_eps, st.newton_iterations, st.t), set(sim.timer.totals))
    (a, sa, ta), (b, sb, tb) = runs["without"], runs["with"]
    for k in a:
        assert np.array_equal(a[k], b[k]), k
    assert sa == sb
    assert "step/ITER/deps_dx" in ta and "step/ITER/deps_dx" not in tb


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
