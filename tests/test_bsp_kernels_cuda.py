"""CUDA fast paths of the BTE (solver/bsp/kernels/cuda_bte.py) against the array reference.

GPU tests (marked ``gpu``): each fast path on the cupy backend (numerics.kernels auto, checked to
dispatch to cuda_bte) against the array path on the same backend (numerics.kernels array), on
small meshes with random positive Phi, realistic and random subband levels, closed contacts and a
mechanism subset: max |diff| / max |ref| <= 1e-12; and a 20-step run fast vs array <= 1e-10.

CPU tests: the same kernel source compiled with the host C++ compiler (``-ffp-contract=off``,
like the device's ``--fmad=false``) behind a stand-in ``cupy`` module, so that the Python
wrappers and the kernels' logic run end to end without a GPU (skipped when no g++ is found).
The WENO terms must agree with the NumPy array path bit for bit there.
"""
import ast
import ctypes
import math
import re
import shutil
import subprocess
import types
from pathlib import Path

import numpy as np
import pytest

from solver.backend import get_backend
from solver.bsp import dens, kernels, scattering, weno
from solver.bsp.model import Model, load

NP_BE = get_backend("numpy")
SRC = Path(__file__).resolve().parents[1] / "solver" / "bsp" / "kernels" / "cuda_bte.py"
TOL = 1e-12


def rel(a, b):
    a, b = np.asarray(a), np.asarray(b)
    return float(np.abs(a - b).max() / max(np.abs(b).max(), 1e-300))


def model(NX=9, NS=3, NW=40, NPHI=16, NZ=17, kernels_mode="auto", extra=()):
    return Model(load(None, [f"mesh.NX={NX}", f"mesh.N_sbn={NS}", f"mesh.NW={NW}", f"mesh.NPHI={NPHI}",
                             f"mesh.NZ={NZ}", f"numerics.kernels={kernels_mode}", *extra]))


def sine_chi(m):
    chi = np.zeros((m.NX, 3, m.N_sbn, m.NZ))
    for p in range(m.N_sbn):
        chi[:, :, p, :] = np.sin((p + 1) * math.pi * m.z)
    chi /= np.sqrt(m.dz * (chi**2).sum(-1, keepdims=True))
    return chi


def inputs(m, rng, levels="random"):
    """Host inputs of the BTE phase: Phi > 0, eps, deps_dx, W, PhiHat, rho, rho_eq.

    levels: 'random' (uniform in [-4, 4]: every branch of the interpolation rule), 'smooth'
    (subband ladder with a sin(pi x) barrier, as in test_bsp_bte.synthetic_state) or 'grid'
    (integer multiples of dw: energies land exactly on nodes, the top node included)."""
    NX, NS = m.NX, m.N_sbn
    if levels == "random":
        eps = rng.uniform(-4, 4, (NX, 3, NS))
        deps = 5 * rng.standard_normal((NX, 3, NS))
    elif levels == "smooth":
        x = m.x[:, None, None]
        base = 1.5 * np.arange(NS)[None, None, :] ** 2 + np.array([0.0, 0.0, -1.0])[None, :, None]
        eps = base + 2.0 * np.sin(math.pi * x)
        deps = np.broadcast_to(2.0 * math.pi * np.cos(math.pi * x), eps.shape).copy()
    else:
        eps = m.dw * rng.integers(-6, 7, (NX, 3, NS)).astype(float)
        deps = 5 * rng.standard_normal((NX, 3, NS))
    chi = sine_chi(m) * (1 + 0.3 * rng.random((NX, 3, NS, 1)))
    W = scattering.overlap(m, NP_BE, chi)
    prof = (m.s_w * m.maxwellian)[None, :, None, :, None]
    Phi = prof * (0.5 + rng.random(m.shape))
    rho, PhiHat = dens.dens(m, NP_BE, Phi)
    rho_eq = rho * (0.5 + rng.random(rho.shape))
    return dict(Phi=Phi, eps=eps, deps=deps, W=W, PhiHat=PhiHat, rho=rho, rho_eq=rho_eq,
                A=float(np.abs(deps).max()))


