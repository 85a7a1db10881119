"""Krylov solvers of Table 2 (paper 000): every registered method on a small nonsymmetric system
(known answer: numpy.linalg.solve), on real Newton systems captured from the solver (known
answer: the sparse LU the solver uses), numba SpMV / vector operations vs scipy / numpy, and
the effect of the preconditioner."""
import numpy as np
import pytest
import scipy.sparse as sp

from solver.backend import numba_available
from solver.bsp import krylov as K

ALL = sorted(K.SOLVERS)


def convection_diffusion(m=12, peclet=0.6, shift=0.5):
    """Upwind 2-D convection-diffusion on an m x m grid (nonsymmetric, diagonally dominant)."""
    T = sp.diags([-1.0 - peclet, 2.0, -1.0 + peclet], [-1, 0, 1], shape=(m, m))
    I = sp.eye(m)
    return sp.csr_matrix(sp.kron(I, T) + sp.kron(T, I) + shift * sp.eye(m * m))


def test_registry_has_the_ten_methods_of_table2():
    assert set(K.TABLE2_ORDER) == set(K.SOLVERS) and len(K.SOLVERS) == 10
    assert set(K.PAPER_TABLE2) == set(K.SOLVERS)


@pytest.mark.parametrize("name", ALL)
@pytest.mark.parametrize("precond", ["none", "ilut"])
def test_small_nonsymmetric_system(name, precond, rng):
    A = convection_diffusion()
    assert abs(A - A.T).max() > 0.1  # really nonsymmetric
    b = rng.standard_normal(A.shape[0])
    x_ref = np.linalg.solve(A.toarray(), b)
    op = K.make_operator(A, "scipy")
    P = K.make_preconditioner(A, precond)
    r = K.SOLVERS[name](op.matvec, b, P.solve, rmatvec=op.rmatvec, precond_T=P.solve_T, tol=1e-10, maxiter=2000)
    assert r.converged, (name, precond, r.iterations, r.breakdown)
    assert r.history[-1] < 1e-10 and r.history[0] == 1.0
    # the recurrence residual is the true one
    assert np.linalg.norm(b - A @ r.x) / np.linalg.norm(b) < 1e-9
    assert np.linalg.norm(r.x - x_ref) / np.linalg.norm(x_ref) < 1e-6


def test_solvers_report_nonconvergence(rng):
    A = convection_diffusion()
    b = rng.standard_normal(A.shape[0])
    op = K.make_operator(A)
    for name in ALL:
        r = K.SOLVERS[name](op.matvec, b, None, rmatvec=op.rmatvec, tol=1e-12, maxiter=3)
        assert not r.converged and r.iterations <= 3, name


def test_preconditioner_reduces_iterations(rng):
    A = convection_diffusion(m=20)
    b = rng.standard_normal(A.shape[0])
    op = K.make_operator(A)
    for name in ("bicgstab", "idr", "bicr"):
        its = {}
        for pk in ("none", "ilu0", "ilut"):
            P = K.make_preconditioner(A, pk)
            r = K.SOLVERS[name](op.matvec, b, P.solve, rmatvec=op.rmatvec, precond_T=P.solve_T, tol=1e-8)
            assert r.converged
            its[pk] = r.iterations
        assert its["ilut"] < its["none"] and its["ilu0"] < its["none"], (name, its)


def test_ilu0_is_exact_on_a_tridiagonal_matrix(rng):
    """ILU(0) of a tridiagonal matrix is its exact LU: M^-1 b = A^-1 b, and M^-T likewise."""
    A = sp.csr_matrix(sp.diags([rng.random(29) - 2, 4 + rng.random(30), rng.random(29)], [-1, 0, 1]))
    b = rng.standard_normal(30)
    P = K.make_preconditioner(A, "ilu0")
    np.testing.assert_allclose(P.solve(b), np.linalg.solve(A.toarray(), b), rtol=1e-12)
    np.testing.assert_allclose(P.solve_T(b), np.linalg.solve(A.toarray().T, b), rtol=1e-12)


