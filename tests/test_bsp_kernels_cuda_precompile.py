"""Start-up on the GPU (issue #12, docs/performance-startup.md round 3): the CUDA modules of the
start-up compiled in parallel background threads (kernels/cuda/_build.precompile, the list
kernels/cuda.startup_modules) and no cupyx import on the way to the first step.

CPU tests: _build's bookkeeping behind a stand-in RawModule (threads, once per module, errors),
and the list against the modules the launchers build on the g++ emulation (conftest
``emulated_cuda``).  GPU tests (marked ``gpu``): a cupy start-up in a fresh interpreter."""
import json
import math
import os
import subprocess
import sys
import threading
import types
from pathlib import Path

import numpy as np
import pytest

from solver.backend import get_backend
from solver.bsp import poisson

NP = get_backend("numpy")
ROOT = Path(__file__).resolve().parents[1]


class _Device:
    def __init__(self, i=0):
        self.id = i

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


@pytest.fixture
def stub_build(emulated_cuda, monkeypatch):
    """emulated_cuda._build with an empty module cache and a stand-in RawModule whose compile()
    records its thread and waits at ``barrier`` (set by the test) for the others."""
    b, cp = emulated_cuda._build, emulated_cuda.cupy
    state = types.SimpleNamespace(barrier=None, compiled=[], fail=set(), synced=[])

    class Raw:
        def __init__(self, code, options=()):
            self.code, self.options = code, options

        def compile(self):
            state.compiled.append((self.options, threading.current_thread().name))
            if state.barrier is not None:
                state.barrier.wait()  # BrokenBarrierError unless the others compile at the same time
            if self.options in state.fail:
                raise RuntimeError("stand-in compile error")

        def get_function(self, name):
            return (self, name)

    monkeypatch.setattr(cp, "RawModule", Raw)
    stream = types.SimpleNamespace(synchronize=lambda: state.synced.append(threading.current_thread().name))
    monkeypatch.setattr(cp, "cuda", types.SimpleNamespace(Device=_Device, get_current_stream=lambda: stream),
                        raising=False)
    monkeypatch.setattr(b, "_modules", {})
    monkeypatch.setattr(b, "_pending", {})
    monkeypatch.setattr(b, "_jobs", [])
    state.build = b
    return state


OPT = ("-std=c++14",)


def test_precompile_builds_each_module_once_in_parallel_threads(stub_build, monkeypatch):
    b = stub_build.build
    monkeypatch.setattr(os, "cpu_count", lambda: 8)  # one thread per module up to the cores (this VM: 2)
    specs = [("eigen_nr.cu", OPT, None), ("frechet.cu", OPT, None), ("eigen.cu", OPT, {"N": 7, "IPIM_B": 0}),
             ("frechet.cu", OPT, {}), ("eigen.cu", OPT, {"IPIM_B": 0, "N": 7})]  # two repeats
    stub_build.barrier = threading.Barrier(3, timeout=20)  # all three compiles at once, or an error
    assert b.precompile(specs) == 3
    assert b.precompile(specs) == 0  # building already
    mod, name = b.function("eigen.cu", "ipim_a", OPT, {"N": 7, "IPIM_B": 0})
    assert name == "ipim_a" and mod.options == OPT + ("-DIPIM_B=0", "-DN=7")
    assert b.function("eigen_nr.cu", "eigenvalues_nr", OPT)[0] is b.module("eigen_nr.cu", OPT)
    b.module("frechet.cu", OPT)
    assert not b._pending and len(b._modules) == 3
    assert len(stub_build.compiled) == 3 and all(t.startswith("nvrtc") for _, t in stub_build.compiled)
    assert b.precompile(specs) == 0  # built
    # a module not precompiled is built by its caller (RawModule compiles it at its first kernel)
    stub_build.barrier = None
    mod, _ = b.function("newton.cu", "newton_rhs", OPT)
    assert mod.options == OPT and len(stub_build.compiled) == 3 and len(b._modules) == 4


def test_a_failed_precompile_raises_where_the_module_is_used(stub_build):
    b = stub_build.build
    stub_build.fail.add(OPT + ("-DN=5",))
    assert b.precompile([("eigen.cu", OPT, {"N": 5}), ("frechet.cu", OPT, None)]) == 2
    with pytest.raises(RuntimeError, match="stand-in compile error"):
        b.module("eigen.cu", OPT, {"N": 5})
    assert b.module("frechet.cu", OPT).options == OPT


