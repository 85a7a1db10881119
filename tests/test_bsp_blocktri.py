"""The block-tridiagonal form of the Newton system (solver/bsp/blocktri.py) and its CUDA fast path
(solver/bsp/kernels/cuda_blocktri.py) against the reference: the row-equilibrated CSC matrix of
poisson.construct solved by SuperLU (poisson.solve) on the numpy backend."""
import numpy as np
import pytest

from solver.backend import get_backend
from solver.bsp import blocktri, poisson
from solver.bsp.model import Model, load

NP = get_backend("numpy")


def model(*overrides):
    return Model(load(None, list(overrides)))


def _spd_F(rng, nxi, nz, scale=20.0):
    """Random symmetric positive semidefinite Frechet blocks (B^T diag(c) B with c >= 0)."""
    B = rng.standard_normal((nxi, 2 * nz, nz))
    c = rng.uniform(0.0, 1.0, (nxi, 2 * nz))
    return scale * np.einsum("iaj,ia,iak->ijk", B, c, B) / nz


def _problem(m, bc, rng, F=None):
    sysm = poisson.NewtonSystem(m, bc)
    NX, NZ = m.NX, m.NZ
    if F is None:
        F = _spd_F(rng, NX - 2, NZ - 2)
    rhs = rng.standard_normal((NX - 2, NZ - 2))
    bvals = sysm.boundary_values(m, 0.3 + 0.1 * rng.standard_normal(NZ),
                                 0.4 + 0.1 * rng.standard_normal(NZ)).ravel()
    A, b = poisson.construct(m, NP, sysm, F, rhs, bvals)
    x0 = poisson.solve(m, NP, sysm, A, b)
    return sysm, F, rhs, bvals, A, b, x0


def _indefinite_problem(rng):
    """A symmetric indefinite F (POTENTIAL's rho need not be monotone) chosen so that the leading
    3 x 3 minor of block 1 vanishes: elimination with diagonal pivots divides by ~0 at the third
    node.  Returns (m, bs, sysm, F, rhs, bvals, x0 (SuperLU), d0 (the minor before the shift),
    minor3 (the minor with t added to F[0, 1, 1]))."""
    m = model("mesh.NX=11", "mesh.NZ=9")
    nz = m.NZ - 2
    bs = blocktri.BlockSystem(poisson.NewtonSystem(m, "dirichlet"))
    F = _spd_F(rng, m.NX - 2, nz)
    F0 = rng.standard_normal((nz, nz))
    F[0] = F0 + F0.T

    def minor3(t):
        M = bs.D0[1].copy()
        M[1:-1, 1:-1] += bs.cp_dz * F[0]
        M[2, 2] += bs.cp_dz * t
        return np.linalg.det(M[:3, :3])

    d0 = minor3(0.0)
    F[0, 1, 1] += -d0 / (minor3(1.0) - d0)  # det is linear in t
    sysm, F, rhs, bvals, A, b, x0 = _problem(m, "dirichlet", rng, F=F)
    return m, bs, sysm, F, rhs, bvals, x0, d0, minor3


MESHES = [("mesh.NX=13", "mesh.NZ=11"), ("mesh.NX=9", "mesh.NZ=17", "device.gate_start_nm=6", "device.gate_end_nm=14")]


@pytest.mark.parametrize("mesh", MESHES)
@pytest.mark.parametrize("bc", ["neumann", "dirichlet"])
def test_block_form_equals_csc_matrix(mesh, bc, rng):
    m = model(*mesh)
    sysm, F, rhs, bvals, A, b, _ = _problem(m, bc, rng)
    bs = blocktri.BlockSystem(sysm)
    D, lo, up, bb = blocktri.construct(np, bs, F, rhs, bvals)
    NX, NZ = m.NX, m.NZ
    dense = np.zeros((NX, NZ, NX, NZ))
    ii = np.arange(NX)
    dense[ii, :, ii, :] = D
    jj = np.arange(NZ)
    dense[ii[1:, None], jj, ii[:-1, None], jj] = lo[1:]
    dense[ii[:-1, None], jj, ii[1:, None], jj] = up[:-1]
    assert not lo[0].any() and not up[-1].any()
    np.testing.assert_allclose(dense.reshape(A.shape), A.toarray(), rtol=1e-15, atol=1e-15)
    np.testing.assert_allclose(bb.ravel(), b, rtol=1e-15, atol=1e-15)