# ---------------------------------------------------------------------------- CPU emulation
def _kernel_source():
    tree = ast.parse(SRC.read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "CUDA_SOURCE" for t in node.targets):
            return node.value.value
    raise AssertionError("CUDA_SOURCE not found in cuda_bte.py")


_CTYPE = {"int": ctypes.c_int, "double": ctypes.c_double}


def _build_emulation(tmp):
    """Compile the kernel source for the host; returns {kernel name: (function, param types)}."""
    src = _kernel_source()
    sigs = re.findall(r"__global__\s+void\s+(\w+)\s*\(([^)]*)\)", src)
    wrappers = []
    table = {}
    for name, params in sigs:
        plist = [" ".join(p.split()) for p in params.split(",")]
        names = [re.findall(r"(\w+)$", p)[0] for p in plist]
        types_ = [p[: -len(n)].strip() for p, n in zip(plist, names)]
        wrappers.append(
            f'extern "C" void run_{name}(long long nthreads, {", ".join(plist)}) {{\n'
            f"  blockDim.x = 128;\n"
            f"  for (long long t = 0; t < nthreads; ++t) {{ blockIdx.x = (unsigned)(t / 128); "
            f"threadIdx.x = (unsigned)(t % 128); {name}({', '.join(names)}); }}\n}}\n")
        table[name] = types_
    code = ("#include <math.h>\n#include <cmath>\n"
            "struct BspDim3 { unsigned int x, y, z; };\n"
            "static BspDim3 blockIdx, threadIdx, blockDim;\n"
            "#define __global__\n#define __device__\n#define __forceinline__ inline\n"
            + src + "\n" + "\n".join(wrappers))
    cpp = Path(tmp, "bte_emul.cpp")
    lib = Path(tmp, "bte_emul.so")
    cpp.write_text(code)
    subprocess.run(["g++", "-O1", "-ffp-contract=off", "-fno-fast-math", "-shared", "-fPIC", "-o", str(lib), str(cpp)],
                   check=True, capture_output=True, text=True)
    dll = ctypes.CDLL(str(lib))
    out = {}
    for name, types_ in table.items():
        f = getattr(dll, "run_" + name)
        f.argtypes = [ctypes.c_longlong] + [ctypes.c_void_p if t.endswith("*") else _CTYPE[t] for t in types_]
        f.restype = None
        out[name] = (f, types_)
    return out


def _fake_cupy(funcs):
    """A stand-in ``cupy`` module over NumPy whose RawModule runs the host-compiled kernels."""
    cp = types.ModuleType("cupy")
    for k in ("asarray", "ascontiguousarray", "empty", "empty_like", "zeros", "float64", "int32", "uint8"):
        setattr(cp, k, getattr(np, k))

    class _Fn:
        def __init__(self, name):
            self.f, self.types = funcs[name]

        def __call__(self, grid, block, args):
            assert len(args) == len(self.types)
            conv = []
            for a, t in zip(args, self.types):
                if t.endswith("*"):
                    assert isinstance(a, np.ndarray) and a.flags.c_contiguous, t
                    conv.append(a.ctypes.data)
                else:
                    assert isinstance(a, (np.int32, np.float64)), (t, type(a))
                    conv.append(a.item())
            self.f(grid[0] * block[0], *conv)

    class RawModule:
        def __init__(self, code, options=()):
            assert "--fmad=false" in options

        def get_function(self, name):
            return _Fn(name)

    cp.RawModule = RawModule
    return cp


@pytest.fixture(scope="module")
def emulated(tmp_path_factory, load_with_fake_cupy):
    """cuda_bte loaded against the stand-in cupy (a private module object; sys.modules restored)."""
    if shutil.which("g++") is None:
        pytest.skip("no g++ for the CPU emulation of the kernels")
    funcs = _build_emulation(tmp_path_factory.mktemp("cuda_bte"))
    return load_with_fake_cupy(SRC, "_cuda_bte_emulated", _fake_cupy(funcs))


