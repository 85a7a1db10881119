"""CUDA fast paths of the Newton system (solver/bsp/kernels/cuda/newton.py + newton.cu +
cyclic_reduction.cu) against the reference: the row-equilibrated CSC matrix of
poisson.construct_linsys solved by SuperLU (poisson.solve_linsys) on the numpy backend.

CPU tests: the .cu sources compiled with g++ behind a stand-in ``cupy`` (conftest
``emulated_cuda``; the synchronising kernels run one OS thread per CUDA thread, __syncthreads as a
std::barrier and the warp intrinsics through a per-warp buffer), so the Python launchers, the index
bookkeeping, the pivot search and the barriers are checked without a GPU.  GPU tests (marked
``gpu``) on the device.
"""
import math
import types

import numpy as np
import pytest

from solver.backend import get_backend
from solver.bsp import blocktri, poisson, schrodinger

NP = get_backend("numpy")


@pytest.mark.parametrize("mesh", [("mesh.NX=13", "mesh.NZ=11"), ("mesh.NX=10", "mesh.NZ=9")])
@pytest.mark.parametrize("bc", ["neumann", "dirichlet"])
def test_emulated_cuda_construct_and_solve(emulated_cuda, newton_cases, fake_graph_capture, mesh, bc, rng):
    """construct_linsys and the default (auto) solve: GaussJordanCR, its CUDA graph stood in."""
    cn = emulated_cuda.newton
    m = newton_cases.model(*mesh)
    sysm, F, rhs, bvals, A, b, x0 = newton_cases.problem(m, bc, rng)
    bs = blocktri.BlockSystem(sysm)
    ref = blocktri.construct(np, bs, F, rhs, bvals)
    (D, lo, up), bb = cn.construct_linsys(m, NP, sysm, F, rhs, bvals)
    for o, r in zip((D, lo, up, bb), ref):
        np.testing.assert_allclose(o, r, rtol=1e-15, atol=1e-15 * np.abs(r).max())
    x = cn.solve_linsys(m, NP, sysm, (D, lo, up), bb)
    assert np.abs(x - x0).max() <= 1e-12 * np.abs(x0).max()
    d = sysm.dirichlet_flat
    np.testing.assert_array_equal(x[d], bvals[d])


@pytest.mark.parametrize("mesh", [("mesh.NX=13", "mesh.NZ=11"), ("mesh.NX=16", "mesh.NZ=9")])
@pytest.mark.parametrize("bc", ["neumann", "dirichlet"])
def test_emulated_cuda_cyclic_reduction(emulated_cuda, newton_cases, mesh, bc, rng):
    m = newton_cases.model(*mesh)
    sysm, F, rhs, bvals, A, b, x0 = newton_cases.problem(m, bc, rng)
    bs = blocktri.BlockSystem(sysm)
    D, lo, up, bb = blocktri.construct(np, bs, F, rhs, bvals)
    for nw in (None, 4):
        x = emulated_cuda.newton.solve_linsys_cr(m, NP, sysm, (D, lo, up), bb, nwarps=nw)
        assert np.abs(x - x0).max() <= 1e-12 * np.abs(x0).max(), nw
        d = sysm.dirichlet_flat
        np.testing.assert_array_equal(x[d], bvals[d])


def test_emulated_cuda_cyclic_reduction_pivots(emulated_cuda, newton_cases, rng):
    """The indefinite F of test_bsp_blocktri's pivoting test on the CR kernels."""
    m, bs, sysm, F, rhs, bvals, x0, _, _ = newton_cases.indefinite(rng)
    D, lo, up, bb = blocktri.construct(np, bs, F, rhs, bvals)
    x = emulated_cuda.newton.solve_linsys_cr(m, NP, sysm, (D, lo, up), bb)
    assert np.abs(x - x0).max() <= 1e-10 * np.abs(x0).max()


def test_emulated_cuda_newton_glue(emulated_cuda, newton_cases, rng):
    """newton_rhs and newton_norms (the fused Newton glue) against poisson's array expressions."""
    cn = emulated_cuda.newton
    m = newton_cases.model("mesh.NX=10", "mesh.NZ=11")
    NX, NZ = m.NX, m.NZ
    sysm = poisson.NewtonSystem(m, "dirichlet")
    F = rng.standard_normal((NX - 2, NZ - 2, NZ - 2))
    V, N, ND = (rng.standard_normal((NX, NZ)) for _ in range(3))
    cpdz = m.cp * m.dz
    ref = -m.cp * (N[1:-1, 1:-1] - ND[1:-1, 1:-1]) + cpdz * np.einsum("ijk,ik->ij", F, V[1:-1, 1:-1])
    out = cn.newton_rhs(m, NP, sysm, F, V, N, ND)
    np.testing.assert_allclose(out, ref, rtol=1e-13, atol=1e-14 * np.abs(ref).max())
    np.testing.assert_allclose(poisson.newton_rhs(m, NP, sysm, F, V, N, ND), ref, rtol=1e-13,
                               atol=1e-14 * np.abs(ref).max())
    Vn, Nn = V + 1e-3 * rng.standard_normal(V.shape), N + 1e-2 * rng.standard_normal(N.shape)
    x = Vn.ravel().copy()
    want = poisson.norms(np, m, Vn, V, Nn, N)
    got, fin = cn.newton_norms(m, NP, Vn, V, Nn, N, x)
    assert list(got) == list(poisson.NORM_KEYS)
    np.testing.assert_allclose([got[k] for k in poisson.NORM_KEYS], [want[k] for k in poisson.NORM_KEYS], rtol=1e-13)
    assert fin is True
    x[7] = np.nan
    Vn[3, 4] = np.nan
    got, fin = cn.newton_norms(m, NP, Vn, V, Nn, N, x)
    assert fin is False and math.isnan(got["dV_inf"]) and math.isnan(got["dV_l2"])