@pytest.mark.parametrize("mesh", MESHES)
@pytest.mark.parametrize("bc", ["neumann", "dirichlet"])
def test_block_thomas_matches_sparse_lu(mesh, bc, rng):
    m = model(*mesh)
    sysm, F, rhs, bvals, A, b, x0 = _problem(m, bc, rng)
    bs = blocktri.BlockSystem(sysm)
    D, lo, up, bb = blocktri.construct(np, bs, F, rhs, bvals)
    x = blocktri.solve(np, D, lo, up, bb, bs.dirichlet).ravel()
    assert np.abs(x - x0).max() <= 1e-12 * np.abs(x0).max()
    d = sysm.dirichlet_flat
    np.testing.assert_array_equal(x[d], bvals[d])
    # the residual of the reference matrix, too
    assert np.abs(A @ x - b).max() <= 1e-12 * np.abs(b).max()
    # the kernel's algorithm (exchange Gauss-Jordan, implicit pivoting)
    xe = blocktri.solve_exchange(D, lo, up, bb).ravel()
    assert np.abs(xe - x0).max() <= 1e-12 * np.abs(x0).max()


@pytest.mark.parametrize("mesh", MESHES + [("mesh.NX=33", "mesh.NZ=9"), ("mesh.NX=16", "mesh.NZ=9")])
@pytest.mark.parametrize("bc", ["neumann", "dirichlet"])
def test_cyclic_reduction_matches_sparse_lu(mesh, bc, rng):
    m = model(*mesh)
    sysm, F, rhs, bvals, A, b, x0 = _problem(m, bc, rng)
    bs = blocktri.BlockSystem(sysm)
    D, lo, up, bb = blocktri.construct(np, bs, F, rhs, bvals)
    x = blocktri.solve_cr(D, lo, up, bb, bs.dirichlet).ravel()
    assert np.abs(x - x0).max() <= 1e-12 * np.abs(x0).max()
    d = sysm.dirichlet_flat
    np.testing.assert_array_equal(x[d], bvals[d])
    assert np.abs(A @ x - b).max() <= 1e-12 * np.abs(b).max()


def test_cr_levels_cover_every_column_once():
    for NX in (9, 10, 16, 17, 33, 64, 65, 100):
        seen = []
        for h, first, step, n_elim, n_kept in blocktri.cr_levels(NX):
            el = [first + step * m for m in range(n_elim)]
            kept = [2 * h * m for m in range(n_kept)]
            assert max(el) < NX and max(kept) < NX and first + step * n_elim >= NX and 2 * h * n_kept >= NX
            assert not set(el) & set(kept) and not set(el) & set(seen)
            seen += el
        assert sorted(seen + [0]) == list(range(NX))


def test_block_thomas_indefinite_frechet_needs_pivoting(rng):
    """A symmetric indefinite F (POTENTIAL's rho need not be monotone) chosen so that the leading
    3 x 3 minor of block 1 vanishes: elimination with diagonal pivots divides by ~0 at the third
    node; the pivoting solvers (LAPACK in ``solve``, the kernel's exchange steps) still agree
    with SuperLU."""
    m, bs, sysm, F, rhs, bvals, x0, d0, minor3 = _indefinite_problem(rng)
    assert abs(minor3(0.0)) < 1e-10 * abs(d0)
    D, lo, up, bb = blocktri.construct(np, bs, F, rhs, bvals)
    scale = np.abs(x0).max()
    x = blocktri.solve(np, D, lo, up, bb, bs.dirichlet).ravel()
    xe = blocktri.solve_exchange(D, lo, up, bb).ravel()
    xc = blocktri.solve_cr(D, lo, up, bb, bs.dirichlet).ravel()
    assert np.abs(x - x0).max() <= 1e-10 * scale
    assert np.abs(xe - x0).max() <= 1e-10 * scale
    assert np.abs(xc - x0).max() <= 1e-10 * scale
    with np.errstate(all="ignore"):
        xn = blocktri.solve_exchange(D, lo, up, bb, pivot=False).ravel()
    assert not np.abs(xn - x0).max() <= 1e-6 * scale  # what the pivoting is for


def test_exchange_inverse_bookkeeping(rng):
    S = rng.standard_normal((7, 7))
    r = rng.standard_normal(7)
    Sinv, z = blocktri.exchange_inverse(S, r)
    np.testing.assert_allclose(Sinv @ S, np.eye(7), atol=1e-12)
    np.testing.assert_allclose(S @ z, r, atol=1e-12)


