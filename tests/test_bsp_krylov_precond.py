"""Preconditioners of the Krylov benchmark: ILU(0) is exact on a tridiagonal matrix, and every
preconditioner cuts the iterations of a nonsymmetric system."""
import numpy as np
import pytest
import scipy.sparse as sp

from solver.backend import numba_available
from solver.bsp.krylov.ops import make_operator
from solver.bsp.krylov.precond import make_preconditioner
from solver.bsp.krylov.solvers import SOLVERS

pytestmark = pytest.mark.skipif(not numba_available(), reason="ILU(0) needs numba")


def convection_diffusion(m=12, peclet=0.6, shift=0.5):
    """Upwind 2-D convection-diffusion on an m x m grid (nonsymmetric, diagonally dominant)."""
    T = sp.diags([-1.0 - peclet, 2.0, -1.0 + peclet], [-1, 0, 1], shape=(m, m))
    I = sp.eye(m)
    return sp.csr_matrix(sp.kron(I, T) + sp.kron(T, I) + shift * sp.eye(m * m))


def test_preconditioner_reduces_iterations(rng):
    A = convection_diffusion(m=20)
    b = rng.standard_normal(A.shape[0])
    op = make_operator(A)
    for name in ("bicgstab", "idr", "bicr"):
        its = {}
        for pk in ("none", "ilu0", "ilut"):
            P = make_preconditioner(A, pk)
            r = SOLVERS[name](op.matvec, b, P.solve, rmatvec=op.rmatvec, precond_T=P.solve_T, tol=1e-8)
            assert r.converged
            its[pk] = r.iterations
        assert its["ilut"] < its["none"] and its["ilu0"] < its["none"], (name, its)


def test_ilu0_is_exact_on_a_tridiagonal_matrix(rng):
    """ILU(0) of a tridiagonal matrix is its exact LU: M^-1 b = A^-1 b, and M^-T likewise."""
    A = sp.csr_matrix(sp.diags([rng.random(29) - 2, 4 + rng.random(30), rng.random(29)], [-1, 0, 1]))
    b = rng.standard_normal(30)
    P = make_preconditioner(A, "ilu0")
    np.testing.assert_allclose(P.solve(b), np.linalg.solve(A.toarray(), b), rtol=1e-12)
    np.testing.assert_allclose(P.solve_T(b), np.linalg.solve(A.toarray().T, b), rtol=1e-12)


def test_unknown_preconditioner_and_empty_diagonal_fail():
    with pytest.raises(ValueError, match="preconditioner must be one of"):
        make_preconditioner(sp.eye(3, format="csr"), "jacobi")
    A = sp.csr_matrix(np.array([[0.0, 1.0], [1.0, 1.0]]))
    A.eliminate_zeros()
    with pytest.raises(ValueError, match="zero-pattern diagonal in row 0"):
        make_preconditioner(A, "ilu0")
