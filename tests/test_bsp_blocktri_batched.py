"""Block cyclic reduction over batched block operations (solver/bsp/blocktri_batched.py, variant
numerics.linsys = batched_cr) against the one-block-at-a-time reference blocktri.solve_cr and
SuperLU (poisson.solve_linsys, numpy backend) on real Newton systems, any NZ; the array phases
on whole runs; on the GPU the same function with xp = cupy (test_bsp_kernels_cuda_newton runs it
through the cupy fast path)."""
import numpy as np
import pytest

from solver.backend import get_backend
from solver.bsp import blocktri, poisson
from solver.bsp.blocktri_batched import cr_batched_counts, solve_cr_batched
from solver.bsp.model import Model, load

NP = get_backend("numpy")


def model(*overrides):
    return Model(load(None, list(overrides)))


def _system(newton_cases, m, bc, rng, F=None):
    """(bs, D, lo, up, b, bvals, x0 (SuperLU), A (CSC), b (CSC rhs)) of one Newton system of ``m``."""
    sysm, F, rhs, bvals, A, b, x0 = newton_cases.problem(m, bc, rng, F=F)
    bs = blocktri.BlockSystem(sysm)
    D, lo, up, bb = blocktri.construct(np, bs, F, rhs, bvals)
    return bs, D, lo, up, bb, bvals, x0, A, b


def _physical_F(m):
    """The Frechet blocks of the INITCOND state (Fermi-Dirac drho): what ITER's first Newton
    iteration solves with."""
    ic = poisson.initcond(m, NP)
    return poisson.frechet(m, NP, ic.eps, ic.chi, ic.rho, poisson.fermi_dirac_drho(m, np, ic.eps))


MESHES = [("mesh.NX=13", "mesh.NZ=11"), ("mesh.NX=16", "mesh.NZ=9"), ("mesh.NX=33", "mesh.NZ=9"),
          ("mesh.NX=9", "mesh.NZ=17", "device.gate_start_nm=6", "device.gate_end_nm=14"),
          ("mesh.NX=10", "mesh.NZ=129")]  # NZ > 127: beyond the CR kernels' pivot key


@pytest.mark.parametrize("mesh", MESHES)
@pytest.mark.parametrize("bc", ["neumann", "dirichlet"])
def test_batched_cr_matches_sparse_lu_and_solve_cr(newton_cases, mesh, bc, rng):
    m = model(*mesh)
    bs, D, lo, up, bb, bvals, x0, A, b = _system(newton_cases, m, bc, rng)
    x = solve_cr_batched(np, D, lo, up, bb, bs.dirichlet).ravel()
    scale = np.abs(x0).max()
    assert np.abs(x - x0).max() <= 1e-12 * scale
    xc = blocktri.solve_cr(D, lo, up, bb, bs.dirichlet).ravel()
    assert np.abs(x - xc).max() <= 1e-12 * scale
    assert np.abs(A @ x - b).max() <= 1e-12 * np.abs(b).max()
    d = bs.dirichlet.ravel()
    np.testing.assert_array_equal(x[d], bvals[d])


@pytest.mark.parametrize("mesh", [("mesh.NX=17", "mesh.NZ=33"), ("mesh.NX=9", "mesh.NZ=65")])
@pytest.mark.parametrize("bc", ["neumann", "dirichlet"])
def test_batched_cr_on_the_initcond_frechet_blocks(newton_cases, mesh, bc, rng):
    m = model(*mesh)
    bs, D, lo, up, bb, bvals, x0, A, b = _system(newton_cases, m, bc, rng, F=_physical_F(m))
    x = solve_cr_batched(np, D, lo, up, bb, bs.dirichlet).ravel()
    assert np.abs(x - x0).max() <= 1e-12 * np.abs(x0).max()


def test_batched_cr_pivots_on_an_indefinite_frechet_block(newton_cases, rng):
    """conftest's indefinite F: the leading 3 x 3 minor of block 1 vanishes, so elimination
    without pivoting fails; the batched LU pivots (as solve_cr)."""
    m, bs, sysm, F, rhs, bvals, x0, d0, minor3 = newton_cases.indefinite(rng)
    assert abs(minor3(0.0)) < 1e-10 * abs(d0)
    D, lo, up, bb = blocktri.construct(np, bs, F, rhs, bvals)
    x = solve_cr_batched(np, D, lo, up, bb, bs.dirichlet).ravel()
    assert np.abs(x - x0).max() <= 1e-10 * np.abs(x0).max()


