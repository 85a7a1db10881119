"""Shared fixtures: backends to test over, the ``gpu`` marker's clean skip, the CUDA fast paths
imported against a stand-in ``cupy`` that compiles the .cu sources with g++ (the CPU emulation
tests), and the builders of the Newton test problems."""
import ctypes
import hashlib
import importlib
import os
import re
import shutil
import subprocess
import sys
import types
from pathlib import Path

import numpy as np
import pytest

from solver.backend import available_backends, get_backend, gpu_available

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("BSP_SHARED", REPO.parent / "shared"))


def pytest_collection_modifyitems(config, items):
    if gpu_available():
        return
    skip = pytest.mark.skip(reason="needs CuPy and a CUDA device")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(params=available_backends())
def backend(request):
    """Every backend usable on this machine (numpy always; numba and cupy where present)."""
    return get_backend(request.param)


@pytest.fixture
def numpy_backend():
    return get_backend("numpy")


@pytest.fixture
def cupy_backend():
    if not gpu_available():
        pytest.skip("needs CuPy and a CUDA device")
    return get_backend("cupy")


class Interrupted(RuntimeError):
    """Raised by the simulation of ``dies_after`` (a killed job)."""


@pytest.fixture
def dies_after():
    """A Simulation class whose run raises :class:`Interrupted` right after step ``n`` (keyword
    argument), as a killed job would stop (after any checkpoint at that step); ``.Interrupted``."""
    from solver.bsp.simulation import Simulation

    class DiesAfter(Simulation):
        def __init__(self, *a, n, **k):
            super().__init__(*a, **k)
            self.n = n

        def step(self):
            super().step()
            if self.state.step == self.n:
                raise Interrupted

    DiesAfter.Interrupted = Interrupted
    return DiesAfter


@pytest.fixture
def kept_jacobian_resume(dies_after, tmp_path):
    """check(cfg, backend, n, checkpoint_step): a run to the end, and one killed after step ``n`` whose last checkpoint
    (at ``checkpoint_step``, between two Jacobian evaluations) holds the kept Jacobian, resumed: its profiles.csv
    and scalars.csv byte-identical to the first run's (iter_graph factors the checkpoint's Jacobian first)."""
    def check(cfg, backend, n, checkpoint_step):
        import h5py

        from solver.bsp.simulation import CHECKPOINT, Simulation
        a, b = tmp_path / "a", tmp_path / "b"
        Simulation(cfg, backend, a, progress=False).run()
        with pytest.raises(dies_after.Interrupted):
            dies_after(cfg, backend, b, progress=False, n=n).run()
        with h5py.File(b / CHECKPOINT, "r") as f:
            assert int(f.attrs["step"]) == checkpoint_step and "iter_jacobian_F" in f  # the path under test
        Simulation(cfg, backend, b, progress=False).run(resume=True)
        for name in ("profiles.csv", "scalars.csv"):
            assert (a / name).read_bytes() == (b / name).read_bytes(), name
    return check


@pytest.fixture
def rng():
    return np.random.default_rng(12345)


@pytest.fixture(scope="session")
def shared_dir():
    if not SHARED.is_dir():
        pytest.skip(f"shared/ folder not found at {SHARED}")
    return SHARED


