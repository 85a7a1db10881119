"""The dense Newton system on the device (solver/bsp/kernels/cuda/dense.py, numerics.linsys: dense,
and auto where NZ > 127) against the reference CSC matrix and SuperLU (GPU only)."""
import numpy as np
import pytest

from solver.backend import get_backend
from solver.bsp import poisson

NP = get_backend("numpy")


@pytest.mark.gpu
def test_cuda_dense_newton_system_matches_sparse_lu(cupy_backend, newton_cases, rng):
    from solver.bsp.kernels.cuda import dense, newton
    m = newton_cases.model("mesh.NX=17", "mesh.NZ=33", "numerics.linsys=dense")
    ic = poisson.initcond(m, NP)
    xp = cupy_backend.xp
    for bc in ("neumann", "dirichlet"):
        sysm = poisson.NewtonSystem(m, bc)
        F = poisson.frechet(m, NP, ic.eps, ic.chi, ic.rho, poisson.fermi_dirac_drho(m, np, ic.eps))
        rhs = rng.standard_normal((m.NX - 2, m.NZ - 2))
        bvals = sysm.boundary_values(m, 0.3, 0.4).ravel()
        A, b = poisson.construct_linsys(m, NP, sysm, F, rhs, bvals)
        x0 = poisson.solve_linsys(m, NP, sysm, A, b)
        Ad, bd = dense.construct_linsys(m, cupy_backend, sysm, xp.asarray(F), xp.asarray(rhs), bvals)
        np.testing.assert_allclose(cupy_backend.to_numpy(Ad), A.toarray(), rtol=1e-14, atol=1e-14)
        x1 = cupy_backend.to_numpy(dense.solve_linsys(m, cupy_backend, sysm, Ad, bd))
        np.testing.assert_allclose(x1, x0, rtol=1e-11, atol=1e-11 * np.abs(x0).max())
        d = sysm.dirichlet_flat
        np.testing.assert_array_equal(x1[d], bvals[d])
        # numerics.linsys = dense through newton's dispatch gives the same
        A2, b2 = newton.construct_linsys(m, cupy_backend, sysm, xp.asarray(F), xp.asarray(rhs), bvals)
        np.testing.assert_array_equal(cupy_backend.to_numpy(newton.solve_linsys(m, cupy_backend, sysm, A2, b2)), x1)