@pytest.mark.parametrize("NX", range(2, 21))
def test_batched_cr_every_column_count(NX, rng):
    """Synthetic block systems with NX = 2..20 (both parities at every level, one to five
    levels) against a dense solve; no Dirichlet mask."""
    NZ = 5
    D = rng.standard_normal((NX, NZ, NZ)) + 6.0 * np.eye(NZ)
    lo, up = rng.standard_normal((NX, NZ)), rng.standard_normal((NX, NZ))
    lo[0] = up[-1] = 0.0
    b = rng.standard_normal((NX, NZ))
    M = np.zeros((NX, NZ, NX, NZ))
    for i in range(NX):
        M[i, :, i, :] = D[i]
        if i:
            M[i, np.arange(NZ), i - 1, np.arange(NZ)] = lo[i]
        if i < NX - 1:
            M[i, np.arange(NZ), i + 1, np.arange(NZ)] = up[i]
    x0 = np.linalg.solve(M.reshape(NX * NZ, -1), b.ravel())
    x = solve_cr_batched(np, D, lo, up, b).ravel()
    assert np.abs(x - x0).max() <= 1e-12 * np.abs(x0).max()


class _RecordingXP:
    """numpy behind the names solve_cr_batched looks up on ``xp``: the test checks that they are
    all functions CuPy has with the same meaning (no numpy-only call on device arrays)."""
    CUPY_HAS = {"asarray", "linalg", "concatenate", "zeros", "empty", "eye", "broadcast_to", "matmul", "where"}

    def __init__(self):
        self.used = set()

    def __getattr__(self, name):
        self.used.add(name)
        return getattr(np, name)


def test_batched_cr_uses_only_array_api_calls_cupy_has(newton_cases, rng):
    m = model("mesh.NX=13", "mesh.NZ=11")
    bs, D, lo, up, bb, bvals, x0, A, b = _system(newton_cases, m, "neumann", rng)
    xp = _RecordingXP()
    x = solve_cr_batched(xp, D, lo, up, bb, bs.dirichlet).ravel()
    assert np.abs(x - x0).max() <= 1e-12 * np.abs(x0).max()
    assert xp.used and xp.used <= _RecordingXP.CUPY_HAS, xp.used - _RecordingXP.CUPY_HAS


def test_batched_cr_custom_gesv_is_used(newton_cases, rng):
    m = model("mesh.NX=13", "mesh.NZ=11")
    bs, D, lo, up, bb, bvals, x0, A, b = _system(newton_cases, m, "dirichlet", rng)
    calls = []

    def gesv(a, r):
        calls.append((a.shape, r.shape))
        return np.linalg.solve(a, r)

    x = solve_cr_batched(np, D, lo, up, bb, bs.dirichlet, gesv=gesv).ravel()
    assert np.abs(x - x0).max() <= 1e-12 * np.abs(x0).max()
    # one solve per level plus the top: level 0 with NZ + 1 right-hand sides, later 2 NZ + 1
    assert [c[1][-1] for c in calls] == [12] + [23] * (len(blocktri.cr_levels(13)) - 1) + [1]
    assert [c[0][0] for c in calls] == [lvl[3] for lvl in blocktri.cr_levels(13)] + [1]


@pytest.mark.parametrize("NX,NZ", [(65, 65), (129, 129), (33, 257), (16, 9)])
def test_cr_batched_counts(NX, NZ):
    c = cr_batched_counts(NX, NZ)
    assert len(c) == len(blocktri.cr_levels(NX)) + 1
    # every column is factored exactly once
    assert sum(lv["n_elim"] for lv in c) == NX
    np.testing.assert_allclose(sum(lv["getrf"] for lv in c), NX * 2.0 / 3.0 * NZ**3)
    # level 0: NZ + 1 right-hand sides per eliminated block, scalings (6 NZ^2) instead of a GEMM
    # for each of the NX - 1 neighbour pairs; later levels: one GEMM per pair of active columns
    assert c[0]["getrs"] == c[0]["n_elim"] * 2.0 * NZ**2 * (NZ + 1)
    assert c[0]["gemm"] == 6.0 * NZ**2 * (NX - 1)
    for lv in c[1:-1]:
        n_active = lv["n_elim"] + lv["n_kept"]
        assert lv["gemm"] == 2.0 * NZ**2 * (2 * NZ + 1) * (n_active - 1)