# ---------------------------------------------------------------------------- CUDA on the host
# A .cu source compiled with g++ for the host: blocks run one after another; a kernel that
# synchronises (__syncthreads, warp intrinsics) runs one OS thread per CUDA thread (__syncthreads =
# std::barrier, __shared__ = static: shared by the threads of the running block, __shfl_xor_sync and
# __reduce_max_sync through a per-warp buffer), any other kernel runs its threads in a loop.  A kernel
# that calls grid_barrier (a persistent kernel whose blocks wait for each other: batched_cr.cu
# bcr_resolve) runs ALL its blocks' threads at once (each block its own barriers; such a kernel has no
# __shared__ memory, which would be shared by every block here); atomicAdd / atomicExch are std::atomic_ref
# operations, __threadfence a sequentially consistent fence, and the spin wait yields (BCR_SPIN_PAUSE).
# -ffp-contract=off like the device's --fmad=false: no a*b + c contraction.
_STUB = r"""
#include <atomic>
#include <barrier>
#include <thread>
#include <vector>
#include <cmath>
#include <math.h>
#include <cstring>
#include <cstddef>
using std::isfinite;
struct dim3_ { unsigned x = 0, y = 0, z = 0; };
static thread_local dim3_ threadIdx, blockIdx;
static dim3_ blockDim;
#define __global__
#define __device__
#define __forceinline__ inline
#define __shared__ static
#define __launch_bounds__(...)
#define __constant__ static
struct double2 { double x, y; };
#define __restrict__
static thread_local std::barrier<>* g_bar;
struct WarpX { std::barrier<>* bar; double dv[32]; int iv[32]; unsigned uv[32]; };
static thread_local WarpX* g_warps;
static inline unsigned atomicAdd(unsigned* p, unsigned v) { return std::atomic_ref<unsigned>(*p).fetch_add(v); }
static inline unsigned atomicExch(unsigned* p, unsigned v) { return std::atomic_ref<unsigned>(*p).exchange(v); }
static inline void __threadfence() { std::atomic_thread_fence(std::memory_order_seq_cst); }
#define BCR_SPIN_PAUSE() std::this_thread::yield()
static inline void __syncthreads() { g_bar->arrive_and_wait(); }
template <class T> static inline T shfl_(T v, int off, T* buf) {
  WarpX& W = g_warps[threadIdx.x / 32]; int l = threadIdx.x % 32;
  buf[l] = v; W.bar->arrive_and_wait(); T r = buf[l ^ off]; W.bar->arrive_and_wait(); return r; }
static inline double __shfl_xor_sync(unsigned, double v, int off) { return shfl_(v, off, g_warps[threadIdx.x / 32].dv); }
static inline int __shfl_xor_sync(unsigned, int v, int off) { return shfl_(v, off, g_warps[threadIdx.x / 32].iv); }
static inline unsigned __reduce_max_sync(unsigned, unsigned v) {
  WarpX& W = g_warps[threadIdx.x / 32]; int l = threadIdx.x % 32;
  W.uv[l] = v; W.bar->arrive_and_wait(); unsigned r = 0; for (int i = 0; i < 32; ++i) r = W.uv[i] > r ? W.uv[i] : r;
  W.bar->arrive_and_wait(); return r; }
static inline unsigned __float_as_uint(float f) { unsigned u; std::memcpy(&u, &f, 4); return u; }
"""

_THREADED = r"""
extern "C" void run_{name}(int gx, int bx, {decl}) {{
  blockDim.x = bx;
  for (int g = 0; g < gx; ++g) {{
    std::barrier<> bar(bx);
    std::vector<WarpX> warps((bx + 31) / 32);
    for (auto& w : warps) w.bar = new std::barrier<>(32);
    WarpX* wp = warps.data();
    std::vector<std::thread> th;
    for (int l = 0; l < bx; ++l)
      th.emplace_back([=, &bar] {{ g_bar = &bar; g_warps = wp; threadIdx.x = l; blockIdx.x = g; {name}({call}); }});
    for (auto& t : th) t.join();
    for (auto& w : warps) delete w.bar;
  }}
}}
"""

_CONCURRENT = r"""
extern "C" void run_{name}(int gx, int bx, {decl}) {{
  blockDim.x = bx;
  std::vector<std::barrier<>*> bars;
  std::vector<std::vector<WarpX>> warps(gx);
  for (int g = 0; g < gx; ++g) {{
    bars.push_back(new std::barrier<>(bx));
    warps[g].resize((bx + 31) / 32);
    for (auto& w : warps[g]) w.bar = new std::barrier<>(32);
  }}
  std::vector<std::thread> th;
  for (int g = 0; g < gx; ++g) {{
    std::barrier<>* bp = bars[g]; WarpX* wp = warps[g].data();
    for (int l = 0; l < bx; ++l)
      th.emplace_back([=] {{ g_bar = bp; g_warps = wp; threadIdx.x = l; blockIdx.x = g; {name}({call}); }});
  }}
  for (auto& t : th) t.join();
  for (int g = 0; g < gx; ++g) {{ delete bars[g]; for (auto& w : warps[g]) delete w.bar; }}
}}
"""