def test_block_structure_check_rejects_other_couplings():
    m = model("mesh.NX=9", "mesh.NZ=9")
    # move one x-coupling to a different z-node: the check must see it
    bad = poisson.NewtonSystem(m, "dirichlet")
    rows = bad.all_rows.copy()
    k = int(np.flatnonzero(bad.vals_static < 0)[0])  # an off-diagonal Laplacian entry
    ucols = np.repeat(np.arange(bad.n), np.diff(bad.indptr))
    col = ucols[bad.inverse[k]]
    if abs(col - rows[k]) == m.NZ:  # x-neighbour: shift the row by one z-node
        rows[k] += 1
    else:  # z-neighbour: move it two columns away
        rows[k] += 2 * m.NZ
    bad.all_rows = rows
    with pytest.raises(ValueError, match="not block tridiagonal"):
        blocktri.BlockSystem(bad)


# ---------------------------------------------------------------------- the CUDA source on the host
# The kernels of kernels/cuda_blocktri.py compiled with g++ for the host: the single-block solve
# runs with one OS thread per CUDA thread, __syncthreads as a std::barrier and __shfl_xor_sync
# through a per-warp buffer, so the index bookkeeping, the pivot search and the barriers are
# checked without a GPU.
_STUB = r"""
#include <barrier>
#include <thread>
#include <cmath>
#include <vector>
#include <cstddef>
struct dim3_ { unsigned x = 0, y = 0, z = 0; };
static thread_local dim3_ threadIdx, blockIdx;
static dim3_ blockDim;
#define __global__
#define __shared__ static
#define __launch_bounds__(x)
#define __restrict__
static std::barrier<>* g_bar;
#include <cstring>
struct WarpX { std::barrier<>* bar; double dv[32]; int iv[32]; unsigned uv[32]; };
static WarpX* g_warps;
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

_HARNESS = r"""
extern "C" void run_solve(const double* D, const double* lo, const double* up, const double* b,
    const unsigned char* dir, int NX, double* G, double* z, double* x) {
  int nthr = NWARPS * 32;
  blockDim.x = nthr;
  std::barrier<> bar(nthr); g_bar = &bar;
  std::vector<WarpX> warps(NWARPS);
  for (auto& w : warps) w.bar = new std::barrier<>(32);
  g_warps = warps.data();
  std::vector<std::thread> th;
  for (int t = 0; t < nthr; ++t) th.emplace_back([=] { threadIdx.x = t; blocktri_solve(D, lo, up, b, dir, NX, G, z, x); });
  for (auto& t : th) t.join();
  for (auto& w : warps) delete w.bar;
}
extern "C" void run_frechet(const double* eps, const double* chi, const double* rho, const double* drho,
    int has, int nx, int nz_, int ns, double* F) {
  long long total = (long long)(nx - 2) * (nz_ - 2) * (nz_ - 2); blockDim.x = 256;
  for (long long t = 0; t < total; ++t) { blockIdx.x = t / 256; threadIdx.x = t % 256;
     frechet_kernel(eps, chi, rho, drho, has, nx, nz_, ns, F); }
}
extern "C" void run_construct(const double* D0, const double* lo0, const double* up0, const double* F,
    const double* rhs, const double* bflat, double cpdz, int nx, int nz_, double* D, double* lo, double* up, double* b) {
  long long total = (long long)nx * nz_ * nz_; blockDim.x = 256;
  for (long long t = 0; t < total; ++t) { blockIdx.x = t / 256; threadIdx.x = t % 256;
     construct_kernel(D0, lo0, up0, F, rhs, bflat, cpdz, nx, nz_, D, lo, up, b); }
}
"""

_CR_HARNESS = r"""
template <class Fn> static void run_block(int nthr, int bk, Fn fn) {
  blockDim.x = nthr;
  std::barrier<> bar(nthr); g_bar = &bar;
  std::vector<WarpX> warps((nthr + 31) / 32);
  for (auto& w : warps) w.bar = new std::barrier<>(32);
  g_warps = warps.data();
  std::vector<std::thread> th;
  for (int t = 0; t < nthr; ++t) th.emplace_back([=] { threadIdx.x = t; blockIdx.x = bk; fn(); });
  for (auto& t : th) t.join();
  for (auto& w : warps) delete w.bar;
}
extern "C" void run_cr_eliminate(const double* D, const double* lo, const double* up, const double* b,
    const double* Bw, const double* Aw, const double* Cw, const double* rw, int lvl0, int NX, int h, int first,
    int step, int nblocks, double* XA, double* XC, double* Xr) {
  for (int bk = 0; bk < nblocks; ++bk)
    run_block(NWARPS * 32, bk, [=] { cr_eliminate(D, lo, up, b, Bw, Aw, Cw, rw, lvl0, NX, h, first, step, XA, XC, Xr); });
}
extern "C" void run_cr_update(const double* D, const double* lo, const double* up, const double* b,
    double* Bw, const double* As, const double* Cs, double* rw, const double* XA, const double* XC,
    const double* Xr, int lvl0, int NX, int h, int nkept, double* Ad, double* Cd) {
  long long total = (long long)nkept * NZ * NZ; blockDim.x = 256;
  for (long long t = 0; t < total; ++t) { blockIdx.x = t / 256; threadIdx.x = t % 256;
     cr_update(D, lo, up, b, Bw, As, Cs, rw, XA, XC, Xr, lvl0, NX, h, nkept, Ad, Cd); }
}
extern "C" void run_cr_backsub(const double* XA, const double* XC, const double* Xr, const double* b,
    const unsigned char* dir, int NX, int htop, double* x) {
  run_block(256, 0, [=] { cr_backsub(XA, XC, Xr, b, dir, NX, htop, x); });
}
extern "C" void run_newton_rhs(const double* F, const double* V, const double* N, const double* ND, double cp,
    double cpdz, int NX, int NZ_, double* rhs) {
  long long total = (long long)(NX - 2) * (NZ_ - 2); blockDim.x = 128;
  for (long long t = 0; t < total; ++t) { blockIdx.x = t / 128; threadIdx.x = t % 128;
     newton_rhs(F, V, N, ND, cp, cpdz, NX, NZ_, rhs); }
}
extern "C" void run_newton_norms(const double* Vn, const double* Vo, const double* Nn, const double* No,
    const double* x, int n, double* out) {
  run_block(NT, 0, [=] { newton_norms(Vn, Vo, Nn, No, x, n, out); });
}
"""


def _cuda_sources():
    """(_FRECHET_SRC, _SOLVE_SRC) of cuda_blocktri.py without importing CuPy."""
    import ast
    from pathlib import Path
    path = Path(blocktri.__file__).parent / "kernels" / "cuda_blocktri.py"
    out = {}
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "").endswith("_SRC"):
            out[node.targets[0].id] = node.value.value
    return out["_FRECHET_SRC"], out["_SOLVE_SRC"], out["_CR_SRC"], out["_GLUE_SRC"]


@pytest.fixture(scope="module")
def emulated(tmp_path_factory):
    import ctypes
    import shutil
    import subprocess
    if shutil.which("g++") is None:
        pytest.skip("needs g++ (C++20) to run the CUDA source on the host")
    tmp = tmp_path_factory.mktemp("blocktri_emul")
    fre, sol, crs, glue = _cuda_sources()
    libs = {}

    def get(NZ, cr=False):
        if (NZ, cr) not in libs:
            cpp, so = tmp / f"emul{NZ}{'cr' if cr else ''}.cpp", tmp / f"emul{NZ}{'cr' if cr else ''}.so"
            if cr:
                cpp.write_text(_STUB + "using std::isfinite;\n" + crs.format(nz=NZ, nwarps=min(32, NZ)) + glue
                               + _CR_HARNESS)
            else:
                cpp.write_text(_STUB + fre + sol.format(nz=NZ, nwarps=min(32, NZ)) + _HARNESS)
            r = subprocess.run(["g++", "-std=c++20", "-O1", "-w", "-ffp-contract=off", "-shared", "-fPIC",
                                "-pthread", "-o", str(so), str(cpp)], capture_output=True, text=True)
            if r.returncode:
                if "barrier" in r.stderr and "No such file" in r.stderr:
                    pytest.skip("g++ without <barrier> (C++20)")
                raise AssertionError(r.stderr[-3000:])
            libs[NZ, cr] = ctypes.CDLL(str(so))
        return libs[NZ, cr]
    return get


def _p(a):
    import ctypes
    assert a.flags.c_contiguous
    return a.ctypes.data_as(ctypes.c_void_p)


def _emul_solve(lib, D, lo, up, b, dirm):
    NX, NZ = b.shape
    G, z, x = np.empty((NX, NZ, NZ)), np.empty((NX, NZ)), np.full(NX * NZ, np.nan)
    args = [np.ascontiguousarray(a) for a in (D, lo, up, b)] + [np.ascontiguousarray(dirm.astype(np.uint8))]
    lib.run_solve(*map(_p, args), NX, _p(G), _p(z), _p(x))
    return x


@pytest.mark.parametrize("mesh", [("mesh.NX=13", "mesh.NZ=11"), ("mesh.NX=10", "mesh.NZ=9")])
@pytest.mark.parametrize("bc", ["neumann", "dirichlet"])
def test_emulated_cuda_construct_and_solve(emulated, mesh, bc, rng):
    import ctypes
    m = model(*mesh)
    NX, NZ = m.NX, m.NZ
    lib = emulated(NZ)
    sysm, F, rhs, bvals, A, b, x0 = _problem(m, bc, rng)
    bs = blocktri.BlockSystem(sysm)
    ref = blocktri.construct(np, bs, F, rhs, bvals)
    out = [np.empty((NX, NZ, NZ)), np.empty((NX, NZ)), np.empty((NX, NZ)), np.empty((NX, NZ))]
    ins = [np.ascontiguousarray(a, dtype=float) for a in (bs.D0, bs.lo0, bs.up0, F, rhs, bvals)]
    lib.run_construct(*map(_p, ins), ctypes.c_double(sysm.cp_dz), NX, NZ, *map(_p, out))
    for o, r in zip(out, ref):
        np.testing.assert_allclose(o, r, rtol=1e-15, atol=1e-15 * np.abs(r).max())
    x = _emul_solve(lib, *out, bs.dirichlet)
    assert np.abs(x - x0).max() <= 1e-12 * np.abs(x0).max()
    d = sysm.dirichlet_flat
    np.testing.assert_array_equal(x[d], bvals[d])


def test_emulated_cuda_solve_pivots(emulated, rng):
    """The indefinite case of test_block_thomas_indefinite_frechet_needs_pivoting on the kernel."""
    m, bs, sysm, F, rhs, bvals, x0, _, _ = _indefinite_problem(rng)
    D, lo, up, bb = blocktri.construct(np, bs, F, rhs, bvals)
    x = _emul_solve(emulated(m.NZ), D, lo, up, bb, bs.dirichlet)
    assert np.abs(x - x0).max() <= 1e-10 * np.abs(x0).max()


def _random_eigen(m, rng):
    NX, NZ, NS = m.NX, m.NZ, m.N_sbn
    eps = rng.standard_normal((NX, 3, NS)).cumsum(axis=2) + 0.1 * np.arange(NS)
    chi = rng.standard_normal((NX, 3, NS, NZ))
    chi[..., 0] = chi[..., -1] = 0.0
    rho = np.exp(-eps) * rng.uniform(0.5, 1.5, eps.shape)  # not monotone in eps: indefinite pairs
    return eps, chi, rho


@pytest.mark.parametrize("with_drho", [True, False])
def test_emulated_cuda_frechet(emulated, with_drho, rng):
    m = model("mesh.NX=10", "mesh.NZ=11")
    eps, chi, rho = _random_eigen(m, rng)
    drho = 0.7 * rho if with_drho else None
    F0 = poisson.frechet(m, NP, eps, chi, rho, drho)
    F1 = np.empty_like(F0)
    lib = emulated(m.NZ)
    lib.run_frechet(_p(eps), _p(chi), _p(rho), _p(drho if with_drho else rho), int(with_drho),
                    m.NX, m.NZ, m.N_sbn, _p(F1))
    np.testing.assert_allclose(F1, F0, rtol=1e-12, atol=1e-13 * np.abs(F0).max())


def _emul_cr(lib, D, lo, up, b, dirm):
    """The driver of cuda_blocktri.solve_linsys_cr with the emulated kernels."""
    NX, NZ = b.shape
    D, lo, up, b = (np.ascontiguousarray(a, dtype=float) for a in (D, lo, up, b))
    blk = lambda: np.full((NX, NZ, NZ), np.nan)  # noqa: E731
    Bw, rw, XA, XC, Xr = blk(), np.full((NX, NZ), np.nan), blk(), blk(), np.full((NX, NZ), np.nan)
    Aw, Cw = (blk(), blk()), (blk(), blk())
    src, htop = 0, 0
    for lvl, (h, first, step, n_elim, n_kept) in enumerate(blocktri.cr_levels(NX)):
        lib.run_cr_eliminate(_p(D), _p(lo), _p(up), _p(b), _p(Bw), _p(Aw[src]), _p(Cw[src]), _p(rw),
                             int(lvl == 0), NX, h, first, step, n_elim, _p(XA), _p(XC), _p(Xr))
        lib.run_cr_update(_p(D), _p(lo), _p(up), _p(b), _p(Bw), _p(Aw[src]), _p(Cw[src]), _p(rw), _p(XA), _p(XC),
                          _p(Xr), int(lvl == 0), NX, h, n_kept, _p(Aw[1 - src]), _p(Cw[1 - src]))
        src, htop = 1 - src, h
    lib.run_cr_eliminate(_p(D), _p(lo), _p(up), _p(b), _p(Bw), _p(Aw[src]), _p(Cw[src]), _p(rw),
                         int(NX == 1), NX, NX, 0, 0, 1, _p(XA), _p(XC), _p(Xr))
    x = np.full(NX * NZ, np.nan)
    dm = np.ascontiguousarray(dirm.astype(np.uint8))
    lib.run_cr_backsub(_p(XA), _p(XC), _p(Xr), _p(b), _p(dm), NX, htop, _p(x))
    return x


@pytest.mark.parametrize("mesh", [("mesh.NX=13", "mesh.NZ=11"), ("mesh.NX=16", "mesh.NZ=9")])
@pytest.mark.parametrize("bc", ["neumann", "dirichlet"])
def test_emulated_cuda_cyclic_reduction(emulated, mesh, bc, rng):
    m = model(*mesh)
    sysm, F, rhs, bvals, A, b, x0 = _problem(m, bc, rng)
    bs = blocktri.BlockSystem(sysm)
    D, lo, up, bb = blocktri.construct(np, bs, F, rhs, bvals)
    x = _emul_cr(emulated(m.NZ, cr=True), D, lo, up, bb, bs.dirichlet)
    assert np.abs(x - x0).max() <= 1e-12 * np.abs(x0).max()
    d = sysm.dirichlet_flat
    np.testing.assert_array_equal(x[d], bvals[d])


def test_emulated_cuda_cyclic_reduction_pivots(emulated, rng):
    """The indefinite F of test_block_thomas_indefinite_frechet_needs_pivoting on the CR kernels."""
    m, bs, sysm, F, rhs, bvals, x0, _, _ = _indefinite_problem(rng)
    D, lo, up, bb = blocktri.construct(np, bs, F, rhs, bvals)
    x = _emul_cr(emulated(m.NZ, cr=True), D, lo, up, bb, bs.dirichlet)
    assert np.abs(x - x0).max() <= 1e-10 * np.abs(x0).max()


def test_emulated_cuda_newton_glue(emulated, rng):
    """newton_rhs and newton_norms (the fused Newton glue) against poisson's array expressions."""
    import math
    m = model("mesh.NX=10", "mesh.NZ=11")
    NX, NZ = m.NX, m.NZ
    lib = emulated(NZ, cr=True)
    F = rng.standard_normal((NX - 2, NZ - 2, NZ - 2))
    V, N, ND = (rng.standard_normal((NX, NZ)) for _ in range(3))
    cpdz = m.cp * m.dz
    ref = -m.cp * (N[1:-1, 1:-1] - ND[1:-1, 1:-1]) + cpdz * np.einsum("ijk,ik->ij", F, V[1:-1, 1:-1])
    out = np.full((NX - 2, NZ - 2), np.nan)
    lib.run_newton_rhs(_p(F), _p(V), _p(N), _p(ND), ctypes_double(m.cp), ctypes_double(cpdz), NX, NZ, _p(out))
    np.testing.assert_allclose(out, ref, rtol=1e-13, atol=1e-14 * np.abs(ref).max())
    Vn, Nn = V + 1e-3 * rng.standard_normal(V.shape), N + 1e-2 * rng.standard_normal(N.shape)
    x = Vn.ravel().copy()
    want = poisson._norms(np, m, Vn, V, Nn, N)
    res = np.full(5, np.nan)
    lib.run_newton_norms(_p(Vn), _p(V), _p(Nn), _p(N), _p(x), NX * NZ, _p(res))
    w = math.sqrt(m.dx * m.dz)
    got = [res[0], w * math.sqrt(res[1]), res[2], w * math.sqrt(res[3])]
    np.testing.assert_allclose(got, [want[k] for k in poisson.NORM_KEYS], rtol=1e-13)
    assert res[4] == 1.0
    x[7] = np.nan
    Vn[3, 4] = np.nan
    lib.run_newton_norms(_p(Vn), _p(V), _p(Nn), _p(N), _p(x), NX * NZ, _p(res))
    assert res[4] == 0.0 and np.isnan(res[0]) and np.isnan(res[1])


