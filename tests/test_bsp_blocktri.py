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


def test_block_thomas_indefinite_frechet_needs_pivoting(rng):
    """A symmetric indefinite F (POTENTIAL's rho need not be monotone) chosen so that the leading
    3 x 3 minor of block 1 vanishes: elimination with diagonal pivots divides by ~0 at the third
    node; the pivoting solvers (LAPACK in ``solve``, the kernel's exchange steps) still agree
    with SuperLU."""
    m = model("mesh.NX=11", "mesh.NZ=9")
    nz = m.NZ - 2
    sysm = poisson.NewtonSystem(m, "dirichlet")
    bs = blocktri.BlockSystem(sysm)
    F = _spd_F(rng, m.NX - 2, nz)
    F0 = rng.standard_normal((nz, nz))
    F[0] = F0 + F0.T

    def block1(t):
        Ft = F[0].copy()
        Ft[1, 1] += t
        M = bs.D0[1].copy()
        M[1:-1, 1:-1] += bs.cp_dz * Ft
        return M

    d0 = np.linalg.det(block1(0.0)[:3, :3])
    d1 = np.linalg.det(block1(1.0)[:3, :3])
    F[0, 1, 1] += -d0 / (d1 - d0)  # det is linear in t
    assert abs(np.linalg.det(block1(0.0)[:3, :3])) < 1e-10 * abs(d0)
    sysm, F, rhs, bvals, A, b, x0 = _problem(m, "dirichlet", rng, F=F)
    D, lo, up, bb = blocktri.construct(np, bs, F, rhs, bvals)
    scale = np.abs(x0).max()
    x = blocktri.solve(np, D, lo, up, bb, bs.dirichlet).ravel()
    xe = blocktri.solve_exchange(D, lo, up, bb).ravel()
    assert np.abs(x - x0).max() <= 1e-10 * scale
    assert np.abs(xe - x0).max() <= 1e-10 * scale
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