def test_emulated_cuda_deps_dx_max(emulated_cuda, newton_cases, rng):
    """deps_dx_max (d eps/dx, max |d eps/dx| and the finite check of V in one launch) against the
    array reference: d bit for bit, the maximum exact, NaN in eps or V reported."""
    cn = emulated_cuda.newton
    m = newton_cases.model("mesh.NX=10", "mesh.NZ=11")
    eps = rng.standard_normal((m.NX, 3, m.N_sbn))
    V = rng.standard_normal((m.NX, m.NZ))
    d, A, fin = cn.deps_dx_max(m, NP, eps, V)
    d_ref, A_ref, fin_ref = schrodinger.deps_dx_max(m, NP, eps, V)
    assert np.array_equal(d, schrodinger.deps_dx(m, eps)) and np.array_equal(d, d_ref)
    assert A == A_ref == np.abs(d_ref).max() and fin is fin_ref is True
    V[2, 3] = np.inf
    assert cn.deps_dx_max(m, NP, eps, V)[2] is False and schrodinger.deps_dx_max(m, NP, eps, V)[2] is False
    eps[4, 1, 0] = np.nan
    assert math.isnan(cn.deps_dx_max(m, NP, eps, V)[1]) and math.isnan(schrodinger.deps_dx_max(m, NP, eps, V)[1])


def test_emulated_cuda_newton_norms_tail(emulated_cuda, newton_cases, rng):
    """newton_norms_tail (the norms and the stage tail of the new iterate in one launch) against its
    reference poisson.norms_tail and against newton_norms + deps_dx_max: the norms the same bits as
    newton_norms', d bit for bit, A exact, a non-finite V_new or x reported."""
    cn = emulated_cuda.newton
    m = newton_cases.model("mesh.NX=10", "mesh.NZ=11")
    V, N = (rng.standard_normal((m.NX, m.NZ)) for _ in range(2))
    Vn, Nn = V + 1e-3 * rng.standard_normal(V.shape), N + 1e-2 * rng.standard_normal(N.shape)
    eps = rng.standard_normal((m.NX, 3, m.N_sbn))
    x = Vn.ravel().copy()
    nrm, fin, (d, A, finV) = cn.newton_norms_tail(m, NP, Vn, V, Nn, N, x, eps)
    nrm0, fin0 = cn.newton_norms(m, NP, Vn, V, Nn, N, x)
    assert nrm == nrm0 and fin is fin0 is True
    r_nrm, r_fin, (r_d, r_A, r_finV) = poisson.norms_tail(m, NP, Vn, V, Nn, N, x, eps)
    np.testing.assert_allclose([nrm[k] for k in poisson.NORM_KEYS], [r_nrm[k] for k in poisson.NORM_KEYS],
                               rtol=1e-13)
    assert np.array_equal(d, r_d) and np.array_equal(d, schrodinger.deps_dx(m, eps))
    assert A == r_A and finV is r_finV is True and r_fin is True
    Vn[2, 3] = np.inf
    _, fin, (_, _, finV) = cn.newton_norms_tail(m, NP, Vn, V, Nn, N, x, eps)
    assert fin is True and finV is False and poisson.norms_tail(m, NP, Vn, V, Nn, N, x, eps)[2][2] is False
    x[4] = np.nan
    eps[3, 1, 0] = np.nan
    _, fin, (_, A, _) = cn.newton_norms_tail(m, NP, Vn, V, Nn, N, x, eps)
    assert fin is False and math.isnan(A)


def _iter_start_cases(m, rng):
    """(s, V_n, stage_V, last, dt) for every stage, with and without a last step."""
    V = [rng.standard_normal((m.NX, m.NZ)) for _ in range(5)]
    last = poisson.LastStep(V[3], V[4], 0.7e-3)
    dt = 1.3e-3
    for lst in (last, None):
        yield 0, V[0], [], lst, dt
        yield 1, V[0], [V[1]], lst, dt
        yield 2, V[0], [V[1], V[2]], lst, dt


def test_emulated_cuda_iter_start(emulated_cuda, newton_cases, rng):
    """Kernel iter_start (the prediction in one launch) bit for bit poisson.iter_start's array code."""
    cn = emulated_cuda.newton
    m = newton_cases.model("mesh.NX=10", "mesh.NZ=11")
    for s, V_n, stage_V, last, dt in _iter_start_cases(m, rng):
        want = poisson.iter_start(m, NP, s, V_n, stage_V, last, dt)
        got = cn.iter_start(m, NP, s, V_n, stage_V, last, dt)
        if want is None:
            assert got is None and s == 0 and last is None
            continue
        assert got.shape == want.shape and np.array_equal(got, want), (s, last is None)
    assert any("--fmad=false" in o for _, o in emulated_cuda.cupy.compiled)


@pytest.mark.parametrize("bc", ["neumann", "dirichlet"])
def test_emulated_cuda_linsys_rhs(emulated_cuda, newton_cases, bc, rng):
    """Kernel construct_rhs (b alone, kept Jacobian) bit for bit construct_linsys's b, and the
    reference poisson.linsys_rhs (SuperLU's b) to rounding."""
    cn = emulated_cuda.newton
    m = newton_cases.model("mesh.NX=13", "mesh.NZ=11")
    sysm, F, rhs, bvals, _, b_ref, _ = newton_cases.problem(m, bc, rng)
    b = cn.linsys_rhs(m, NP, sysm, F, rhs, bvals)
    assert np.array_equal(b, cn.construct_linsys(m, NP, sysm, F, rhs, bvals)[1])
    np.testing.assert_allclose(b.ravel(), poisson.linsys_rhs(m, NP, sysm, F, rhs, bvals), rtol=1e-15,
                               atol=1e-15 * np.abs(b_ref).max())
    np.testing.assert_array_equal(poisson.linsys_rhs(m, NP, sysm, F, rhs, bvals), b_ref)


def test_emulated_cuda_boundary_values_uploaded_once_per_bias(emulated_cuda, newton_cases, rng):
    """construct_linsys keeps the device copy of a read-only bflat (poisson._potential_boundary's, one
    per bias) by identity; a writable one is taken afresh each call; b the same either way."""
    cn = emulated_cuda.newton
    m = newton_cases.model("mesh.NX=10", "mesh.NZ=9")
    sysm, F, rhs, bvals, _, _, _ = newton_cases.problem(m, "dirichlet", rng)
    ro = bvals.copy()
    ro.flags.writeable = False
    d1 = cn._device_bflat(m, ro)
    assert cn._device_bflat(m, ro) is d1 and m.device_cache[("cuda.newton", "bflat")][0] is ro
    np.testing.assert_array_equal(d1, bvals)
    again = ro.copy()
    again.flags.writeable = False
    assert cn._device_bflat(m, again) is not d1
    assert cn._device_bflat(m, bvals) is not cn._device_bflat(m, again)
    b_rw = cn.construct_linsys(m, NP, sysm, F, rhs, bvals)[1]
    b_ro = cn.construct_linsys(m, NP, sysm, F, rhs, ro)[1]
    np.testing.assert_array_equal(b_rw, b_ro)