def ctypes_double(v):
    import ctypes
    return ctypes.c_double(v)


# ---------------------------------------------------------------------- on the GPU
GPU_MESHES = [("mesh.NX=13", "mesh.NZ=11"), ("mesh.NX=17", "mesh.NZ=33"), ("mesh.NX=9", "mesh.NZ=65")]


@pytest.mark.gpu
@pytest.mark.parametrize("mesh", GPU_MESHES)
@pytest.mark.parametrize("bc", ["neumann", "dirichlet"])
def test_cuda_block_system_matches_sparse_lu(cupy_backend, mesh, bc, rng):
    from solver.bsp.kernels import cuda_blocktri
    xp = cupy_backend.xp
    m = model(*mesh)
    sysm, F, rhs, bvals, A, b, x0 = _problem(m, bc, rng)
    bs = blocktri.BlockSystem(sysm)
    ref = blocktri.construct(np, bs, F, rhs, bvals)
    (Dd, lod, upd), bd = cuda_blocktri.construct_linsys(m, cupy_backend, sysm, xp.asarray(F), xp.asarray(rhs), bvals)
    for o, r in zip((Dd, lod, upd, bd), ref):
        o = cupy_backend.to_numpy(o)
        np.testing.assert_allclose(o, r, rtol=1e-15, atol=1e-15 * np.abs(r).max())
    x = cupy_backend.to_numpy(cuda_blocktri.solve_linsys(m, cupy_backend, sysm, (Dd, lod, upd), bd))
    assert np.abs(x - x0).max() <= 1e-11 * np.abs(x0).max()
    d = sysm.dirichlet_flat
    np.testing.assert_array_equal(x[d], bvals[d])
    for name, fn in cuda_blocktri.SOLVERS.items():  # both solvers (cyclic reduction, single-block Thomas)
        xs = cupy_backend.to_numpy(fn(m, cupy_backend, sysm, (Dd, lod, upd), bd))
        assert np.abs(xs - x0).max() <= 1e-11 * np.abs(x0).max(), name
        np.testing.assert_array_equal(xs[d], bvals[d])
    for nw in (4, 8, 16):
        xs = cupy_backend.to_numpy(cuda_blocktri.solve_linsys_cr(m, cupy_backend, sysm, (Dd, lod, upd), bd, nwarps=nw))
        assert np.abs(xs - x0).max() <= 1e-11 * np.abs(x0).max(), nw
    # through the hooks of poisson.construct / poisson.solve (numerics.kernels = auto)
    A2, b2 = poisson.construct(m, cupy_backend, sysm, xp.asarray(F), xp.asarray(rhs), bvals)
    x2 = cupy_backend.to_numpy(poisson.solve(m, cupy_backend, sysm, A2, b2))
    np.testing.assert_array_equal(x2, x)


