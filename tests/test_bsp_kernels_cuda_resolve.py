"""numerics.resolve: GaussJordanCR.resolve (the re-solve with the kept factorization) by the level kernels
bcr_rhs / bcr_backsub (``levels``) or by ONE launch of the persistent kernel bcr_resolve (``fused``, a grid
barrier between the phases), batched_cr.cu.  The fused kernel does every stored value's operations in the
level kernels' order: the same bits.

CPU tests: the .cu sources on the g++ emulation (conftest ``emulated_cuda``), where bcr_resolve's blocks
(3 blocks of 2 warps, the fixture's resolve_grid) run concurrently, so its grid barrier and the phases'
task split over blocks and warps run as on the device: fused == levels bitwise (x and the resolve's
intermediate z, R, X), and both against the dense NumPy solve.  GPU tests (``gpu``): the same on the
device (the grid of resolve_grid), in BatchedGraph's resolve graph replayed twice, and two 10-step runs,
fused and levels, bitwise equal.
"""
from __future__ import annotations

import types

import numpy as np
import pytest

from solver.bsp import blocktri, kernels
from solver.bsp.model import Model, load
from solver.config import ConfigError


def system(rng, NX, NZ, ndir=3):
    """A block tridiagonal system (D (NX, NZ, NZ), lo, up, b (NX, NZ), Dirichlet mask) with identity rows
    at ``ndir`` random Dirichlet entries, diagonally dominant."""
    D = rng.standard_normal((NX, NZ, NZ)) * 0.3
    D += np.eye(NZ) * (NZ * 0.3 + 4.0)
    lo = rng.standard_normal((NX, NZ))
    up = rng.standard_normal((NX, NZ))
    lo[0] = 0.0
    up[-1] = 0.0
    dirm = np.zeros((NX, NZ), dtype=bool)
    idx = rng.choice(NX * NZ, size=min(ndir, NX * NZ), replace=False)
    dirm.flat[idx] = True
    for i, r in zip(*np.nonzero(dirm)):
        D[i, r, :] = 0.0
        D[i, r, r] = 1.0
        lo[i, r] = up[i, r] = 0.0
    return D, lo, up, dirm


def dense_solve(D, lo, up, b):
    NX, NZ = lo.shape
    A = np.zeros((NX * NZ, NX * NZ))
    for i in range(NX):
        A[i * NZ:(i + 1) * NZ, i * NZ:(i + 1) * NZ] = D[i]
        if i >= 1:
            A[i * NZ:(i + 1) * NZ, (i - 1) * NZ:i * NZ] = np.diag(lo[i])
        if i + 1 < NX:
            A[i * NZ:(i + 1) * NZ, (i + 1) * NZ:(i + 2) * NZ] = np.diag(up[i])
    return np.linalg.solve(A, b.ravel()).reshape(NX, NZ)


def resolve_both(cn, s, lo, up, b, dirm, grid):
    """x and (z, R, X) of the kept factorization's resolve of ``s`` by the level kernels, then by the fused
    kernel on ``grid`` (the same object: the resolve overwrites all it reads of z, R, X first)."""
    out = {}
    for kind in ("levels", "fused"):
        s.resolve_kind, s.grid = kind, grid
        s.z[...] = np.nan  # the resolve must write what it reads
        x = s.resolve(lo, up, b, dirm).copy()
        out[kind] = (x, s.z.copy(), s.R[..., -1].copy(), s.X[..., -1].copy())
    return out


