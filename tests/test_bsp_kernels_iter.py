"""ITER fast paths (solver/bsp/kernels/cuda_iter.py) against the reference ITER (LAPACK eigenpairs,
sparse LU on the host), and the dense form of the Newton matrix they use."""
import numpy as np
import pytest

from solver.backend import get_backend
from solver.bsp import poisson, schrodinger
from solver.bsp.model import Model, load


def model(*overrides):
    return Model(load(None, list(overrides)))


def test_dense_static_plus_blocks_equals_sparse_matrix(rng):
    m = model("mesh.NX=13", "mesh.NZ=11")
    for bc in ("neumann", "dirichlet"):
        sysm = poisson.NewtonSystem(m, bc)
        F = rng.standard_normal((11, 9, 9))
        F = F + np.swapaxes(F, 1, 2) + 20 * np.eye(9)
        A, s = sysm.matrix(F)
        D = sysm.dense_static()
        D4 = D.reshape(13, 11, 13, 11)
        ii = np.arange(1, 12)
        D4[ii, 1:-1, ii, 1:-1] += sysm.cp_dz * F
        np.testing.assert_allclose(1.0 / np.diagonal(D), s, rtol=1e-15)
        np.testing.assert_allclose(D * s[:, None], A.toarray(), rtol=1e-14, atol=1e-14)


def _coarse_V():
    m = model("mesh.NX=17", "mesh.NZ=33")
    ic = poisson.initcond(m, get_backend("numpy"))
    return m, ic


@pytest.mark.gpu
def test_cuda_eigenpairs_match_lapack(cupy_backend, rng):
    from solver.bsp.kernels import cuda_iter
    m, ic = _coarse_V()
    for V in (ic.V, ic.V + 0.3 * rng.standard_normal(ic.V.shape)):
        e0, c0 = schrodinger.eigen_host(m, V)
        e1, c1 = cuda_iter.solve_eigen(m, cupy_backend, cupy_backend.asarray(V))
        e1, c1 = cupy_backend.to_numpy(e1), cupy_backend.to_numpy(c1)
        # LAPACK's bisection stops at ~ulp * ||T||: compare on that scale
        tnorm = max(np.abs(schrodinger._kinetic(m, nu)[0]).max() for nu in range(3)) + np.abs(V).max()
        assert np.abs(e1 - e0).max() < 1e-13 * tnorm
        assert np.abs(c1 - c0).max() < 1e-10 * np.abs(c0).max()
        # orthonormality on the device result: dz chi chi^T = I
        G = np.einsum("ivpz,ivqz->ivpq", c1, c1) * m.dz
        np.testing.assert_allclose(G, np.broadcast_to(np.eye(m.N_sbn), G.shape), atol=1e-12)


@pytest.mark.gpu
def test_cuda_newton_system_matches_sparse_lu(cupy_backend, rng):
    from solver.bsp.kernels import cuda_iter
    m, ic = _coarse_V()
    xp = cupy_backend.xp
    for bc in ("neumann", "dirichlet"):
        sysm = poisson.NewtonSystem(m, bc)
        F = poisson.frechet(m, get_backend("numpy"), ic.eps, ic.chi, ic.rho,
                            poisson.fermi_dirac_drho(m, np, ic.eps))
        rhs = rng.standard_normal((m.NX - 2, m.NZ - 2))
        bvals = sysm.boundary_values(m, 0.3, 0.4).ravel()
        A, b = poisson.construct(m, get_backend("numpy"), sysm, F, rhs, bvals)
        x0 = poisson.solve(m, get_backend("numpy"), sysm, A, b)
        Ad, bd = cuda_iter.construct_linsys(m, cupy_backend, sysm, xp.asarray(F), xp.asarray(rhs), bvals)
        np.testing.assert_allclose(cupy_backend.to_numpy(Ad), A.toarray(), rtol=1e-14, atol=1e-14)
        x1 = cupy_backend.to_numpy(cuda_iter.solve_linsys(m, cupy_backend, sysm, Ad, bd))
        np.testing.assert_allclose(x1, x0, rtol=1e-11, atol=1e-11 * np.abs(x0).max())
        d = sysm.dirichlet_flat
        np.testing.assert_array_equal(x1[d], bvals[d])


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


# ---------------------------------------------------------------------- eigen split: eigenvalues + ipim
# The CUDA source of kernels/cuda_iter.py compiled with g++ for the host behind a stand-in ``cupy``
# (one OS thread per CUDA thread, blocks one after another, __syncthreads = std::barrier,
# __shared__ = static: shared by the threads of the running block), so that the Python wrappers
# (launch shapes, the shared-memory bound) and the kernels run end to end without a GPU.
_EMUL_STUB = r"""
#include <barrier>
#include <thread>
#include <vector>
#include <cmath>
#include <math.h>
#include <cstddef>
struct dim3_ { unsigned x = 0, y = 0, z = 0; };
static thread_local dim3_ threadIdx, blockIdx;
static dim3_ blockDim;
static std::barrier<>* g_bar;
static inline void __syncthreads() { g_bar->arrive_and_wait(); }
#define __global__
#define __shared__ static
#define __restrict__
"""