@pytest.mark.gpu
def test_cuda_block_solve_pivots(cupy_backend, rng):
    from solver.bsp.kernels import cuda_blocktri
    xp = cupy_backend.xp
    m, bs, sysm, F, rhs, bvals, x0, _, _ = _indefinite_problem(rng)
    Ad, bd = cuda_blocktri.construct_linsys(m, cupy_backend, sysm, xp.asarray(F), xp.asarray(rhs), bvals)
    for name, fn in cuda_blocktri.SOLVERS.items():
        x = cupy_backend.to_numpy(fn(m, cupy_backend, sysm, Ad, bd))
        assert np.abs(x - x0).max() <= 1e-10 * np.abs(x0).max(), name


@pytest.mark.gpu
@pytest.mark.parametrize("mesh", [("mesh.NX=10", "mesh.NZ=11"), ("mesh.NX=33", "mesh.NZ=33"), ("mesh.NX=9", "mesh.NZ=65")])
@pytest.mark.parametrize("with_drho", [True, False])
def test_cuda_frechet_matches_reference(cupy_backend, mesh, with_drho, rng):
    from solver.bsp.kernels import cuda_blocktri
    xp = cupy_backend.xp
    m = model(*mesh)
    eps, chi, rho = _random_eigen(m, rng)
    drho = 0.7 * rho if with_drho else None
    F0 = poisson.frechet(m, NP, eps, chi, rho, drho)
    args = [xp.asarray(a) for a in (eps, chi, rho)] + [None if drho is None else xp.asarray(drho)]
    F1 = cupy_backend.to_numpy(cuda_blocktri.frechet(m, cupy_backend, *args))
    np.testing.assert_allclose(F1, F0, rtol=1e-12, atol=1e-13 * np.abs(F0).max())
    F2 = cupy_backend.to_numpy(poisson.frechet(m, cupy_backend, *args))  # through the hook
    np.testing.assert_array_equal(F2, F1)