@pytest.mark.skipif(not numba_available(), reason="numba not installed")
def test_numba_matvec_and_ops_match_scipy(rng):
    A = sp.csr_matrix(sp.random(300, 300, density=0.05, random_state=3) + sp.eye(300))
    v, w = rng.standard_normal(300), rng.standard_normal(300)
    ref = K.make_operator(A, "scipy")
    try:
        for t in (1, 2):
            K.set_threads(t)
            op = K.make_operator(A, "numba")
            np.testing.assert_allclose(op.matvec(v), ref.matvec(v), rtol=1e-13, atol=1e-13)
            np.testing.assert_allclose(op.rmatvec(v), ref.rmatvec(v), rtol=1e-13, atol=1e-13)
            ops = K.NumbaOps()
            assert ops.dot(v, w) == pytest.approx(float(v @ w), rel=1e-12)
            np.testing.assert_allclose(ops.axpbypcz(2.0, v, -3.0, w, 0.5, v), 2.5 * v - 3.0 * w, rtol=1e-14)
    finally:
        K.set_threads(K.set_threads(10**6))


@pytest.fixture(scope="module")
def newton_systems():
    """The real Newton systems of start-up and one time step on a 3 x 17 x 17 x 12 x 8 mesh."""
    return K.capture_systems(None, ["mesh.N_sbn=3", "mesh.NX=17", "mesh.NZ=17", "mesh.NW=12", "mesh.NPHI=8"], steps=1)


def test_captured_systems_are_the_solvers(newton_systems):
    S = newton_systems
    assert {s["x_bc"] for s in S} == {"neumann", "dirichlet"} and any(s["step"] == 1 for s in S)
    for s in S:
        A = s["A"]
        assert A.shape == (289, 289)
        np.testing.assert_allclose(A.diagonal(), 1.0)  # row-equilibrated
        assert np.linalg.norm(A @ s["x"] - s["b"]) <= 1e-10 * np.linalg.norm(s["b"])


@pytest.mark.parametrize("impl", ["scipy", "numba"])
def test_real_newton_systems_with_ilut(newton_systems, impl):
    if impl == "numba" and not numba_available():
        pytest.skip("numba not installed")
    per, table = K.benchmark(newton_systems, K.TABLE2_ORDER, ("ilut",), threads=(2,) if impl == "numba" else (),
                             tol=1e-8, stage="all", with_scipy=impl == "scipy", superlu=False)
    assert len(table) == 10 and table["converged"].all(), table
    assert (per["rel_residual"] < 1e-7).all()
    assert (per["rel_error_vs_lu"] < 1e-5).all(), per["rel_error_vs_lu"].max()
    assert (table["iterations_per_system"] >= 1).all()


def test_save_load_roundtrip(newton_systems, tmp_path):
    p = tmp_path / "s.h5"
    K.save_systems(p, newton_systems[:4])
    back = K.load_systems(p)
    assert len(back) == 4
    for a, b in zip(newton_systems[:4], back):
        assert (a["A"] != b["A"]).nnz == 0 and np.array_equal(a["b"], b["b"]) and a["x_bc"] == b["x_bc"]


def test_table2_recaptures_systems_of_another_config(newton_systems, tmp_path, monkeypatch):
    """A systems file is reused only for the configuration it was captured with (rule bsp_table2
    keeps systems.h5 between runs)."""
    calls = []

    def fake_capture(cfg_path, overrides, steps):
        calls.append(list(overrides))
        return newton_systems[:3]

    monkeypatch.setattr(K, "capture_systems", fake_capture)
    path = tmp_path / "systems.h5"
    small = ["mesh.N_sbn=3", "mesh.NX=17", "mesh.NZ=17", "mesh.NW=12", "mesh.NPHI=8"]
    kw = dict(solvers=("bicgstab",), preconds=("ilut",), threads=(), systems_path=path, stage="all")
    K.run_table2(tmp_path / "a", None, small, **kw)
    K.run_table2(tmp_path / "b", None, small, **kw)
    assert len(calls) == 1  # the second run loads the file
    K.run_table2(tmp_path / "c", None, small[:-1] + ["mesh.NPHI=12"], **kw)
    assert len(calls) == 2  # another mesh: captured again
    assert K.systems_key(path) is not None
