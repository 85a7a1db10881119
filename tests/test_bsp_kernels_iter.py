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