def _emul_params(src, name):
    import re
    sig = re.search(r"void\s+" + name + r"\s*\(([^)]*)\)", re.sub(r"//[^\n]*", "", src)).group(1)
    out = []
    for p in sig.split(","):
        p = " ".join(p.split())
        pname = re.findall(r"(\w+)$", p)[0]
        out.append((p, pname, "ptr" if "*" in p else ("double" if "double" in p else "int")))
    return out


def _fake_cupy_iter(tmp):
    import ctypes
    import hashlib
    import re
    import subprocess
    import types

    cp = types.ModuleType("cupy")
    for k in ("asarray", "ascontiguousarray", "empty", "float64", "int32"):
        setattr(cp, k, getattr(np, k))
    conv = {"ptr": ctypes.c_void_p, "double": ctypes.c_double, "int": ctypes.c_int}

    class RawModule:
        def __init__(self, code, options=()):
            self.names = re.findall(r"__global__\s+void\s+(\w+)\s*\(", code)
            wr = []
            self.sigs = {}
            for n in self.names:
                ps = _emul_params(code, n)
                self.sigs[n] = ps
                decl = ", ".join(p for p, _, _ in ps)
                call = ", ".join(a for _, a, _ in ps)
                wr.append(f'extern "C" void run_{n}(int gx, int bx, {decl}) {{\n'
                          f"  blockDim.x = bx;\n"
                          f"  for (int g = 0; g < gx; ++g) {{\n"
                          f"    std::barrier<> bar(bx); g_bar = &bar; std::vector<std::thread> th;\n"
                          f"    for (int l = 0; l < bx; ++l) th.emplace_back([=] {{ threadIdx.x = l; blockIdx.x = g; {n}({call}); }});\n"
                          f"    for (auto& t : th) t.join();\n  }}\n}}\n")
            text = _EMUL_STUB + code + "\n" + "\n".join(wr)
            h = hashlib.sha1(text.encode()).hexdigest()[:16]
            cpp, so = tmp / f"k{h}.cpp", tmp / f"k{h}.so"
            if not so.exists():
                cpp.write_text(text)
                r = subprocess.run(["g++", "-std=c++20", "-O1", "-w", "-ffp-contract=off", "-fno-fast-math", "-shared",
                                    "-fPIC", "-pthread", "-o", str(so), str(cpp)], capture_output=True, text=True)
                if r.returncode:
                    if "barrier" in r.stderr and "No such file" in r.stderr:
                        pytest.skip("g++ without <barrier> (C++20)")
                    raise AssertionError(r.stderr[-3000:])
            self.lib = ctypes.CDLL(str(so))

        def get_function(self, name):
            f = getattr(self.lib, "run_" + name)
            ps = self.sigs[name]
            f.argtypes = [ctypes.c_int, ctypes.c_int] + [conv[k] for _, _, k in ps]
            f.restype = None

            def launch(grid, block, args, shared_mem=0):
                assert len(args) == len(ps)
                vals = []
                for a, (_, _, k) in zip(args, ps):
                    if k == "ptr":
                        assert isinstance(a, np.ndarray) and a.flags.c_contiguous and a.dtype == np.float64
                        vals.append(a.ctypes.data)
                    else:
                        assert isinstance(a, np.float64 if k == "double" else np.int32), (k, type(a))
                        vals.append(a.item())
                f(int(grid[0]), int(block[0]), *vals)
            return launch

    class RawKernel:
        def __init__(self, code, name, options=()):
            self.fn = RawModule(code, options).get_function(name)

        def __call__(self, grid, block, args, shared_mem=0):
            self.fn(grid, block, args, shared_mem)

    cp.RawModule, cp.RawKernel = RawModule, RawKernel
    return cp


@pytest.fixture(scope="module")
def emulated_iter(tmp_path_factory, load_with_fake_cupy):
    """cuda_iter loaded against the stand-in cupy (a private module object; sys.modules restored)."""
    import shutil
    from pathlib import Path
    if shutil.which("g++") is None:
        pytest.skip("needs g++ (C++20) to run the CUDA source on the host")
    src = Path(schrodinger.__file__).parent / "kernels" / "cuda_iter.py"
    return load_with_fake_cupy(src, "_cuda_iter_emulated", _fake_cupy_iter(tmp_path_factory.mktemp("cuda_iter_emul")))