def test_precompile_runs_its_jobs_in_the_threads_and_wait_jobs_waits_and_raises(stub_build, monkeypatch):
    """The start-up's CuPy warm-up (solver/bsp/warm.py) runs in precompile's threads beside the modules,
    every job in a thread of its own when the cores allow, its stream synchronized; wait_jobs waits for
    all of them and raises a job's error."""
    b = stub_build.build
    monkeypatch.setattr(os, "cpu_count", lambda: 8)
    barrier = threading.Barrier(4, timeout=20)  # 1 module + 3 jobs at once, or BrokenBarrierError
    stub_build.barrier = barrier
    ran = []

    def job(i):
        def run():
            barrier.wait()
            ran.append((i, threading.current_thread().name))
        return run

    assert b.precompile([("frechet.cu", OPT, None)], [job(0), job(1), job(2)]) == 1
    b.wait_jobs()
    assert sorted(i for i, _ in ran) == [0, 1, 2] and all(t.startswith("nvrtc") for _, t in ran)
    assert len(stub_build.synced) == 3 and not b._jobs
    stub_build.barrier = None

    def bad():
        raise ValueError("warm-up error")

    assert b.precompile([], [bad]) == 0  # no module, one job
    with pytest.raises(ValueError, match="warm-up error"):
        b.wait_jobs()
    b.wait_jobs()  # nothing left


@pytest.mark.parametrize("mesh", [("mesh.NX=9", "mesh.NZ=11"), ("mesh.NX=9", "mesh.NZ=9", "mesh.N_sbn=1", "mesh.NPHI=4", "mesh.NW=6")])
def test_warm_jobs_run_the_startup_expressions_on_numpy(newton_cases, mesh):
    """Every warm-up job runs (shapes consistent with the functions it calls), and BTE_init's start
    distribution (bte.initial_phi, which Simulation.startup and the warm-up use) is rho_eq s_w M, constant in phi."""
    from solver.bsp import bte, warm

    m = newton_cases.model(*mesh)
    for job in warm.jobs(m, NP):
        job()
    assert len(warm.jobs(m, NP)) == 6
    rng = np.random.default_rng(3)
    rho_eq = rng.random((m.NX, 3, m.N_sbn))
    Phi = bte.initial_phi(m, NP, rho_eq, m.s_w, m.maxwellian, m.NPHI)
    assert Phi.shape == (m.NX, 3, m.N_sbn, m.NW, m.NPHI) and Phi.flags.c_contiguous
    want = rho_eq[:, :, :, None] * (m.s_w * m.maxwellian)[None, :, None, :]
    assert np.array_equal(Phi, np.repeat(want[..., None], m.NPHI, axis=-1))
    assert warm._small(1) == 1 and warm._small(300) == 2


def _ic(m):
    ic = poisson.initcond(m, NP)
    return np.ascontiguousarray(ic.V), ic


@pytest.mark.parametrize("numerics, count", [((), 6), (("numerics.eigen=bisection", "numerics.ipim=b"), 6)])
def test_emulated_startup_modules_are_the_modules_the_startup_launches(emulated_cuda, newton_cases,
                                                                       fake_graph_capture, monkeypatch, numerics, count, rng):
    """kernels.cuda.startup_modules (eigen.modules + Frechet + newton.modules) lists exactly the
    modules that eigen, Frechet and the Newton system (construct, solve, rhs, norms, deps_dx) of
    INITCOND/THERMEQUIL build on the emulation: nothing precompiled in vain, nothing left out."""
    ce, cf, cn, b = emulated_cuda.eigen, emulated_cuda.frechet, emulated_cuda.newton, emulated_cuda._build
    m = newton_cases.model("mesh.NX=13", "mesh.NZ=11", "mesh.N_sbn=3", *numerics)
    V, ic = _ic(m)
    monkeypatch.setattr(b, "_modules", {})
    eps, chi = ce.eigen(m, NP, V)
    ce.eigen(m, NP, V, eps)  # the warm start (newton: the same module)
    rho = poisson.fermi_dirac_rho(m, np, eps)
    F = cf.frechet(m, NP, eps, chi, rho, poisson.fermi_dirac_drho(m, np, eps))
    for bc in ("neumann", "dirichlet"):
        sysm = poisson._system(m, bc)
        bvals = sysm.boundary_values(m) if bc == "neumann" else sysm.boundary_values(m, V[0], V[0])
        N = poisson.density(np, rho, chi)
        rhs = cn.newton_rhs(m, NP, sysm, F, V, N, m.N_D)
        A, bb = cn.construct_linsys(m, NP, sysm, F, rhs, bvals)
        x = cn.solve_linsys(m, NP, sysm, A, bb)
        cn.newton_norms(m, NP, x.reshape(V.shape), V, N, N, x)
    cn.deps_dx_max(m, NP, eps, V)
    listed = ce.modules(m) + [(cf.SOURCE, cf.OPTIONS, None)] + cn.modules(m)
    assert {b._key(*s) for s in listed} == set(b._modules)
    # the default (numerics.eigen twisted): eigen_tw.cu twice (a kernel each); bisection + ipim b: eigen.cu twice
    assert len(listed) == len(b._modules) == count