@pytest.mark.parametrize("NX,NZ", [(2, 12), (3, 12), (9, 12), (17, 12), (33, 12), (65, 12), (9, 33)])
def test_emulated_fused_resolve_is_the_level_resolve_bitwise(emulated_cuda, NX, NZ):
    """A factorization by GaussJordanCR, then resolves for new b on three grids: fused == levels bitwise,
    both the dense solve's x to 1e-12, the Dirichlet entries b exactly, the barrier counter back to 0."""
    cn = emulated_cuda.newton
    rng = np.random.default_rng(NX * 1000 + NZ)
    D, lo, up, dirm = system(rng, NX, NZ)
    b0 = rng.standard_normal((NX, NZ))
    s = cn.GaussJordanCR(NX, NZ, types.SimpleNamespace(matmul=np.matmul), "fused", grid=(3, 64))
    assert s.grid == (3, 64)
    x0 = s(D, lo, up, b0, dirm).copy()
    np.testing.assert_allclose(x0, dense_solve(D, lo, up, b0), rtol=0, atol=1e-12 * np.abs(x0).max())
    for grid in ((3, 64), (1, 32), (2, 96)):  # the tasks split over 6, 1 and 6 warps: the same bits
        b = rng.standard_normal((NX, NZ))
        b[dirm] = rng.standard_normal(int(dirm.sum()))
        got = resolve_both(cn, s, lo, up, b, dirm, grid)
        for a, c in zip(got["levels"], got["fused"]):
            np.testing.assert_array_equal(c, a)
        want = dense_solve(D, lo, up, b)
        x = got["fused"][0]
        assert np.abs(x - want).max() <= 1e-12 * np.abs(want).max()
        np.testing.assert_array_equal(x[dirm], b[dirm])  # Dirichlet entries = b exactly
        assert s.bar[0] == 0  # the counter reset by the kernel: a replay starts from zero


@pytest.mark.parametrize("NX,NZ", [(17, 33), (10, 65), (65, 33)])
def test_emulated_fused_resolve_bitwise_on_random_factors(emulated_cuda, NX, NZ):
    """Larger blocks with the kept factors (Bw, X, S) filled at random instead of factored (the emulated
    factorization is slow; the resolve's arithmetic does not need them to be one): fused == levels
    bitwise (x, z, R, X)."""
    cn = emulated_cuda.newton
    rng = np.random.default_rng(NX * 1000 + NZ)
    _, lo, up, dirm = system(rng, NX, NZ)
    s = cn.GaussJordanCR(NX, NZ, types.SimpleNamespace(matmul=np.matmul), "fused", grid=(3, 64))
    sc = 1.0 / np.sqrt(NZ)
    s.Bw[...] = rng.standard_normal(s.Bw.shape) * sc
    s.X[...] = rng.standard_normal(s.X.shape) * sc
    s.Sall[...] = rng.standard_normal(s.Sall.shape) * sc
    b = rng.standard_normal((NX, NZ))
    got = resolve_both(cn, s, lo, up, b, dirm, (3, 64))
    for a, c in zip(got["levels"], got["fused"]):
        np.testing.assert_array_equal(c, a)
    assert np.isfinite(got["fused"][0]).all() and s.bar[0] == 0


def test_emulated_fused_resolve_through_solve_linsys(emulated_cuda, newton_cases, fake_graph_capture, rng):
    """solve_linsys with reuse on the default (auto = fused) against numerics.resolve=levels: the same bits,
    through BatchedGraph's stood-in resolve graph replayed."""
    from solver.backend import get_backend
    NP = get_backend("numpy")
    cn = emulated_cuda.newton
    xs = {}
    for kind in ("auto", "levels"):
        m = newton_cases.model("mesh.NX=13", "mesh.NZ=11", f"numerics.resolve={kind}")
        r = np.random.default_rng(7)
        sysm, F, rhs, bvals, _, _, _ = newton_cases.problem(m, "dirichlet", r)
        A, b = cn.construct_linsys(m, NP, sysm, F, rhs, bvals)
        out = [cn.solve_linsys(m, NP, sysm, A, b)]
        for _ in range(2):
            _, b2 = cn.construct_linsys(m, NP, sysm, F, r.standard_normal(rhs.shape), bvals)
            out.append(cn.solve_linsys(m, NP, sysm, A, b2, True))
        entry = m.device_cache[("cuda.newton", "batched_graph", "dirichlet", "gauss_jordan")]
        assert entry[1]._solver.resolve_kind == ("fused" if kind == "auto" else "levels")
        xs[kind] = out
    for a, c in zip(xs["levels"], xs["auto"]):
        np.testing.assert_array_equal(c, a)