def test_linsys_variant_selects_the_system(emulated_cuda, monkeypatch):
    """numerics.linsys: auto = the batched block solve at every NZ (measured, docs/performance-iter-next.md
    section 9); dense = the dense system at any NZ; block_cr / batched_cr as named; construct_linsys
    builds the block form for both block variants (checked behind stand-ins)."""
    cn = emulated_cuda.newton
    big = types.SimpleNamespace(NX=65, NZ=cn.MAX_NZ + 2)
    with pytest.raises(ValueError, match="NZ <= 127"):
        cn.solve_linsys_cr(None, None, big, (None, None, None), None)
    calls = []
    monkeypatch.setattr(cn, "dense", types.SimpleNamespace(
        construct_linsys=lambda *a: calls.append("dense construct") or ("A", "b"),
        solve_linsys=lambda *a: calls.append("dense solve") or "x"))
    monkeypatch.setattr(cn, "solve_linsys_cr", lambda *a: calls.append("cr") or "xb")
    monkeypatch.setattr(cn, "solve_linsys_batched", lambda *a: calls.append("batched") or "xc")
    assert cn.MAX_NZ == 127

    def mdl(NZ, linsys):
        return types.SimpleNamespace(NZ=NZ, cfg={"numerics": {"linsys": linsys}})

    assert cn.construct_linsys(mdl(big.NZ, "dense"), None, big, None, None, None) == ("A", "b")
    assert cn.solve_linsys(mdl(big.NZ, "auto"), None, big, "A", "b") == "xc"
    assert cn.solve_linsys(mdl(big.NZ, "dense"), None, big, "A", "b") == "x"
    small = types.SimpleNamespace(NX=65, NZ=cn.MAX_NZ)
    assert cn.solve_linsys(mdl(small.NZ, "auto"), None, small, "A", "b") == "xc"
    assert cn.solve_linsys(mdl(small.NZ, "dense"), None, small, "A", "b") == "x"
    assert cn.solve_linsys(mdl(small.NZ, "block_cr"), None, small, "A", "b") == "xb"
    assert cn.solve_linsys(mdl(small.NZ, "batched_cr"), None, small, "A", "b") == "xc"
    assert calls == ["dense construct", "batched", "dense solve", "batched", "dense solve", "cr", "batched"]