@pytest.mark.parametrize("levels,mechanisms", [("random", None), ("grid", None), ("smooth", (0, 3, 5))])
def test_emulated_scattering_matches_array(emulated, rng, levels, mechanisms):
    m = model(NX=9, NS=3, NW=24, NPHI=4, kernels_mode="array")
    d = inputs(m, rng, levels)
    G0 = scattering.gain(m, NP_BE, d["PhiHat"], d["eps"], d["W"], mechanisms)
    G1 = emulated.gain(m, NP_BE, d["PhiHat"], d["eps"], d["W"], mechanisms)
    L0 = scattering.loss_coefficient(m, NP_BE, d["eps"], d["W"], mechanisms)
    L1 = emulated.loss_coefficient(m, NP_BE, d["eps"], d["W"], mechanisms)
    assert np.abs(G0).max() > 0 and np.abs(L0).max() > 0
    assert rel(G1, G0) <= 1e-14, rel(G1, G0)
    assert rel(L1, L0) <= 1e-14, rel(L1, L0)


def test_emulated_elastic_top_node(emulated, rng):
    """Elastic intrasubband term alone (mechanism 0, diagonal W): Gamma = w_l exactly, the top
    node included -- the gain must equal the array path's exactly."""
    m = model(NX=9, NS=2, NW=10, NPHI=4, kernels_mode="array")
    d = inputs(m, rng, "random")
    W = np.zeros_like(d["W"])
    for nu in range(3):
        for p in range(2):
            W[:, nu, p, nu, p] = d["W"][:, nu, p, nu, p]
    G0 = scattering.gain(m, NP_BE, d["PhiHat"], d["eps"], W, (0,))
    G1 = emulated.gain(m, NP_BE, d["PhiHat"], d["eps"], W, (0,))
    assert np.array_equal(G0, G1)
    assert np.all(G1[..., -1] > 0)  # the top node is reached


@pytest.mark.parametrize("closed", [False, True])
def test_emulated_weno_bitwise(emulated, rng, closed):
    m = model(NX=9, NS=2, NW=20, NPHI=8, kernels_mode="array")
    d = inputs(m, rng, "random")
    P = d["Phi"]
    args = (d["rho_eq"][0], d["rho_eq"][-1], d["rho"][0], d["rho"][-1])
    x0 = weno.dx_term(m, NP_BE, P, *args, closed=closed)
    x1 = emulated.dx_term(m, NP_BE, P, *args, closed=closed)
    assert np.array_equal(x0, x1), rel(x1, x0)
    w0, w1 = weno.dw_term(m, NP_BE, P, d["deps"]), emulated.dw_term(m, NP_BE, P, d["deps"])
    assert np.array_equal(w0, w1), rel(w1, w0)
    p0, p1 = weno.dphi_term(m, NP_BE, P, d["deps"], d["A"]), emulated.dphi_term(m, NP_BE, P, d["deps"], d["A"])
    assert np.array_equal(p0, p1), rel(p1, p0)


def test_emulated_weno_segments(emulated, rng, monkeypatch):
    """Lines cut into several segments (x and w; NPHI = 6: the partner angle m + 3)."""
    monkeypatch.setattr(emulated, "TARGET_THREADS", 1 << 22)
    monkeypatch.setattr(emulated, "MIN_SEGMENT", 3)
    m = model(NX=10, NS=1, NW=17, NPHI=6, kernels_mode="array")
    assert emulated._segments(3 * 17 * 6, 10)[1] > 1 and emulated._segments(10 * 3 * 6, 17)[1] > 1
    d = inputs(m, rng, "random")
    P = d["Phi"]
    for closed in (False, True):
        args = (d["rho_eq"][0], d["rho_eq"][-1], d["rho"][0], d["rho"][-1])
        assert np.array_equal(weno.dx_term(m, NP_BE, P, *args, closed=closed),
                              emulated.dx_term(m, NP_BE, P, *args, closed=closed))
    assert np.array_equal(weno.dw_term(m, NP_BE, P, d["deps"]), emulated.dw_term(m, NP_BE, P, d["deps"]))
    assert np.array_equal(weno.dphi_term(m, NP_BE, P, d["deps"], d["A"]),
                          emulated.dphi_term(m, NP_BE, P, d["deps"], d["A"]))