def test_schema_and_variant():
    assert load(None, [])["numerics"]["resolve"] == "auto"
    assert kernels.resolve_variant(Model(load(None, []))) == "fused"
    assert kernels.resolve_variant(Model(load(None, ["numerics.resolve=levels"]))) == "levels"
    assert kernels.resolve_variant(Model(load(None, ["numerics.resolve=fused"]))) == "fused"
    with pytest.raises(ConfigError) as exc:
        load(None, ["numerics.resolve=flags"])
    msg = str(exc.value)
    assert msg.startswith("config key 'numerics.resolve'") and "\n" not in msg


def test_gauss_jordan_cr_refuses_an_unknown_resolve(emulated_cuda):
    with pytest.raises(ValueError, match="levels or fused"):
        emulated_cuda.newton.GaussJordanCR(5, 4, types.SimpleNamespace(matmul=np.matmul), "persistent")


# ---------------------------------------------------------------------------------------------- GPU
@pytest.mark.gpu
@pytest.mark.parametrize("NX,NZ", [(2, 12), (3, 33), (9, 12), (17, 33), (65, 65), (65, 129), (129, 65)])
def test_cuda_fused_resolve_is_the_level_resolve_to_rounding(cupy_backend, NX, NZ):
    """On the device: fused (its grid from resolve_grid, a 1-block grid, a 7-block grid of 8 warps) equals
    levels to 1e-13 (x, z, R, X; not bitwise: the compiler contracts the fused kernel's expressions
    otherwise), fused bitwise run to run and across the grids, against blocktri.solve_cr (NumPy block CR)
    to 1e-11; the grid printed; the barrier counter back to zero."""
    import cupy as cp
    from solver.bsp.kernels.cuda import _cublas, newton
    rng = np.random.default_rng(NX * 1000 + NZ)
    D, lo, up, dirm = system(rng, NX, NZ)
    b0 = rng.standard_normal((NX, NZ))
    s = newton.GaussJordanCR(NX, NZ, _cublas.Blas(cp.cuda.get_current_stream()), "fused")
    grid = s.grid
    print(f"resolve {NX}x{NZ}: grid {grid}")
    dD, dlo, dup, ddir = (cp.asarray(a) for a in (D, lo, up, dirm))
    s(dD, dlo, dup, cp.asarray(b0), ddir.view(cp.uint8))
    b = rng.standard_normal((NX, NZ))
    b[dirm] = rng.standard_normal(int(dirm.sum()))
    db = cp.asarray(b)
    first = None
    for g in (grid, (1, 1024), (min(7, grid[0]), 256)):
        out = {}
        for kind in ("levels", "fused", "fused2"):
            s.resolve_kind, s.grid = kind.rstrip("2"), g
            s.z[...] = cp.nan
            x = cp.asnumpy(s.resolve(dlo, dup, db, ddir))
            out[kind] = (x, cp.asnumpy(s.z), cp.asnumpy(s.R[..., -1]), cp.asnumpy(s.X[..., -1]))
        first = first if g != grid else out["fused"]
        for a, c, c2, f in zip(out["levels"], out["fused"], out["fused2"], first):
            # the device compiles the fused kernel's expressions with other contractions than the level
            # kernels' (H200: x differs in 2.6 % of entries by <= 7e-16 relative): equal to rounding;
            # bitwise run to run and whatever the grid
            np.testing.assert_allclose(c, a, rtol=0, atol=1e-13 * max(np.nanmax(np.abs(a)), 1e-300))  # NaN: unwritten
            np.testing.assert_array_equal(c2, c)
            np.testing.assert_array_equal(c, f)
        want = blocktri.solve_cr(D, lo, up, b)
        assert np.abs(out["fused"][0] - want).max() <= 1e-11 * np.abs(want).max()
        assert int(s.bar.get()[0]) == 0