def test_batched_cr_phases_through_the_poisson_hooks(newton_cases, rng):
    """numerics.linsys = batched_cr on numpy: poisson.construct_linsys / solve_linsys run the
    array phases of blocktri_batched (the block form; x flat, Dirichlet entries exact)."""
    m = model("mesh.NX=13", "mesh.NZ=11", "numerics.linsys=batched_cr")
    sysm, F, rhs, bvals, A, b, x0 = newton_cases.problem(m, "dirichlet", rng)  # kernels=auto: batched
    (D, lo, up), bb = poisson.construct_linsys(m, NP, sysm, F, rhs, bvals)
    for o, r in zip((D, lo, up, bb), blocktri.construct(np, blocktri.BlockSystem(sysm), F, rhs, bvals)):
        np.testing.assert_array_equal(o, r)
    x = poisson.solve_linsys(m, NP, sysm, (D, lo, up), bb)
    ref = model("mesh.NX=13", "mesh.NZ=11")
    A0, b0 = poisson.construct_linsys(ref, NP, sysm, F, rhs, bvals)
    x_lu = poisson.solve_linsys(ref, NP, sysm, A0, b0)
    assert x.shape == x_lu.shape == (m.NX * m.NZ,)
    assert np.abs(x - x_lu).max() <= 1e-12 * np.abs(x_lu).max()
    np.testing.assert_array_equal(x, x0)  # problem() solved through the same hooks
    d = sysm.dirichlet_flat
    np.testing.assert_array_equal(x[d], bvals[d])


@pytest.mark.parametrize("backend_name", ["numpy", "numba"])
def test_batched_cr_whole_run_matches_superlu(backend_name):
    """A few time steps of a small mesh with numerics.linsys = batched_cr against the reference
    (numerics.kernels = array: LAPACK + SuperLU), on numpy and numba (where batched_cr replaces
    the numba table's own CR kernels; the other numba ITER kernels run)."""
    if backend_name == "numba":
        pytest.importorskip("numba")
    from solver.bsp.simulation import Simulation

    states = {}
    for case in (("numerics.kernels=array",), ("numerics.linsys=batched_cr",)):
        cfg = load(None, ["mesh.N_sbn=3", "mesh.NX=9", "mesh.NZ=13", "mesh.NW=16", "mesh.NPHI=8",
                          "output.progress=false", f"numerics.backend={backend_name}", "numerics.threads=2",
                          "time.steps=5", "time.t_end_ps=null", "output.checkpoint_every_steps=0", *case])
        sim = Simulation(cfg, progress=False)
        sim.run(resume=False)
        assert sim.state.step == 5
        states[case[0]] = {k: np.asarray(getattr(sim.state, k)) for k in ("Phi", "V", "eps", "rho")}
    ref = states["numerics.kernels=array"]
    for k, v in states["numerics.linsys=batched_cr"].items():
        r = float(np.abs(v - ref[k]).max() / np.abs(ref[k]).max())
        assert 0 < r <= 1e-10, (k, r)  # a different solver (not bit-equal), equal to rounding


@pytest.mark.gpu
@pytest.mark.parametrize("mesh", [("mesh.NX=17", "mesh.NZ=33"), ("mesh.NX=9", "mesh.NZ=129"), ("mesh.NX=9", "mesh.NZ=257")])
@pytest.mark.parametrize("bc", ["neumann", "dirichlet"])
def test_batched_cr_on_the_gpu(cupy_backend, newton_cases, mesh, bc, rng):
    """solve_cr_batched with xp = cupy and its default gesv (cupy.linalg.solve)."""
    xp = cupy_backend.xp
    m = model(*mesh)
    bs, D, lo, up, bb, bvals, x0, A, b = _system(newton_cases, m, bc, rng)
    x = cupy_backend.to_numpy(solve_cr_batched(xp, *(xp.asarray(a) for a in (D, lo, up, bb)), bs.dirichlet)).ravel()
    assert np.abs(x - x0).max() <= 1e-12 * np.abs(x0).max()
    d = bs.dirichlet.ravel()
    np.testing.assert_array_equal(x[d], bvals[d])