# ---------------------------------------------------------------------------- GPU
@pytest.fixture
def pair(cupy_backend):
    """(auto model, array model) of the same mesh, and the fast-path module."""
    from solver.bsp.kernels import cuda_bte

    def make(**kw):
        return model(kernels_mode="auto", **kw), model(kernels_mode="array", **kw), cuda_bte
    return make


def _dev(cp, d):
    return {k: (cp.asarray(v) if isinstance(v, np.ndarray) else v) for k, v in d.items()}


@pytest.mark.gpu
@pytest.mark.parametrize("levels,mechanisms", [("random", None), ("smooth", None), ("grid", None),
                                               ("random", (0, 3, 5)), ("smooth", (0,))])
def test_gpu_scattering_fast_matches_array(cupy_backend, pair, rng, levels, mechanisms):
    cp = cupy_backend.xp
    ma, mr, cb = pair(NX=9, NS=3, NW=40, NPHI=16)
    assert kernels.lookup(ma, cupy_backend, "gain") is cb.gain
    assert kernels.lookup(ma, cupy_backend, "loss_coefficient") is cb.loss_coefficient
    assert kernels.lookup(mr, cupy_backend, "gain") is None
    d = _dev(cp, inputs(mr, rng, levels))
    for fn in ("gain", "loss_coefficient"):
        args = (d["PhiHat"], d["eps"], d["W"]) if fn == "gain" else (d["eps"], d["W"])
        fast = getattr(scattering, fn)(ma, cupy_backend, *args, mechanisms)
        ref = getattr(scattering, fn)(mr, cupy_backend, *args, mechanisms)
        assert fast.shape == ref.shape and fast.dtype == ref.dtype
        r = rel(cp.asnumpy(fast), cp.asnumpy(ref))
        print(f"{fn} {levels} {mechanisms}: max rel diff {r:.3e}")
        assert float(cp.abs(ref).max()) > 0
        assert r <= TOL, (fn, r)


@pytest.mark.gpu
@pytest.mark.parametrize("levels", ["random", "smooth"])
@pytest.mark.parametrize("mesh", [dict(NX=9, NS=3, NW=40, NPHI=16), dict(NX=12, NS=2, NW=31, NPHI=10)])
def test_gpu_weno_fast_matches_array(cupy_backend, pair, rng, levels, mesh):
    cp = cupy_backend.xp
    ma, mr, cb = pair(**mesh)
    for fn in ("dx_term", "dw_term", "dphi_term"):
        assert kernels.lookup(ma, cupy_backend, fn) is getattr(cb, fn)
    d = _dev(cp, inputs(mr, rng, levels))
    calls = {
        "dx_term": lambda m, c: weno.dx_term(m, cupy_backend, d["Phi"], d["rho_eq"][0], d["rho_eq"][-1],
                                             d["rho"][0], d["rho"][-1], closed=c),
        "dw_term": lambda m, c: weno.dw_term(m, cupy_backend, d["Phi"], d["deps"]),
        "dphi_term": lambda m, c: weno.dphi_term(m, cupy_backend, d["Phi"], d["deps"], d["A"]),
    }
    for fn, call in calls.items():
        for closed in ((False, True) if fn == "dx_term" else (False,)):
            fast, ref = call(ma, closed), call(mr, closed)
            r = rel(cp.asnumpy(fast), cp.asnumpy(ref))
            print(f"{fn} closed={closed} {levels} {mesh}: max rel diff {r:.3e}")
            assert r <= TOL, (fn, closed, r)


