"""CUDA fast path of the Frechet phase (solver/bsp/kernels/cuda/frechet.py + frechet.cu) against
poisson.frechet: frechet.cu compiled with g++ behind a stand-in ``cupy`` (conftest
``emulated_cuda``), and on the GPU (marked ``gpu``)."""
import numpy as np
import pytest

from solver.backend import get_backend
from solver.bsp import poisson

NP = get_backend("numpy")


@pytest.mark.parametrize("with_drho", [True, False])
def test_emulated_cuda_frechet(emulated_cuda, newton_cases, with_drho, rng):
    m = newton_cases.model("mesh.NX=10", "mesh.NZ=11")
    eps, chi, rho = newton_cases.random_eigen(m, rng)
    drho = 0.7 * rho if with_drho else None
    F0 = poisson.frechet(m, NP, eps, chi, rho, drho)
    F1 = emulated_cuda.frechet.frechet(m, NP, eps, chi, rho, drho)
    np.testing.assert_allclose(F1, F0, rtol=1e-12, atol=1e-13 * np.abs(F0).max())


@pytest.mark.gpu
@pytest.mark.parametrize("mesh", [("mesh.NX=10", "mesh.NZ=11"), ("mesh.NX=33", "mesh.NZ=33"), ("mesh.NX=9", "mesh.NZ=65")])
@pytest.mark.parametrize("with_drho", [True, False])
def test_cuda_frechet_matches_reference(cupy_backend, newton_cases, mesh, with_drho, rng):
    from solver.bsp.kernels.cuda import frechet
    xp = cupy_backend.xp
    m = newton_cases.model(*mesh)
    eps, chi, rho = newton_cases.random_eigen(m, rng)
    drho = 0.7 * rho if with_drho else None
    F0 = poisson.frechet(m, NP, eps, chi, rho, drho)
    args = [xp.asarray(a) for a in (eps, chi, rho)] + [None if drho is None else xp.asarray(drho)]
    F1 = cupy_backend.to_numpy(frechet.frechet(m, cupy_backend, *args))
    np.testing.assert_allclose(F1, F0, rtol=1e-12, atol=1e-13 * np.abs(F0).max())
    F2 = cupy_backend.to_numpy(poisson.frechet(m, cupy_backend, *args))  # through the hook
    np.testing.assert_array_equal(F2, F1)