_SEQUENTIAL = r"""
extern "C" void run_{name}(int gx, int bx, {decl}) {{
  blockDim.x = bx;
  for (int g = 0; g < gx; ++g)
    for (int l = 0; l < bx; ++l) {{ blockIdx.x = g; threadIdx.x = l; {name}({call}); }}
}}
"""

_KERNEL = re.compile(r"__global__\s+void\s+(?:__launch_bounds__\s*\([^)]*\)\s+)?(\w+)\s*\(([^)]*)\)")
_SYNC = re.compile(r"__syncthreads|_sync\s*\(")
_GRID = re.compile(r"\bgrid_barrier\s*\(")
_DTYPE = {"double": np.float64, "int": np.int32, "unsigned char": np.uint8, "unsigned": np.uint32}


def _kernels(code, defines):
    """{kernel name: (params [(declaration, name, element type or scalar type, is pointer)], synchronises:
    False, True, or "grid" for a kernel that calls grid_barrier)} of the source as the preprocessor leaves
    it with ``defines``."""
    r = subprocess.run(["g++", "-E", "-P", "-x", "c++", *defines, "-"], input=code, capture_output=True, text=True,
                       check=True)
    code = r.stdout
    out = {}
    for m in _KERNEL.finditer(code):
        params = []
        for p in m.group(2).split(","):
            p = " ".join(p.split())
            pname = re.findall(r"(\w+)$", p)[0]
            ptr = "*" in p
            base = p[: p.index("*")] if ptr else p[: -len(pname)]
            base = " ".join(w for w in base.split() if w not in ("const", "__restrict__"))
            params.append((p, pname, base, ptr))
        depth, i = 0, code.index("{", m.end())  # the kernel body: match its braces
        j = i
        while True:
            depth += {"{": 1, "}": -1}.get(code[j], 0)
            if depth == 0:
                break
            j += 1
        body = code[i:j]
        out[m.group(1)] = (params, "grid" if _GRID.search(body) else bool(_SYNC.search(body)))
    return out


def fake_cupy(tmp: Path):
    """A stand-in ``cupy`` over NumPy whose RawModule compiles the given source (and its -D options)
    with g++ and launches the host build.  ``fake.compiled`` lists (code, options) of every module."""
    cp = types.ModuleType("cupy")
    for k in ("asarray", "ascontiguousarray", "empty", "empty_like", "zeros", "arange", "diagonal",
              "float64", "int32", "uint8", "uint32", "linalg", "concatenate", "broadcast_to", "eye", "matmul", "where"):
        setattr(cp, k, getattr(np, k))
    cp.asnumpy = np.asarray
    cp.cublas = types.SimpleNamespace(batched_gesv=np.linalg.solve)  # LU with partial pivoting per block
    cp.compiled = []

    class RawModule:
        def __init__(self, code, options=()):
            cp.compiled.append((code, tuple(options)))
            defines = [o for o in options if o.startswith("-D")]
            self.kernels = _kernels(code, defines)
            wrappers = []
            for name, (params, sync) in self.kernels.items():
                decl = ", ".join(p for p, _, _, _ in params)
                call = ", ".join(n for _, n, _, _ in params)
                wrapper = _CONCURRENT if sync == "grid" else _THREADED if sync else _SEQUENTIAL
                wrappers.append(wrapper.format(name=name, decl=decl, call=call))
            text = _STUB + code + "\n" + "\n".join(wrappers)
            h = hashlib.sha1((text + " ".join(defines)).encode()).hexdigest()[:16]
            cpp, so = tmp / f"k{h}.cpp", tmp / f"k{h}.so"
            if not so.exists():
                cpp.write_text(text)
                r = subprocess.run(["g++", "-std=c++20", "-O1", "-w", "-ffp-contract=off", "-fno-fast-math", "-shared",
                                    "-fPIC", "-pthread", *defines, "-o", str(so), str(cpp)], capture_output=True, text=True)
                if r.returncode:
                    raise AssertionError(r.stderr[-3000:])
            self.lib = ctypes.CDLL(str(so))

        def get_function(self, name):
            params, _ = self.kernels[name]  # KeyError: no such kernel in this module
            f = getattr(self.lib, "run_" + name)
            conv = {"double": ctypes.c_double, "int": ctypes.c_int}
            f.argtypes = [ctypes.c_int, ctypes.c_int] + [ctypes.c_void_p if ptr else conv[base]
                                                         for _, _, base, ptr in params]
            f.restype = None

            def launch(grid, block, args, shared_mem=0):
                assert len(args) == len(params), (name, len(args), len(params))
                vals = []
                for a, (p, _, base, ptr) in zip(args, params):
                    if ptr:
                        assert isinstance(a, np.ndarray) and a.flags.c_contiguous and a.dtype == _DTYPE[base], (name, p)
                        vals.append(a.ctypes.data)
                    else:
                        assert type(a) is _DTYPE[base], (name, p, type(a))
                        vals.append(a.item())
                f(int(grid[0]), int(block[0]), *vals)
            return launch

    cp.RawModule = RawModule
    return cp