@pytest.mark.gpu
def test_gpu_weno_fast_matches_numpy_reference(cupy_backend, pair, rng):
    """The fast paths against the NumPy array path too (the project's oracle)."""
    cp = cupy_backend.xp
    ma, mr, cb = pair(NX=9, NS=2, NW=24, NPHI=8)
    h = inputs(mr, rng, "random")
    d = _dev(cp, h)
    pairs = [
        (weno.dx_term(ma, cupy_backend, d["Phi"], d["rho_eq"][0], d["rho_eq"][-1], d["rho"][0], d["rho"][-1]),
         weno.dx_term(mr, NP_BE, h["Phi"], h["rho_eq"][0], h["rho_eq"][-1], h["rho"][0], h["rho"][-1])),
        (weno.dw_term(ma, cupy_backend, d["Phi"], d["deps"]), weno.dw_term(mr, NP_BE, h["Phi"], h["deps"])),
        (weno.dphi_term(ma, cupy_backend, d["Phi"], d["deps"], d["A"]),
         weno.dphi_term(mr, NP_BE, h["Phi"], h["deps"], h["A"])),
        (scattering.gain(ma, cupy_backend, d["PhiHat"], d["eps"], d["W"]),
         scattering.gain(mr, NP_BE, h["PhiHat"], h["eps"], h["W"])),
        (scattering.loss_coefficient(ma, cupy_backend, d["eps"], d["W"]),
         scattering.loss_coefficient(mr, NP_BE, h["eps"], h["W"])),
    ]
    for fast, ref in pairs:
        assert rel(cp.asnumpy(fast), ref) <= TOL


@pytest.mark.gpu
def test_gpu_20_steps_fast_vs_array(cupy_backend):
    from solver.bsp.simulation import Simulation

    states = {}
    for mode in ("array", "auto"):
        cfg = load(None, ["mesh.N_sbn=3", "mesh.NX=9", "mesh.NZ=13", "mesh.NW=16", "mesh.NPHI=8",
                          "output.progress=false", "numerics.backend=cupy", f"numerics.kernels={mode}",
                          "time.steps=20", "time.t_end_ps=null"])
        sim = Simulation(cfg, cupy_backend, None, progress=False)
        sim.run(resume=False)
        st = sim.state
        states[mode] = {k: cupy_backend.to_numpy(getattr(st, k)) for k in ("Phi", "V", "eps", "rho")}
        assert st.step == 20
    for k in ("Phi", "V", "eps", "rho"):
        r = rel(states["auto"][k], states["array"][k])
        print(f"20 steps fast vs array: {k} max rel diff {r:.3e}")
        assert r <= 1e-10, (k, r)


def test_emulated_run_fast_vs_array(emulated, monkeypatch):
    """Whole time steps through the hooks (numpy backend dispatching to the emulated kernels)."""
    from solver.bsp.simulation import Simulation

    monkeypatch.setattr(kernels, "module_for", lambda name: emulated if name == "numpy" else None)
    states = {}
    for mode in ("array", "auto"):
        cfg = load(None, ["mesh.N_sbn=3", "mesh.NX=9", "mesh.NZ=13", "mesh.NW=16", "mesh.NPHI=8",
                          "output.progress=false", "numerics.backend=numpy", f"numerics.kernels={mode}",
                          "time.steps=5", "time.t_end_ps=null"])
        sim = Simulation(cfg, NP_BE, None, progress=False)
        assert (kernels.lookup(sim.model, NP_BE, "gain") is emulated.gain) == (mode == "auto")
        sim.run(resume=False)
        states[mode] = {k: np.asarray(getattr(sim.state, k)) for k in ("Phi", "V", "eps", "rho")}
    for k, v in states["auto"].items():
        assert rel(v, states["array"][k]) <= 1e-12, (k, rel(v, states["array"][k]))