@pytest.mark.gpu
def test_cuda_fast_paths_are_the_block_versions(cupy_backend):
    from solver.bsp import kernels
    from solver.bsp.kernels import cuda_blocktri, cuda_iter
    m = model("mesh.NX=13", "mesh.NZ=11")
    for name in ("construct_linsys", "solve_linsys", "frechet", "newton_rhs", "newton_norms"):
        assert kernels.lookup(m, cupy_backend, name) is getattr(cuda_blocktri, name)
    assert kernels.lookup(m, cupy_backend, "solve_eigen") is cuda_iter.solve_eigen
    assert callable(cuda_iter.construct_linsys) and callable(cuda_iter.solve_linsys)  # the dense baseline


@pytest.mark.gpu
@pytest.mark.parametrize("mesh", [("mesh.NX=13", "mesh.NZ=11"), ("mesh.NX=33", "mesh.NZ=33")])
def test_cuda_newton_glue_matches_reference(cupy_backend, mesh, rng):
    from solver.bsp.kernels import cuda_blocktri
    xp = cupy_backend.xp
    m = model(*mesh)
    NX, NZ = m.NX, m.NZ
    sysm = poisson.NewtonSystem(m, "dirichlet")
    F = rng.standard_normal((NX - 2, NZ - 2, NZ - 2))
    V, N, ND = (rng.standard_normal((NX, NZ)) for _ in range(3))
    ref = -m.cp * (N[1:-1, 1:-1] - ND[1:-1, 1:-1]) + sysm.cp_dz * np.einsum("ijk,ik->ij", F, V[1:-1, 1:-1])
    got = cupy_backend.to_numpy(cuda_blocktri.newton_rhs(m, cupy_backend, sysm, *(xp.asarray(a) for a in (F, V, N, ND))))
    np.testing.assert_allclose(got, ref, rtol=1e-13, atol=1e-14 * np.abs(ref).max())
    Vn, Nn = V + 1e-3 * rng.standard_normal(V.shape), N + 1e-2 * rng.standard_normal(N.shape)
    want = poisson._norms(np, m, Vn, V, Nn, N)
    nrm, fin = cuda_blocktri.newton_norms(m, cupy_backend, *(xp.asarray(a) for a in (Vn, V, Nn, N, Vn.ravel())))
    assert fin and list(nrm) == list(poisson.NORM_KEYS)
    np.testing.assert_allclose([nrm[k] for k in poisson.NORM_KEYS], [want[k] for k in poisson.NORM_KEYS], rtol=1e-13)
    x = Vn.ravel().copy()
    x[5] = np.inf
    _, fin = cuda_blocktri.newton_norms(m, cupy_backend, *(xp.asarray(a) for a in (Vn, V, Nn, N, x)))
    assert not fin