def test_numpy_and_the_reference_build_nothing(newton_cases):
    from solver.bsp import kernels

    assert kernels.precompile(newton_cases.model("mesh.NX=9", "mesh.NZ=11"), NP) == 0
    cupy_like = types.SimpleNamespace(name="cupy")
    assert kernels.precompile(newton_cases.model("mesh.NX=9", "mesh.NZ=11", "numerics.kernels=array"), cupy_like) == 0


# ------------------------------------------------------------------------------------- GPU
@pytest.mark.gpu
def test_fermi_dirac_densities_bitwise_as_before(cupy_backend, rng):
    """xp.divide(s, pi) is what ``s / pi`` ran on CuPy (through numpy.true_divide and
    __array_ufunc__): the same bits."""
    import cupy as cp

    from solver.bsp.model import Model, load

    m = Model(load(None, ["mesh.NX=9", "mesh.NZ=11"]))
    eps = cp.asarray(rng.standard_normal((9, 3, m.N_sbn)) * 3.0)
    s = cp.asarray(m.sqrt_mxmy)[None, :, None]
    assert cp.array_equal(poisson.fermi_dirac_rho(m, cp, eps), (s / math.pi) * cp.logaddexp(0.0, -eps))
    assert cp.array_equal(poisson.fermi_dirac_drho(m, cp, eps), (s / math.pi) / (1.0 + cp.exp(eps)))


FIRST_STEP = """
import json, sys
from solver.bsp import simulation
from solver.bsp.kernels.cuda import _build
pre = {}
real = _build.precompile
def spy(specs, jobs=()):
    pre['keys'] = [list(map(str, _build._key(*s))) for s in specs]
    pre['jobs'] = len(jobs)
    n = real(specs, jobs)
    _build.wait_jobs()  # (the run waits at its first capture; here at once: a test of what they cover)
    return n
_build.precompile = spy
import re, threading, traceback
from cupy.cuda import compiler
main_cupy = []  # CuPy's own kernels compiled or loaded by the main thread (not _build's modules)
real_compile = compiler._compile_module_with_cache
def counted(*args, **kw):
    own = any(f.filename.endswith('_build.py') for f in traceback.extract_stack())
    if threading.current_thread() is threading.main_thread() and not own:
        main_cupy.extend(re.findall(r'__global__\\s+void\\s+(\\w+)', str(args[0] if args else kw.get('source', ''))))
    return real_compile(*args, **kw)
compiler._compile_module_with_cache = counted
def first_step(self):
    print('first step:' + json.dumps({'heavy': [m for m in %r if m in sys.modules], 'pre': pre['keys'],
          'used': [list(map(str, k)) for k in _build._modules], 'pending': len(_build._pending),
          'jobs': pre['jobs'], 'main_cupy': main_cupy}), flush=True)
    raise SystemExit(0)
simulation.Simulation.step = first_step
from solver.cli import main
main(%r)
"""


@pytest.mark.gpu
def test_cupy_startup_imports_no_cupyx_and_precompiles_what_it_uses(tmp_path):
    heavy = ("cupyx.scipy", "cupyx.linalg", "scipy.sparse", "scipy.linalg", "pandas", "matplotlib")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
               CUPY_CACHE_DIR=str(tmp_path / "kernels"))  # (a cold start: every module compiled)
    argv = ["bsp", "bench-case", "6x17x17x40x8:cupy:1:1:0"]
    r = subprocess.run([sys.executable, "-c", FIRST_STEP % (heavy, argv)], capture_output=True, text=True, env=env,
                       cwd=ROOT, timeout=600)
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith("first step:")]
    assert r.returncode == 0 and lines, r.stdout + r.stderr
    rec = json.loads(lines[-1].removeprefix("first step:"))
    assert rec["heavy"] == []
    assert rec["pending"] == 0 and len(rec["pre"]) == 6  # eigen_tw.cu x 2 (the default twisted), Frechet, 3 Newton
    assert sorted(map(tuple, rec["pre"])) == sorted(map(tuple, rec["used"]))
    # the warm-up (solver/bsp/warm.py) compiled every CuPy kernel of the start-up beforehand, in its threads
    assert rec["jobs"] == 6 and rec["main_cupy"] == []