@pytest.mark.parametrize("mesh,block", [(("mesh.NX=9", "mesh.NZ=17"), 32),
                                        (("mesh.NX=9", "mesh.NZ=13", "mesh.N_sbn=4"), 32),
                                        (("mesh.NX=11", "mesh.NZ=11", "mesh.N_sbn=5"), 64)])
def test_emulated_eigen_split_equals_fused_bitwise(emulated_iter, mesh, block, rng):
    """eigenvalues + ipim (A and B) equal the fused tri_eigen bit for bit (host build, no FMA
    contraction), on the INITCOND potential and a perturbed one, and match LAPACK; blocks of
    32 (the paper) and 64 threads, N_sbn that do not divide the block (blocks straddle matrices,
    a partial last block)."""
    m = model(*mesh)
    ic = poisson.initcond(m, get_backend("numpy"))
    for V in (np.ascontiguousarray(ic.V), ic.V + 0.3 * rng.standard_normal(ic.V.shape)):
        e0, c0 = emulated_iter.solve_eigen_fused(m, None, V)
        e1, Dg = emulated_iter.eigenvalues(m, V, block=block)
        np.testing.assert_array_equal(e1, e0)
        for variant in ("a", "b"):
            c1 = emulated_iter.ipim(m, e1, Dg, variant=variant, block=block)
            np.testing.assert_array_equal(c1, c0)
        e2, c2 = emulated_iter.solve_eigen(m, None, V)
        np.testing.assert_array_equal(e2, e0)
        np.testing.assert_array_equal(c2, c0)
        el, cl = schrodinger.eigen_host(m, V)
        assert np.abs(e0 - el).max() < 1e-12 * np.abs(el).max()
        assert np.abs(c0 - cl).max() < 1e-9 * np.abs(cl).max()


def test_emulated_eigenvalues_store_the_diagonals(emulated_iter):
    m = model("mesh.NX=9", "mesh.NZ=11")
    V = poisson.initcond(m, get_backend("numpy")).V
    _, Dg = emulated_iter.eigenvalues(m, np.ascontiguousarray(V))
    for nu in range(3):
        kd, _ = schrodinger._kinetic(m, nu)
        np.testing.assert_array_equal(Dg[:, nu], kd[None, :] - V[:, 1:-1] - m.V_c[1:-1][None, :])


def test_ipim_maxm_bounds_the_matrices_of_a_block():
    """ipim_b's shared array holds ipim_maxm(NS, block) matrices: the most a block can touch."""
    import ast
    from pathlib import Path
    src = (Path(schrodinger.__file__).parent / "kernels" / "cuda_iter.py").read_text()
    fn = next(n for n in ast.parse(src).body if isinstance(n, ast.FunctionDef) and n.name == "ipim_maxm")
    ns = {}
    exec(compile(ast.Module([fn], []), "cuda_iter", "exec"), ns)
    for NS in range(1, 9):
        for block in (32, 64, 128):
            span = max((t0 + block - 1) // NS - t0 // NS + 1 for t0 in range(0, 40 * block, block))
            assert span <= ns["ipim_maxm"](NS, block)
            assert ns["ipim_maxm"](NS, block) <= span + 1


@pytest.mark.gpu
@pytest.mark.parametrize("mesh,host_ic", [(("mesh.NX=33", "mesh.NZ=33"), False),   # the coarse mesh
                                          (("mesh.NX=17", "mesh.NZ=65"), False),
                                          (("mesh.NX=17", "mesh.NZ=129"), True)])  # NZ > 127: host INITCOND
def test_cuda_eigen_split_equals_fused_bitwise(cupy_backend, rng, mesh, host_ic):
    """eigenvalues + ipim (kernels A and B, blocks of 32 and 64) and solve_eigen (the hooked fast
    path) equal the fused tri_eigen bit for bit on the device (same operations, same order, same
    FMA contraction), on the INITCOND state and a perturbed potential."""
    from solver.bsp.kernels import cuda_iter
    xp = cupy_backend.xp
    m = model(*mesh)
    ic = poisson.initcond(m, get_backend("numpy") if host_ic else cupy_backend)
    V0 = xp.ascontiguousarray(xp.asarray(ic.V))
    for V in (V0, V0 + 0.3 * xp.asarray(rng.standard_normal(ic.V.shape))):
        e0, c0 = cuda_iter.solve_eigen_fused(m, cupy_backend, V)
        for block in (32, 64):
            e1, Dg = cuda_iter.eigenvalues(m, V, block=block)
            assert bool(xp.array_equal(e1, e0))
            for variant in ("a", "b"):
                c1 = cuda_iter.ipim(m, e1, Dg, variant=variant, block=block)
                assert bool(xp.array_equal(c1, c0)), (block, variant)
        e2, c2 = schrodinger.solve_eigen(m, cupy_backend, V)
        assert bool(xp.array_equal(e2, e0)) and bool(xp.array_equal(c2, c0))
