"""The ten Krylov solvers of Table 2 (paper 000) on a small nonsymmetric system (known answer:
numpy.linalg.solve), with and without a preconditioner, on the NumPy and the numba vector operations."""
import numpy as np
import pytest
import scipy.sparse as sp

from solver.backend import numba_available
from solver.bsp.krylov.ops import REGISTRY, make_operator
from solver.bsp.krylov.precond import make_preconditioner
from solver.bsp.krylov.solvers import PAPER_TABLE2, SOLVERS, TABLE2_ORDER

ALL = sorted(SOLVERS)


def convection_diffusion(m=12, peclet=0.6, shift=0.5):
    """Upwind 2-D convection-diffusion on an m x m grid (nonsymmetric, diagonally dominant)."""
    T = sp.diags([-1.0 - peclet, 2.0, -1.0 + peclet], [-1, 0, 1], shape=(m, m))
    I = sp.eye(m)
    return sp.csr_matrix(sp.kron(I, T) + sp.kron(T, I) + shift * sp.eye(m * m))


def test_registry_has_the_ten_methods_of_table2():
    assert set(TABLE2_ORDER) == set(SOLVERS) and len(SOLVERS) == 10
    assert set(PAPER_TABLE2) == set(SOLVERS)


@pytest.mark.parametrize("name", ALL)
@pytest.mark.parametrize("precond", ["none", "ilut"])
def test_small_nonsymmetric_system(name, precond, rng):
    A = convection_diffusion()
    assert abs(A - A.T).max() > 0.1  # really nonsymmetric
    b = rng.standard_normal(A.shape[0])
    x_ref = np.linalg.solve(A.toarray(), b)
    op = make_operator(A, "scipy")
    P = make_preconditioner(A, precond)
    r = SOLVERS[name](op.matvec, b, P.solve, rmatvec=op.rmatvec, precond_T=P.solve_T, tol=1e-10, maxiter=2000)
    assert r.converged, (name, precond, r.iterations, r.breakdown)
    assert r.history[-1] < 1e-10 and r.history[0] == 1.0
    # the recurrence residual is the true one
    assert np.linalg.norm(b - A @ r.x) / np.linalg.norm(b) < 1e-9
    assert np.linalg.norm(r.x - x_ref) / np.linalg.norm(x_ref) < 1e-6


@pytest.mark.skipif(not numba_available(), reason="numba not installed")
@pytest.mark.parametrize("name", ALL)
def test_numba_ops_give_the_numpy_iterates(name, rng):
    """One thread: the numba vector operations take the NumPy path's iterations (same algorithm,
    round-off only in the reductions)."""
    A = convection_diffusion()
    b = rng.standard_normal(A.shape[0])
    ref_op, nb_op = make_operator(A, "scipy"), make_operator(A, "numba")
    P = make_preconditioner(A, "ilut")
    ops = REGISTRY.lookup("numba", "ops")(threads=1)
    ref = SOLVERS[name](ref_op.matvec, b, P.solve, rmatvec=ref_op.rmatvec, precond_T=P.solve_T, tol=1e-10)
    got = SOLVERS[name](nb_op.matvec, b, P.solve, rmatvec=nb_op.rmatvec, precond_T=P.solve_T, tol=1e-10, ops=ops)
    assert got.converged and abs(got.iterations - ref.iterations) <= 1, (ref.iterations, got.iterations)
    np.testing.assert_allclose(got.x, ref.x, rtol=1e-7, atol=1e-9 * np.abs(ref.x).max())


def test_solvers_report_nonconvergence(rng):
    A = convection_diffusion()
    b = rng.standard_normal(A.shape[0])
    op = make_operator(A)
    for name in ALL:
        r = SOLVERS[name](op.matvec, b, None, rmatvec=op.rmatvec, tol=1e-12, maxiter=3)
        assert not r.converged and r.iterations <= 3, name


def test_zero_right_hand_side_is_solved_at_once():
    A = convection_diffusion(m=4)
    op = make_operator(A)
    for name in ALL:
        r = SOLVERS[name](op.matvec, np.zeros(16), rmatvec=op.rmatvec)
        assert r.converged and r.iterations == 0 and not r.x.any(), name