def test_batched_blocks_auto_and_the_gauss_jordan_limit(emulated_cuda):
    """numerics.batched_blocks: auto = gauss_jordan up to blocktri.GJ_MAX_NZ, the largest block
    whose gj_inverse fits in 227 KB of shared memory (newton.gj_fits), lu beyond; run.json names it."""
    from solver.bsp import kernels
    from solver.bsp.blocktri import GJ_MAX_NZ
    cn = emulated_cuda.newton
    assert all(cn.gj_fits(n) for n in range(1, GJ_MAX_NZ + 1)) and not cn.gj_fits(GJ_MAX_NZ + 1)
    for n in (1, 33, 129, GJ_MAX_NZ, 257):
        rg, nt, rreg, smem = cn.gj_config(n)
        assert nt % 32 == 0 and rg * n <= nt <= 1024 and rg * -(-n // rg) >= n, n
    with pytest.raises(ValueError, match="shared memory"):
        cn.gj_inverse(np.zeros((1, 257, 257)))

    def mdl(NZ, v):
        return types.SimpleNamespace(NZ=NZ, cfg={"numerics": {"batched_blocks": v}})

    assert [kernels.batched_blocks(mdl(n, "auto")) for n in (33, GJ_MAX_NZ, GJ_MAX_NZ + 1, 257)] == \
        ["gauss_jordan", "gauss_jordan", "lu", "lu"]
    assert kernels.batched_blocks(mdl(33, "lu")) == "lu"
    assert kernels.batched_blocks(types.SimpleNamespace(NZ=65, cfg={})) == "gauss_jordan"


@pytest.mark.parametrize("mesh", [("mesh.NX=13", "mesh.NZ=11", "numerics.linsys=batched_cr"),  # gauss_jordan
                                  ("mesh.NX=13", "mesh.NZ=11", "numerics.batched_blocks=lu"),
                                  ("mesh.NX=10", "mesh.NZ=129", "numerics.batched_blocks=lu")])  # auto: batched_cr
@pytest.mark.parametrize("bc", ["neumann", "dirichlet"])
def test_emulated_cuda_batched_block_solve(emulated_cuda, newton_cases, fake_graph_capture, mesh, bc, rng):
    """Variant batched_cr: construct_kernel's block form solved by solve_cr_batched through
    newton.solve_linsys (cuBLAS's batched LU stood in by numpy's, the CUDA graph by
    fake_graph_capture) equals SuperLU; Dirichlet exact."""
    cn = emulated_cuda.newton
    m = newton_cases.model(*mesh)
    sysm, F, rhs, bvals, A, b, x0 = newton_cases.problem(m, bc, rng)
    Ab, bb = cn.construct_linsys(m, NP, sysm, F, rhs, bvals)
    x = cn.solve_linsys(m, NP, sysm, Ab, bb)
    assert x.shape == (m.NX * m.NZ,)
    assert np.abs(x - x0).max() <= 1e-12 * np.abs(x0).max()
    d = sysm.dirichlet_flat
    np.testing.assert_array_equal(x[d], bvals[d])


def test_emulated_cuda_batched_graph(emulated_cuda, newton_cases, fake_graph_capture, rng):
    """numerics.linsys_graph: the first solve of a system warms up and captures once, every solve
    (also the first) replays the graph on the newly copied inputs and returns a copy of its output;
    the two boundary conditions get a graph each; equal to the uncaptured solve and to SuperLU."""
    cn = emulated_cuda.newton
    fake = fake_graph_capture
    m = newton_cases.model("mesh.NX=13", "mesh.NZ=11", "numerics.linsys=batched_cr")
    off = newton_cases.model("mesh.NX=13", "mesh.NZ=11", "numerics.linsys=batched_cr", "numerics.linsys_graph=false")
    xs = []
    for k, bc in enumerate(("dirichlet", "dirichlet", "neumann")):
        sysm, F, rhs, bvals, A, b, x0 = newton_cases.problem(m, bc, rng)
        sysm = poisson._system(m, bc)  # the cached system, as the Newton loop passes it
        Ab, bb = cn.construct_linsys(m, NP, sysm, F, rhs, bvals)
        x = cn.solve_linsys(m, NP, sysm, Ab, bb)
        assert x.shape == (m.NX * m.NZ,)
        assert np.abs(x - x0).max() <= 1e-12 * np.abs(x0).max(), bc
        np.testing.assert_array_equal(x[sysm.dirichlet_flat], bvals[sysm.dirichlet_flat])
        np.testing.assert_array_equal(x, cn.solve_linsys(off, NP, poisson._system(off, bc), Ab, bb))
        xs.append(x)
    assert fake.events == ["warm-up", "capture", "launch", "launch", "warm-up", "capture", "launch"]
    assert not np.array_equal(xs[0], xs[1])  # the second solve saw its own inputs: a copy out, not the buffer


@pytest.mark.parametrize("n, max_threads, rreg", [(1, 1024, 16), (5, 1024, 16), (13, 1024, 16), (40, 1024, 16),
                                                  (13, 32, 2), (20, 64, 0),  # rows in shared memory
                                                  (24, 48, 4)])  # 12 rows per thread: FACTORS = 0
def test_emulated_cuda_gj_inverse(emulated_cuda, n, max_threads, rreg, rng):
    """Kernel gj_inverse (batched_inverse.cu): the inverses of a stack and inv @ v, with a matrix
    that needs row exchanges (zero leading diagonal) and a permutation matrix, against numpy; also
    with rows beyond the register slots in dynamic shared memory and idle threads (NT > RG n)."""
    cn = emulated_cuda.newton
    rg, nt, rr, smem = cn.gj_config(n, max_threads, rreg)
    assert smem == 8 * (-(-n // rg) - rr) * nt
    a = rng.standard_normal((3, n, n)) + 0.5 * np.eye(n)
    if n > 1:
        a[1, 0, 0] = 0.0  # the first pivot must come from another row
    a[2] = np.eye(n)[rng.permutation(n)]
    v = rng.standard_normal((3, n))
    want = np.linalg.inv(a)
    inv = cn.gj_inverse(a[:, :, :], max_threads=max_threads, rreg=rreg)
    assert inv.shape == (3, n, n)
    np.testing.assert_allclose(inv, want, rtol=1e-10, atol=1e-11 * np.abs(want).max())
    np.testing.assert_array_equal(inv[2], a[2].T)  # a permutation's inverse, exactly
    inv2, z = cn.gj_inverse(a, v, max_threads=max_threads, rreg=rreg)
    np.testing.assert_array_equal(inv2, inv)
    zw = np.einsum("mij,mj->mi", want, v)
    np.testing.assert_allclose(z, zw, rtol=1e-10, atol=1e-11 * np.abs(zw).max())


@pytest.mark.parametrize("graph", ["true", "false"])
def test_emulated_cuda_batched_gauss_jordan(emulated_cuda, newton_cases, fake_graph_capture, graph, rng):
    """numerics.batched_blocks = gauss_jordan: the batched solve with the block inverses of
    gj_inverse equals SuperLU (also the indefinite F that needs pivoting); Dirichlet exact."""
    cn = emulated_cuda.newton
    for bc in ("neumann", "dirichlet"):
        m = newton_cases.model("mesh.NX=13", "mesh.NZ=11", "numerics.linsys=batched_cr",
                               "numerics.batched_blocks=gauss_jordan", f"numerics.linsys_graph={graph}")
        sysm, F, rhs, bvals, A, b, x0 = newton_cases.problem(m, bc, rng)
        Ab, bb = cn.construct_linsys(m, NP, sysm, F, rhs, bvals)
        x = cn.solve_linsys(m, NP, sysm, Ab, bb)
        assert np.abs(x - x0).max() <= 1e-12 * np.abs(x0).max(), bc
        np.testing.assert_array_equal(x[sysm.dirichlet_flat], bvals[sysm.dirichlet_flat])
    m, bs, sysm, F, rhs, bvals, x0, _, _ = newton_cases.indefinite(rng)
    m = newton_cases.model(*[f"mesh.{k}={v}" for k, v in (("NX", m.NX), ("NZ", m.NZ))], "numerics.linsys=batched_cr",
                           "numerics.batched_blocks=gauss_jordan", f"numerics.linsys_graph={graph}")
    Ab, bb = cn.construct_linsys(m, NP, sysm, F, rhs, bvals)
    x = cn.solve_linsys(m, NP, sysm, Ab, bb)
    assert np.abs(x - x0).max() <= 1e-10 * np.abs(x0).max()


def test_cublas_layout_reads_the_operands(emulated_cuda, rng):
    """_cublas._layout: the (op, ld, batch stride) given to cublasDgemmStridedBatched, applied to
    the raw buffer as cuBLAS reads it (column-major, element (i, j) at i + j ld), reproduce a @ b
    for the views blocktri_batched multiplies (strided slices of stacks, gesv's transposed results,
    the matrix-vector products' v[..., None]); other layouts give None (matmul copies them)."""
    from numpy.lib.stride_tricks import as_strided
    cb = emulated_cuda.newton._cublas

    def stored(x, lay, rows, cols):  # the column-major matrices cuBLAS reads, after op
        op, ld, bs = lay
        shape = (rows, cols) if op == cb._OP_N else (cols, rows)
        v = as_strided(x, shape=(x.shape[0],) + shape, strides=(bs * 8, 8, ld * 8))
        return v if op == cb._OP_N else v.transpose(0, 2, 1)

    n = 7
    big = rng.standard_normal((9, n, 2 * n + 1))
    X = np.ascontiguousarray(rng.standard_normal((4, 2 * n + 1, n)).transpose(0, 2, 1))  # gesv's result
    v = rng.standard_normal((12, n))
    cases = [(big[0::2][1:, :, :n], big[1::2][:, :n, :]),     # A_k[1:] @ X[:nk - 1] (strided batches)
             (X[..., :n], v[0:8:2][..., None]),                # W @ t[..., None] (column-major W)
             (X[..., n:2 * n], v[1::3][:4, :, None]),
             (big[:3, :, :n], big[3:6]),
             (big[:3, ::2, :n], big[3:6, :, :5])]             # row stride 2 (2 n + 1): a larger ld
    for a, b in cases:
        la, lb = cb._layout(a), cb._layout(b)
        assert la is not None and lb is not None
        m, p, q = a.shape
        r = b.shape[2]
        ct = np.matmul(stored(b, lb, r, q), stored(a, la, q, p))  # C^T = B^T A^T, (r x p)
        np.testing.assert_allclose(ct.transpose(0, 2, 1), a @ b, rtol=1e-13)
    assert cb._layout(big[:, :, ::2]) is None  # neither unit row nor unit column stride
    assert cb._layout(big.astype(np.float32)) is None


# ---------------------------------------------------------------------- on the GPU
GPU_MESHES = [("mesh.NX=13", "mesh.NZ=11"), ("mesh.NX=17", "mesh.NZ=33"), ("mesh.NX=9", "mesh.NZ=65")]


@pytest.mark.gpu
@pytest.mark.parametrize("mesh", GPU_MESHES)
@pytest.mark.parametrize("bc", ["neumann", "dirichlet"])
def test_cuda_block_system_matches_sparse_lu(cupy_backend, newton_cases, mesh, bc, rng):
    from solver.bsp.kernels.cuda import newton
    xp = cupy_backend.xp
    m = newton_cases.model(*mesh)
    sysm, F, rhs, bvals, A, b, x0 = newton_cases.problem(m, bc, rng)
    bs = blocktri.BlockSystem(sysm)
    ref = blocktri.construct(np, bs, F, rhs, bvals)
    (Dd, lod, upd), bd = newton.construct_linsys(m, cupy_backend, sysm, xp.asarray(F), xp.asarray(rhs), bvals)
    for o, r in zip((Dd, lod, upd, bd), ref):
        o = cupy_backend.to_numpy(o)
        np.testing.assert_allclose(o, r, rtol=1e-15, atol=1e-15 * np.abs(r).max())
    x = cupy_backend.to_numpy(newton.solve_linsys(m, cupy_backend, sysm, (Dd, lod, upd), bd))
    assert np.abs(x - x0).max() <= 1e-11 * np.abs(x0).max()
    d = sysm.dirichlet_flat
    np.testing.assert_array_equal(x[d], bvals[d])
    for nw in (4, 8, 16):
        xs = cupy_backend.to_numpy(newton.solve_linsys_cr(m, cupy_backend, sysm, (Dd, lod, upd), bd, nwarps=nw))
        assert np.abs(xs - x0).max() <= 1e-11 * np.abs(x0).max(), nw
        np.testing.assert_array_equal(xs[d], bvals[d])
    # through the hooks of poisson.construct_linsys / poisson.solve_linsys (numerics.kernels = auto)
    A2, b2 = poisson.construct_linsys(m, cupy_backend, sysm, xp.asarray(F), xp.asarray(rhs), bvals)
    x2 = cupy_backend.to_numpy(poisson.solve_linsys(m, cupy_backend, sysm, A2, b2))
    np.testing.assert_array_equal(x2, x)


@pytest.mark.gpu
@pytest.mark.parametrize("mesh, blocks", [(("mesh.NX=17", "mesh.NZ=33", "numerics.linsys=batched_cr"), "lu"),
                                          (("mesh.NX=17", "mesh.NZ=33"), "gauss_jordan"),
                                          (("mesh.NX=9", "mesh.NZ=129"), "lu"),
                                          (("mesh.NX=10", "mesh.NZ=129"), "gauss_jordan"),
                                          (("mesh.NX=9", "mesh.NZ=193"), "gauss_jordan"),  # rows in shared memory
                                          (("mesh.NX=9", "mesh.NZ=257"), "auto")])  # lu
@pytest.mark.parametrize("bc", ["neumann", "dirichlet"])
def test_cuda_batched_block_solve_matches_sparse_lu(cupy_backend, newton_cases, mesh, bc, blocks, rng):
    """Variant batched_cr on the device (auto; NZ = 257 is past cupy.linalg.solve's batched limit:
    cupy.cublas.batched_gesv; or GaussJordanCR), through the poisson hooks, against SuperLU."""
    xp = cupy_backend.xp
    m = newton_cases.model(*mesh, f"numerics.batched_blocks={blocks}")
    sysm, F, rhs, bvals, A, b, x0 = newton_cases.problem(m, bc, rng)
    A2, b2 = poisson.construct_linsys(m, cupy_backend, sysm, xp.asarray(F), xp.asarray(rhs), bvals)
    x = cupy_backend.to_numpy(poisson.solve_linsys(m, cupy_backend, sysm, A2, b2))
    assert np.abs(x - x0).max() <= 1e-11 * np.abs(x0).max()
    d = sysm.dirichlet_flat
    np.testing.assert_array_equal(x[d], bvals[d])


@pytest.mark.gpu
@pytest.mark.parametrize("n, max_threads, rreg", [(5, 1024, 16), (65, 1024, 16), (129, 1024, 16), (129, 1024, 24),
                                                  (129, 512, 8), (204, 1024, 16)])
def test_cuda_gj_inverse_matches_numpy(cupy_backend, n, max_threads, rreg, rng):
    """Kernel gj_inverse against numpy's inverse and inv @ v (a zero leading diagonal: row
    exchanges), rows in registers and in shared memory (up to blocktri.GJ_MAX_NZ = 204)."""
    from solver.bsp.kernels.cuda import newton
    a = rng.standard_normal((4, n, n)) + 2.0 * np.sqrt(n) * np.eye(n)
    a[1, 0, 0] = 0.0
    v = rng.standard_normal((4, n))
    inv, z = newton.gj_inverse(cupy_backend.xp.asarray(a), cupy_backend.xp.asarray(v), max_threads, rreg)
    want = np.linalg.inv(a)
    np.testing.assert_allclose(cupy_backend.to_numpy(inv), want, rtol=1e-10, atol=1e-12 * np.abs(want).max())
    zw = np.einsum("mij,mj->mi", want, v)
    np.testing.assert_allclose(cupy_backend.to_numpy(z), zw, rtol=1e-10, atol=1e-12 * np.abs(zw).max())


@pytest.mark.gpu
def test_cuda_block_solve_pivots(cupy_backend, newton_cases, rng):
    from solver.bsp.kernels.cuda import newton
    xp = cupy_backend.xp
    m, bs, sysm, F, rhs, bvals, x0, _, _ = newton_cases.indefinite(rng)
    Ad, bd = newton.construct_linsys(m, cupy_backend, sysm, xp.asarray(F), xp.asarray(rhs), bvals)
    x = cupy_backend.to_numpy(newton.solve_linsys(m, cupy_backend, sysm, Ad, bd))
    assert np.abs(x - x0).max() <= 1e-10 * np.abs(x0).max()


@pytest.mark.gpu
@pytest.mark.parametrize("NX", [13, 65, 129])
def test_cuda_deps_dx_max_matches_reference(cupy_backend, newton_cases, NX, rng):
    from solver.bsp.kernels.cuda import newton
    xp = cupy_backend.xp
    m = newton_cases.model(f"mesh.NX={NX}", "mesh.NZ=11")
    eps = rng.standard_normal((m.NX, 3, m.N_sbn))
    V = rng.standard_normal((m.NX, m.NZ))
    d, A, fin = newton.deps_dx_max(m, cupy_backend, xp.asarray(eps), xp.asarray(V))
    assert np.array_equal(cupy_backend.to_numpy(d), schrodinger.deps_dx(m, eps))
    assert A == np.abs(schrodinger.deps_dx(m, eps)).max() and fin is True
    V[-1, -1] = np.nan
    assert newton.deps_dx_max(m, cupy_backend, xp.asarray(eps), xp.asarray(V))[2] is False


@pytest.mark.gpu
@pytest.mark.parametrize("mesh", [("mesh.NX=13", "mesh.NZ=11"), ("mesh.NX=33", "mesh.NZ=33")])
def test_cuda_newton_glue_matches_reference(cupy_backend, newton_cases, mesh, rng):
    from solver.bsp.kernels.cuda import newton
    xp = cupy_backend.xp
    m = newton_cases.model(*mesh)
    NX, NZ = m.NX, m.NZ
    sysm = poisson.NewtonSystem(m, "dirichlet")
    F = rng.standard_normal((NX - 2, NZ - 2, NZ - 2))
    V, N, ND = (rng.standard_normal((NX, NZ)) for _ in range(3))
    ref = -m.cp * (N[1:-1, 1:-1] - ND[1:-1, 1:-1]) + sysm.cp_dz * np.einsum("ijk,ik->ij", F, V[1:-1, 1:-1])
    got = cupy_backend.to_numpy(newton.newton_rhs(m, cupy_backend, sysm, *(xp.asarray(a) for a in (F, V, N, ND))))
    np.testing.assert_allclose(got, ref, rtol=1e-13, atol=1e-14 * np.abs(ref).max())
    Vn, Nn = V + 1e-3 * rng.standard_normal(V.shape), N + 1e-2 * rng.standard_normal(N.shape)
    want = poisson.norms(np, m, Vn, V, Nn, N)
    nrm, fin = newton.newton_norms(m, cupy_backend, *(xp.asarray(a) for a in (Vn, V, Nn, N, Vn.ravel())))
    assert fin and list(nrm) == list(poisson.NORM_KEYS)
    np.testing.assert_allclose([nrm[k] for k in poisson.NORM_KEYS], [want[k] for k in poisson.NORM_KEYS], rtol=1e-13)
    x = Vn.ravel().copy()
    x[5] = np.inf
    _, fin = newton.newton_norms(m, cupy_backend, *(xp.asarray(a) for a in (Vn, V, Nn, N, x)))
    assert not fin


@pytest.mark.gpu
@pytest.mark.parametrize("mesh", GPU_MESHES + [("mesh.NX=65", "mesh.NZ=129")])
@pytest.mark.parametrize("linsys", ["auto", "block_cr", "dense"])
def test_cuda_linsys_rhs_is_construct_linsys_b(cupy_backend, newton_cases, mesh, linsys, rng):
    """Kernel construct_rhs (b alone with the kept Jacobian) bit for bit the b of construct_linsys
    (construct_kernel; the dense variant's own), through poisson.linsys_rhs, and SuperLU's b to rounding."""
    xp = cupy_backend.xp
    m = newton_cases.model(*mesh, f"numerics.linsys={linsys}")
    if linsys == "block_cr" and m.NZ > 127 or linsys == "dense" and m.NZ > 65:
        pytest.skip("block_cr: NZ <= 127; dense: its static matrix is built on the host (slow)")
    sysm, F, rhs, bvals, _, b_ref, _ = newton_cases.problem(m, "dirichlet", rng)
    ro = bvals.copy()
    ro.flags.writeable = False
    Fd, rd = xp.asarray(F), xp.asarray(rhs)
    b = poisson.linsys_rhs(m, cupy_backend, sysm, Fd, rd, ro)
    b_full = poisson.construct_linsys(m, cupy_backend, sysm, Fd, rd, bvals)[1]
    assert np.array_equal(cupy_backend.to_numpy(b), cupy_backend.to_numpy(b_full))
    np.testing.assert_allclose(cupy_backend.to_numpy(b).ravel(), b_ref, rtol=1e-15, atol=1e-15 * np.abs(b_ref).max())


@pytest.mark.gpu
@pytest.mark.parametrize("mesh", [("mesh.NX=13", "mesh.NZ=11"), ("mesh.NX=65", "mesh.NZ=65")])
def test_cuda_iter_start_matches_reference(cupy_backend, newton_cases, mesh, rng):
    """Kernel iter_start on the device bit for bit the array code on the host (numpy) and on the device
    (numerics.kernels = array: CuPy's elementwise operations)."""
    from solver.bsp.kernels.cuda import newton
    xp = cupy_backend.xp
    m = newton_cases.model(*mesh)
    ma = newton_cases.model(*mesh, "numerics.kernels=array")
    dev = lambda a: None if a is None else xp.asarray(a)  # noqa: E731
    for s, V_n, stage_V, last, dt in _iter_start_cases(m, rng):
        want = poisson.iter_start(m, NP, s, V_n, stage_V, last, dt)
        dl = None if last is None else poisson.LastStep(dev(last.V0), dev(last.V1), last.dt_o)
        args = (s, dev(V_n), [dev(v) for v in stage_V], dl, dt)
        got = newton.iter_start(m, cupy_backend, *args)
        via = poisson.iter_start(m, cupy_backend, *args)
        arr = poisson.iter_start(ma, cupy_backend, *args)
        if want is None:
            assert got is None and via is None and arr is None
            continue
        for o in (got, via, arr):
            assert np.array_equal(cupy_backend.to_numpy(o), want), (s, last is None)


@pytest.mark.gpu
@pytest.mark.parametrize("mesh", [("mesh.NX=13", "mesh.NZ=11"), ("mesh.NX=65", "mesh.NZ=65")])
def test_cuda_newton_norms_tail_matches_reference(cupy_backend, newton_cases, mesh, rng):
    """newton_norms_tail on the device: the norms bit for bit newton_norms' (one kernel), against
    poisson.norms_tail on the host; d eps/dx bit for bit, A exact, the finite checks."""
    from solver.bsp.kernels.cuda import newton
    xp = cupy_backend.xp
    m = newton_cases.model(*mesh)
    V, N = (rng.standard_normal((m.NX, m.NZ)) for _ in range(2))
    Vn, Nn = V + 1e-3 * rng.standard_normal(V.shape), N + 1e-2 * rng.standard_normal(N.shape)
    eps = rng.standard_normal((m.NX, 3, m.N_sbn))
    dev = [xp.asarray(a) for a in (Vn, V, Nn, N, Vn.ravel())]
    nrm, fin, (d, A, finV) = newton.newton_norms_tail(m, cupy_backend, *dev, xp.asarray(eps))
    nrm0, fin0 = newton.newton_norms(m, cupy_backend, *dev)
    assert nrm == nrm0 and fin and fin0 and finV
    r_nrm, _, (r_d, r_A, _) = poisson.norms_tail(m, NP, Vn, V, Nn, N, Vn.ravel(), eps)
    np.testing.assert_allclose([nrm[k] for k in poisson.NORM_KEYS], [r_nrm[k] for k in poisson.NORM_KEYS],
                               rtol=1e-13)
    assert np.array_equal(cupy_backend.to_numpy(d), r_d) and A == r_A
    Vn[-1, -1] = np.nan
    dev[0] = xp.asarray(Vn)
    assert newton.newton_norms_tail(m, cupy_backend, *dev, xp.asarray(eps))[2][2] is False


@pytest.mark.gpu
@pytest.mark.parametrize("mesh", [("mesh.NX=17", "mesh.NZ=33"), ("mesh.NX=65", "mesh.NZ=65"), ("mesh.NX=9", "mesh.NZ=129")])
@pytest.mark.parametrize("blocks", ["lu", "gauss_jordan"])
def test_cuda_batched_graph_matches_array_code(cupy_backend, newton_cases, mesh, blocks, rng):
    """numerics.linsys_graph: the replayed CUDA graph of the batched solve against the uncaptured
    array code (to rounding: the GEMMs are cuBLAS calls of their own) and SuperLU, for systems of both
    boundary conditions solved in turn with new data each time; arrays allocated between the
    solves stay untouched (the graph's temporaries live in its private memory pool)."""
    from solver.bsp.kernels.cuda import newton
    xp = cupy_backend.xp
    m = newton_cases.model(*mesh, "numerics.linsys=batched_cr", f"numerics.batched_blocks={blocks}")
    off = newton_cases.model(*mesh, "numerics.linsys=batched_cr", "numerics.linsys_graph=false",
                             f"numerics.batched_blocks={blocks}")
    guards = []
    for bc in ("dirichlet", "neumann", "dirichlet", "neumann"):
        sysm, F, rhs, bvals, A, b, x0 = newton_cases.problem(m, bc, rng)
        sysm = poisson._system(m, bc)
        Ad, bd = newton.construct_linsys(m, cupy_backend, sysm, xp.asarray(F), xp.asarray(rhs), bvals)
        x = cupy_backend.to_numpy(newton.solve_linsys(m, cupy_backend, sysm, Ad, bd))
        guards.append(xp.full(3 * m.NX * m.NZ * m.NZ, float(len(guards))))
        xa = cupy_backend.to_numpy(newton.solve_linsys(off, cupy_backend, poisson._system(off, bc), Ad, bd))
        assert np.abs(x - x0).max() <= 1e-11 * np.abs(x0).max(), bc
        assert np.abs(x - xa).max() <= 1e-12 * np.abs(xa).max(), bc
        d = sysm.dirichlet_flat
        np.testing.assert_array_equal(x[d], bvals[d])
    for k, g in enumerate(guards):
        assert bool((g == float(k)).all()), k


@pytest.mark.gpu
def test_cublas_blas_matches_numpy_also_captured(cupy_backend, rng):
    """_cublas.Blas (ctypes cuBLAS on one stream): gesv and matmul on the views blocktri_batched
    passes, against numpy, run directly and replayed from a captured graph with new data."""
    import cupy as cp
    from solver.bsp.kernels.cuda import _cublas
    n = 33
    stream = cp.cuda.Stream(non_blocking=True)
    blas = _cublas.Blas(stream)
    big = cp.asarray(rng.standard_normal((9, n, 2 * n + 1)))
    A = cp.asarray(rng.standard_normal((5, n, n)) + 4 * n ** 0.5 * np.eye(n))
    v = cp.asarray(rng.standard_normal((12, n)))

    def work():
        X = blas.gesv(A, big[:5])
        return (X, blas.matmul(big[0::2][1:, :, :n], big[1::2][:, :n, :]),
                blas.matmul(X[..., :n], v[0:10:2][..., None]))

    def want():
        h = cupy_backend.to_numpy
        X = np.linalg.solve(h(A), h(big)[:5])
        bh, vh = h(big), h(v)
        return X, bh[0::2][1:, :, :n] @ bh[1::2][:, :n, :], X[..., :n] @ vh[0:10:2][..., None]

    pool = cp.cuda.MemoryPool()  # the graph's temporaries stay its own (as in newton.BatchedGraph)
    with cp.cuda.using_allocator(pool.malloc), stream:
        got = work()
        stream.synchronize()
        for g, w in zip(got, want()):
            np.testing.assert_allclose(cupy_backend.to_numpy(g), w, rtol=1e-11, atol=1e-12 * np.abs(w).max())
        stream.begin_capture()
        try:
            got = work()
        finally:
            graph = stream.end_capture()
    for _ in range(2):  # new data, then the replay
        big[...] = cp.asarray(rng.standard_normal(big.shape))
        v[...] = cp.asarray(rng.standard_normal(v.shape))
        graph.launch()
        for g, w in zip(got, want()):
            np.testing.assert_allclose(cupy_backend.to_numpy(g), w, rtol=1e-11, atol=1e-12 * np.abs(w).max())


def _reuse_cases(solve, construct, m, sysm, rhs_list, F, bvals):
    """Solve A x = b (A, b from ``construct(rhs)``) for each right-hand side of ``rhs_list``, the
    first A throughout, with ``reuse`` after the first solve (its factorization kept), and compare
    with SuperLU of the reference system."""
    A = construct(rhs_list[0])[0]
    for k, rhs in enumerate(rhs_list):
        Aref, bref = poisson.construct_linsys(m, NP, sysm, F, rhs, bvals)
        want = spla_solve(Aref, bref)
        x = np.asarray(solve(A, construct(rhs)[1], k > 0))
        assert np.abs(x - want).max() <= 1e-12 * np.abs(want).max(), k
        d = sysm.dirichlet_flat
        np.testing.assert_array_equal(x[d], bvals[d])


def spla_solve(A, b):
    import scipy.sparse.linalg as spla
    x = spla.splu(A, permc_spec="NATURAL").solve(b)
    return x


@pytest.mark.parametrize("mesh", [("mesh.NX=13", "mesh.NZ=11"), ("mesh.NX=10", "mesh.NZ=9")])
@pytest.mark.parametrize("graph", [True, False])
def test_emulated_cuda_resolve_with_the_kept_factorization(emulated_cuda, newton_cases, fake_graph_capture,
                                                           mesh, graph, rng):
    """numerics.iter_jacobian = step: solve_linsys with reuse substitutes with the factorization of the
    last solve (GaussJordanCR.resolve, kernel bcr_rhs; its own stood-in graph) and equals SuperLU for
    new right-hand sides; a different A object is factored again."""
    cn = emulated_cuda.newton
    m = newton_cases.model(*mesh, f"numerics.linsys_graph={str(graph).lower()}")
    sysm, F, rhs, bvals, _, _, _ = newton_cases.problem(m, "dirichlet", rng)
    rhs_list = [rhs] + [rng.standard_normal(rhs.shape) for _ in range(3)]
    _reuse_cases(lambda A, b, reuse: cn.solve_linsys(m, NP, sysm, A, b, reuse),
                 lambda r: cn.construct_linsys(m, NP, sysm, F, r, bvals), m, sysm, rhs_list, F, bvals)
    if graph:
        assert fake_graph_capture.events.count("capture") == 2  # the solve and the resolve graph
    F2 = newton_cases.spd_F(rng, m.NX - 2, m.NZ - 2)  # another matrix: reuse of the old one refused
    A2, b2 = cn.construct_linsys(m, NP, sysm, F2, rhs, bvals)
    Aref, bref = poisson.construct_linsys(m, NP, sysm, F2, rhs, bvals)
    x = cn.solve_linsys(m, NP, sysm, A2, b2, True)
    want = spla_solve(Aref, bref)
    assert np.abs(x - want).max() <= 1e-12 * np.abs(want).max()


def test_emulated_resolve_threads_give_the_same_bits(emulated_cuda, newton_cases, fake_graph_capture, rng, monkeypatch):
    """bcr_rhs / bcr_backsub sum each row by one warp in a fixed lane order, whatever the warp count: the
    device's LEVEL_THREADS (1024) and the emulation's 256 (conftest) give the same x, bit for bit, for a
    solve and a resolve with the kept factorization."""
    from tests.conftest import EMULATED_LEVEL_THREADS
    cn = emulated_cuda.newton
    assert EMULATED_LEVEL_THREADS < 1024
    m = newton_cases.model("mesh.NX=9", "mesh.NZ=37", "numerics.linsys_graph=false", "numerics.resolve=levels")
    sysm, F, rhs, bvals, _, _, _ = newton_cases.problem(m, "dirichlet", rng)
    rhs2 = rng.standard_normal(rhs.shape)
    out = []
    for threads in (EMULATED_LEVEL_THREADS, 1024):
        monkeypatch.setattr(cn, "LEVEL_THREADS", threads)
        m.device_cache.clear()
        A, b = cn.construct_linsys(m, NP, sysm, F, rhs, bvals)
        x1 = np.array(cn.solve_linsys(m, NP, sysm, A, b, False))
        _, b2 = cn.construct_linsys(m, NP, sysm, F, rhs2, bvals)
        x2 = np.array(cn.solve_linsys(m, NP, sysm, A, b2, True))
        out.append((x1, x2))
    assert np.array_equal(out[0][0], out[1][0]) and np.array_equal(out[0][1], out[1][1])
    assert not np.array_equal(out[0][0], out[0][1])  # the resolve ran on another b


def test_reference_solve_reuses_its_lu_only_for_the_same_matrix(newton_cases, rng):
    """poisson.solve_linsys keeps the last SuperLU factorization per system: reuse with the same A
    object substitutes (equal to a fresh factorization to rounding), another A is factored."""
    m = newton_cases.model("mesh.NX=11", "mesh.NZ=9")
    sysm, F, rhs, bvals, A, b, x0 = newton_cases.problem(m, "dirichlet", rng)
    lu = m.device_cache[("_iter_lu", "dirichlet")][1]
    rhs2 = rng.standard_normal(rhs.shape)
    _, b2 = poisson.construct_linsys(m, NP, sysm, F, rhs2, bvals)
    x2 = poisson.solve_linsys(m, NP, sysm, A, b2, True)
    assert m.device_cache[("_iter_lu", "dirichlet")][1] is lu
    np.testing.assert_allclose(x2, spla_solve(A, b2), rtol=0, atol=1e-13 * np.abs(x2).max())
    A3, b3 = poisson.construct_linsys(m, NP, sysm, 2.0 * F, rhs2, bvals)
    x3 = poisson.solve_linsys(m, NP, sysm, A3, b3, True)
    assert m.device_cache[("_iter_lu", "dirichlet")][1] is not lu
    np.testing.assert_allclose(x3, spla_solve(A3, b3), rtol=0, atol=1e-13 * np.abs(x3).max())


@pytest.mark.gpu
@pytest.mark.parametrize("mesh", [("mesh.NX=17", "mesh.NZ=33"), ("mesh.NX=65", "mesh.NZ=65"), ("mesh.NX=10", "mesh.NZ=129"),
                                  ("mesh.NX=9", "mesh.NZ=193")])
@pytest.mark.parametrize("graph", [True, False])
def test_cuda_resolve_with_the_kept_factorization(cupy_backend, newton_cases, mesh, graph, rng):
    """GaussJordanCR.resolve (kernel bcr_rhs) on the device, through poisson.solve_linsys with reuse,
    against SuperLU for several right-hand sides of one matrix."""
    xp = cupy_backend.xp
    m = newton_cases.model(*mesh, f"numerics.linsys_graph={str(graph).lower()}")
    sysm, F, rhs, bvals, _, _, _ = newton_cases.problem(m, "dirichlet", rng)
    rhs_list = [rhs] + [rng.standard_normal(rhs.shape) for _ in range(3)]

    def solve(A, b, reuse):
        return cupy_backend.to_numpy(poisson.solve_linsys(m, cupy_backend, sysm, A, b, reuse))
    _reuse_cases(solve, lambda r: poisson.construct_linsys(m, cupy_backend, sysm, xp.asarray(F), xp.asarray(r), bvals),
                 m, sysm, rhs_list, F, bvals)