@pytest.mark.gpu
def test_cuda_fused_resolve_graph_replays(cupy_backend, newton_cases):
    """BatchedGraph.resolve (the resolve captured as a CUDA graph) fused vs levels: equal to rounding, and
    each graph replayed on the same b gives the same bits (fused: the counter reset inside the kernel)."""
    import cupy as cp
    from solver.bsp import poisson
    xs = {}
    for kind in ("fused", "levels"):
        m = newton_cases.model("mesh.NX=65", "mesh.NZ=65", f"numerics.resolve={kind}")
        r = np.random.default_rng(11)
        sysm, F, rhs, bvals, _, _, _ = newton_cases.problem(m, "dirichlet", r)
        A, b = poisson.construct_linsys(m, cupy_backend, sysm, cp.asarray(F), cp.asarray(rhs), bvals)
        poisson.solve_linsys(m, cupy_backend, sysm, A, b)
        b2 = poisson.construct_linsys(m, cupy_backend, sysm, cp.asarray(F), cp.asarray(r.standard_normal(rhs.shape)),
                                      bvals)[1]
        xs[kind] = [cp.asnumpy(poisson.solve_linsys(m, cupy_backend, sysm, A, b2, True)) for _ in range(3)]
        g = m.device_cache[("cuda.newton", "batched_graph", "dirichlet", "gauss_jordan")][1]
        assert "resolve" in g._graphs and g._solver.resolve_kind == kind
    for x in xs["levels"][1:]:
        np.testing.assert_array_equal(x, xs["levels"][0])
    for x in xs["fused"][1:]:
        np.testing.assert_array_equal(x, xs["fused"][0])  # replayed: the same bits (the counter reset)
    assert np.abs(xs["fused"][0] - xs["levels"][0]).max() <= 1e-13 * np.abs(xs["levels"][0]).max()


@pytest.mark.gpu
def test_gpu_runs_fused_and_levels_agree(cupy_backend):
    """10-step cupy runs of the standard-width mesh (the iter graph captures the resolve), levels and fused
    (twice): the same Newton count, every state array within 1e-10 relative (the resolve's rounding), and
    the two fused runs bitwise equal."""
    from solver.bsp.simulation import Simulation
    runs = {}
    for kind in ("levels", "fused", "fused2"):
        cfg = load(None, ["mesh.N_sbn=3", "mesh.NX=65", "mesh.NZ=65", "mesh.NW=24", "mesh.NPHI=8",
                          "output.progress=false", "numerics.backend=cupy", "time.steps=10", "time.t_end_ps=null",
                          f"numerics.resolve={kind.rstrip('2')}"])
        sim = Simulation(cfg, cupy_backend, None, progress=False)
        sim.run(resume=False)
        st = sim.state
        g = sim.model.device_cache.get(("cuda.iter_graph", "dirichlet"))
        runs[kind] = ({k: cupy_backend.to_numpy(getattr(st, k)) for k in ("Phi", "V", "eps", "rho", "deps_dx")},
                      st.newton_iterations, None if g is None else dict(g.replays))
    a, b, c = runs["levels"], runs["fused"], runs["fused2"]
    print(f"levels vs fused: Newton {a[1]} {b[1]}, replays {a[2]} {b[2]}")
    assert b[2] is not None and b[2].get("stage", 0) >= 10
    assert a[1] == b[1] == c[1]
    for k in a[0]:
        rel = np.abs(b[0][k] - a[0][k]).max() / np.abs(a[0][k]).max()
        print(f"  {k}: fused vs levels max rel {rel:.2e}")
        assert rel <= 1e-10, k
        np.testing.assert_array_equal(c[0][k], b[0][k])