def _import_with(fake, names):
    """Import solver.bsp.kernels.cuda and its modules ``names`` afresh while ``fake`` stands in for
    ``cupy``; sys.modules and the parent package are restored afterwards."""
    import solver.bsp.kernels as parent
    prefix = "solver.bsp.kernels.cuda"

    def ours(k):
        return k == "cupy" or k == prefix or k.startswith(prefix + ".")

    saved = {k: v for k, v in sys.modules.items() if ours(k)}
    missing = object()
    saved_attr = parent.__dict__.get("cuda", missing)
    for k in saved:
        del sys.modules[k]
    sys.modules["cupy"] = fake
    try:
        pkg = importlib.import_module(prefix)
        mods = {n: importlib.import_module(f"{prefix}.{n}") for n in names}
    finally:
        for k in [k for k in sys.modules if ours(k)]:
            del sys.modules[k]
        sys.modules.update(saved)
        if saved_attr is missing:
            parent.__dict__.pop("cuda", None)
        else:
            parent.cuda = saved_attr
    return types.SimpleNamespace(TABLE=pkg.TABLE, cupy=fake, **mods)


@pytest.fixture(scope="session")
def emulated_cuda(tmp_path_factory):
    """solver.bsp.kernels.cuda (``.TABLE``) and its launchers (``.weno``, ``.rk``, ``.scattering``, ``.eigen``,
    ``.frechet``, ``.newton``, ``.dense``, ``.iter_graph``, ``.dens``) imported against the stand-in cupy (``.cupy``): the
    Python launchers run the .cu sources compiled for the host."""
    if shutil.which("g++") is None:
        pytest.skip("needs g++ (C++20) to run the CUDA sources on the host")
    fake = fake_cupy(tmp_path_factory.mktemp("cuda_emulation"))
    ns = _import_with(fake, ("weno", "rk", "scattering", "eigen", "frechet", "newton", "dense", "iter_graph", "dens",
                             "_build"))
    # bcr_rhs / bcr_backsub in blocks of 256 emulated threads (an OS thread each) instead of the device's 1024:
    # a row's sum is the same whatever the warp count (test_emulated_resolve_threads_give_the_same_bits)
    ns.newton.LEVEL_THREADS = EMULATED_LEVEL_THREADS
    # the fused resolve's grid (the device's: up to one 1024-thread block per SM): here at most 3 blocks
    # of 2 warps, run concurrently (conftest _CONCURRENT), the phases' tasks spread over 6 warps
    ns.newton.resolve_grid = lambda fn, tasks, threads=64: (max(1, min(3, -(-tasks // 2))), 64)
    return ns


EMULATED_LEVEL_THREADS = 256


class _FakeCapture:
    """Stand-ins (on emulated_cuda.newton) for cupy.cuda's Stream / MemoryPool / graph and for
    _cublas.Blas (numpy's batched solve and matmul): a capture records the solve (run
    eagerly on the host) and the graph's launch reruns it on the captured buffers, writing into the
    captured output, as a replayed CUDA graph does."""

    def __init__(self, cn, monkeypatch):
        self.events = []
        real = cn._solve_batched
        fake = self

        def solve(*args):
            x = real(*args)
            if fake.capturing:
                fake.replay = lambda: x.__setitem__(Ellipsis, real(*args))
            fake.events.append("capture" if fake.capturing else "warm-up")
            return x

        class Stream:
            def __init__(self, non_blocking=False):
                pass

            def __enter__(self):
                return self

            def __exit__(self, *exc):
                return False

            def synchronize(self):
                pass

            def begin_capture(self):
                fake.capturing = True

            def end_capture(self):
                fake.capturing = False
                replay = fake.replay
                return types.SimpleNamespace(launch=lambda: fake.events.append("launch") or replay())

        self.capturing = False
        cuda = types.SimpleNamespace(Stream=Stream, MemoryPool=lambda: types.SimpleNamespace(malloc=None),
                                     using_allocator=lambda malloc: Stream(), get_current_stream=Stream)
        monkeypatch.setattr(cn.cp, "cuda", cuda, raising=False)
        monkeypatch.setattr(cn, "_solve_batched", solve)
        monkeypatch.setattr(cn._cublas, "Blas", lambda stream: types.SimpleNamespace(gesv=np.linalg.solve,
                                                                                     matmul=np.matmul))


@pytest.fixture
def fake_graph_capture(emulated_cuda, monkeypatch):
    """The CUDA graph of newton.BatchedGraph (numerics.linsys_graph) stood in on the emulation
    (_FakeCapture; ``.events`` lists warm-up / capture / launch in order)."""
    return _FakeCapture(emulated_cuda.newton, monkeypatch)


@pytest.fixture
def stub_cupy():
    """A bare stand-in ``cupy`` module in sys.modules for one test (imports succeed, no kernels run)."""
    saved = sys.modules.get("cupy")
    sys.modules["cupy"] = types.ModuleType("cupy")
    yield sys.modules["cupy"]
    if saved is None:
        del sys.modules["cupy"]
    else:
        sys.modules["cupy"] = saved


# ---------------------------------------------------------------------------- Newton test problems
class NewtonCases:
    """Builders of Newton systems for the blocktri and CUDA newton tests (host arrays)."""

    @staticmethod
    def model(*overrides):
        from solver.bsp.model import Model, load
        return Model(load(None, list(overrides)))

    @staticmethod
    def spd_F(rng, nxi, nz, scale=20.0):
        """Random symmetric positive semidefinite Frechet blocks (B^T diag(c) B with c >= 0)."""
        B = rng.standard_normal((nxi, 2 * nz, nz))
        c = rng.uniform(0.0, 1.0, (nxi, 2 * nz))
        return scale * np.einsum("iaj,ia,iak->ijk", B, c, B) / nz

    @classmethod
    def problem(cls, m, bc, rng, F=None):
        """(sysm, F, rhs, bvals, A, b, x0): the reference CSC system of poisson.construct_linsys
        and its SuperLU solution (poisson.solve_linsys) on the numpy backend."""
        from solver.bsp import poisson
        NP = get_backend("numpy")
        sysm = poisson.NewtonSystem(m, bc)
        NX, NZ = m.NX, m.NZ
        if F is None:
            F = cls.spd_F(rng, NX - 2, NZ - 2)
        rhs = rng.standard_normal((NX - 2, NZ - 2))
        bvals = sysm.boundary_values(m, 0.3 + 0.1 * rng.standard_normal(NZ),
                                     0.4 + 0.1 * rng.standard_normal(NZ)).ravel()
        A, b = poisson.construct_linsys(m, NP, sysm, F, rhs, bvals)
        x0 = poisson.solve_linsys(m, NP, sysm, A, b)
        return sysm, F, rhs, bvals, A, b, x0

    @classmethod
    def indefinite(cls, rng):
        """A symmetric indefinite F (POTENTIAL's rho need not be monotone) chosen so that the leading
        3 x 3 minor of block 1 vanishes: elimination with diagonal pivots divides by ~0 at the third
        node.  Returns (m, bs, sysm, F, rhs, bvals, x0 (SuperLU), d0 (the minor before the shift),
        minor3 (the minor with t added to F[0, 1, 1]))."""
        from solver.bsp import blocktri, poisson
        m = cls.model("mesh.NX=11", "mesh.NZ=9")
        nz = m.NZ - 2
        bs = blocktri.BlockSystem(poisson.NewtonSystem(m, "dirichlet"))
        F = cls.spd_F(rng, m.NX - 2, nz)
        F0 = rng.standard_normal((nz, nz))
        F[0] = F0 + F0.T

        def minor3(t):
            M = bs.D0[1].copy()
            M[1:-1, 1:-1] += bs.cp_dz * F[0]
            M[2, 2] += bs.cp_dz * t
            return np.linalg.det(M[:3, :3])

        d0 = minor3(0.0)
        F[0, 1, 1] += -d0 / (minor3(1.0) - d0)  # det is linear in t
        sysm, F, rhs, bvals, A, b, x0 = cls.problem(m, "dirichlet", rng, F=F)
        return m, bs, sysm, F, rhs, bvals, x0, d0, minor3

    @staticmethod
    def random_eigen(m, rng):
        """(eps, chi, rho) with rho not monotone in eps (indefinite Frechet pairs)."""
        NX, NZ, NS = m.NX, m.NZ, m.N_sbn
        eps = rng.standard_normal((NX, 3, NS)).cumsum(axis=2) + 0.1 * np.arange(NS)
        chi = rng.standard_normal((NX, 3, NS, NZ))
        chi[..., 0] = chi[..., -1] = 0.0
        rho = np.exp(-eps) * rng.uniform(0.5, 1.5, eps.shape)
        return eps, chi, rho


@pytest.fixture(scope="session")
def newton_cases():
    return NewtonCases


# ---------------------------------------------------------------------------- BTE test inputs
class BteCases:
    """Models and host inputs of the BTE phases for the fast-path tests."""

    @staticmethod
    def rel(a, b):
        a, b = np.asarray(a), np.asarray(b)
        return float(np.abs(a - b).max() / max(np.abs(b).max(), 1e-300))

    @classmethod
    def pair(cls, NX=9, NS=2, NW=12, NPHI=8, NZ=17, extra=()):
        """(fast, array) models of one mesh: numerics.kernels auto and array (the test oracle)."""
        return (cls.model(NX, NS, NW, NPHI, NZ, "auto", extra), cls.model(NX, NS, NW, NPHI, NZ, "array", extra))

    @staticmethod
    def model(NX=9, NS=3, NW=40, NPHI=16, NZ=17, kernels_mode="auto", extra=()):
        from solver.bsp.model import Model, load
        return Model(load(None, [f"mesh.NX={NX}", f"mesh.N_sbn={NS}", f"mesh.NW={NW}", f"mesh.NPHI={NPHI}",
                                 f"mesh.NZ={NZ}", f"numerics.kernels={kernels_mode}", *extra]))

    @staticmethod
    def sine_chi(m):
        import math
        chi = np.zeros((m.NX, 3, m.N_sbn, m.NZ))
        for p in range(m.N_sbn):
            chi[:, :, p, :] = np.sin((p + 1) * math.pi * m.z)
        chi /= np.sqrt(m.dz * (chi**2).sum(-1, keepdims=True))
        return chi

    @classmethod
    def inputs(cls, m, rng, levels="random"):
        """Host inputs of the BTE phase: Phi > 0, eps, deps_dx, W, PhiHat, rho, rho_eq.

        levels: 'random' (uniform in [-4, 4]: every branch of the interpolation rule), 'smooth'
        (subband ladder with a sin(pi x) barrier, as in test_bsp_bte.synthetic_state) or 'grid'
        (integer multiples of dw: energies land exactly on nodes, the top node included)."""
        import math
        from solver.bsp import dens, scattering
        NP = get_backend("numpy")
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
        chi = cls.sine_chi(m) * (1 + 0.3 * rng.random((NX, 3, NS, 1)))
        W = scattering.overlap(m, NP, chi)
        prof = (m.s_w * m.maxwellian)[None, :, None, :, None]
        Phi = prof * (0.5 + rng.random(m.shape))
        rho, PhiHat = dens.dens(m, NP, Phi)
        rho_eq = rho * (0.5 + rng.random(rho.shape))
        return dict(Phi=Phi, eps=eps, deps=deps, W=W, PhiHat=PhiHat, rho=rho, rho_eq=rho_eq,
                    A=float(np.abs(deps).max()))


@pytest.fixture(scope="session")
def bte_cases():
    return BteCases