@pytest.mark.gpu
def test_gpu_run_auto_vs_array(cupy_backend):
    """A few whole time steps with every fast path (numerics.kernels = auto) against the array code."""
    from solver.bsp.simulation import Simulation
    states = {}
    for mode in ("array", "auto"):
        cfg = load(None, ["mesh.N_sbn=3", "mesh.NX=17", "mesh.NZ=17", "mesh.NW=40", "mesh.NPHI=12",
                          "output.progress=false", "numerics.backend=cupy", f"numerics.kernels={mode}",
                          "time.steps=5", "time.t_end_ps=null"])
        sim = Simulation(cfg, cupy_backend, None, progress=False)
        sim.run(resume=False)
        assert sim.state.step == 5
        states[mode] = {k: cupy_backend.to_numpy(getattr(sim.state, k)) for k in ("Phi", "V", "eps", "rho")}
    for k in ("Phi", "V", "eps", "rho"):
        a, f = states["array"][k], states["auto"][k]
        r = np.abs(f - a).max() / np.abs(a).max()
        print(f"5 steps auto vs array: {k} max rel diff {r:.3e}")
        assert r <= 1e-10, (k, r)


def test_newton_system_above_the_kernel_limit_uses_the_dense_fast_path(monkeypatch, load_with_fake_cupy):
    """NZ > MAX_NZ (paper 001 runs NZ = 129): construct_linsys and solve_linsys of cuda_blocktri
    hand over to cuda_iter's dense system instead of failing (checked on the CPU behind a stand-in
    cupy; the dense path itself is covered by the gpu tests of test_bsp_kernels_iter.py)."""
    import types
    from pathlib import Path

    src = Path(blocktri.__file__).parent / "kernels" / "cuda_blocktri.py"
    cb = load_with_fake_cupy(src, "_cuda_blocktri_stub", types.ModuleType("cupy"))
    calls = []
    dense = types.SimpleNamespace(construct_linsys=lambda *a: calls.append("construct") or ("A", "b"),
                                  solve_linsys=lambda *a: calls.append("solve") or "x")
    monkeypatch.setattr(cb, "_dense", lambda: dense)
    monkeypatch.setitem(cb.SOLVERS, cb.SOLVE, lambda *a: calls.append("block") or "xb")
    big = types.SimpleNamespace(NX=65, NZ=cb.MAX_NZ + 2)
    assert cb.construct_linsys(None, None, big, None, None, None) == ("A", "b")
    assert cb.solve_linsys(None, None, big, "A", "b") == "x"
    assert cb.solve_linsys(None, None, types.SimpleNamespace(NX=65, NZ=cb.MAX_NZ), "A", "b") == "xb"
    assert calls == ["construct", "solve", "block"]
