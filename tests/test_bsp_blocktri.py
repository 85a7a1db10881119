"""The block-tridiagonal form of the Newton system (solver/bsp/blocktri.py) against the reference:
the row-equilibrated CSC matrix of poisson.construct_linsys solved by SuperLU
(poisson.solve_linsys) on the numpy backend.  Its CUDA fast path: test_bsp_kernels_cuda_newton.py."""
import numpy as np
import pytest

from solver.bsp import blocktri, poisson

MESHES = [("mesh.NX=13", "mesh.NZ=11"), ("mesh.NX=9", "mesh.NZ=17", "device.gate_start_nm=6", "device.gate_end_nm=14")]


@pytest.mark.parametrize("mesh", MESHES)
@pytest.mark.parametrize("bc", ["neumann", "dirichlet"])
def test_block_form_equals_csc_matrix(newton_cases, mesh, bc, rng):
    m = newton_cases.model(*mesh)
    sysm, F, rhs, bvals, A, b, _ = newton_cases.problem(m, bc, rng)
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


@pytest.mark.parametrize("mesh", MESHES + [("mesh.NX=33", "mesh.NZ=9"), ("mesh.NX=16", "mesh.NZ=9")])
@pytest.mark.parametrize("bc", ["neumann", "dirichlet"])
def test_cyclic_reduction_matches_sparse_lu(newton_cases, mesh, bc, rng):
    m = newton_cases.model(*mesh)
    sysm, F, rhs, bvals, A, b, x0 = newton_cases.problem(m, bc, rng)
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


def test_indefinite_frechet_needs_pivoting(newton_cases, rng):
    """A symmetric indefinite F (POTENTIAL's rho need not be monotone) chosen so that the leading
    3 x 3 minor of block 1 vanishes: elimination with diagonal pivots divides by ~0 at the third
    node; cyclic reduction (which inverts block 1 at its first level) still agrees with SuperLU,
    and the kernels' exchange steps on that block need their pivoting."""
    m, bs, sysm, F, rhs, bvals, x0, d0, minor3 = newton_cases.indefinite(rng)
    assert abs(minor3(0.0)) < 1e-10 * abs(d0)
    D, lo, up, bb = blocktri.construct(np, bs, F, rhs, bvals)
    scale = np.abs(x0).max()
    xc = blocktri.solve_cr(D, lo, up, bb, bs.dirichlet).ravel()
    assert np.abs(xc - x0).max() <= 1e-10 * scale
    z_ref = np.linalg.solve(D[1], bb[1])
    _, z = blocktri.exchange_inverse(D[1], bb[1])
    assert np.abs(z - z_ref).max() <= 1e-10 * np.abs(z_ref).max()
    with np.errstate(all="ignore"):
        _, zn = blocktri.exchange_inverse(D[1], bb[1], pivot=False)
    assert not np.abs(zn - z_ref).max() <= 1e-6 * np.abs(z_ref).max()  # what the pivoting is for


def test_exchange_inverse_bookkeeping(rng):
    S = rng.standard_normal((7, 7))
    r = rng.standard_normal(7)
    Sinv, z = blocktri.exchange_inverse(S, r)
    np.testing.assert_allclose(Sinv @ S, np.eye(7), atol=1e-12)
    np.testing.assert_allclose(S @ z, r, atol=1e-12)


def test_block_structure_check_rejects_other_couplings(newton_cases):
    m = newton_cases.model("mesh.NX=9", "mesh.NZ=9")
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
