"""Vector operations and operators of the Krylov benchmark: the numba table (solver.dispatch) and
its SpMV / fused updates against scipy / NumPy at one and two threads."""
import numpy as np
import pytest
import scipy.sparse as sp

from solver.backend import numba_available
from solver.bsp.krylov.ops import REGISTRY, NumpyOps, make_operator, vector_ops


def test_scipy_variant_is_numpy_on_one_thread():
    ops, threads = vector_ops("scipy", 7)
    assert isinstance(ops, NumpyOps) and threads == 7
    assert ops.axpbypcz(2.0, np.ones(3), -1.0, np.arange(3.0), 0.5, np.full(3, 2.0)).tolist() == [3.0, 2.0, 1.0]
    with pytest.raises(ValueError, match="implementation must be one of"):
        vector_ops("cupy")
    with pytest.raises(ValueError, match="operator impl"):
        make_operator(sp.eye(2), "cupy")


@pytest.mark.skipif(not numba_available(), reason="numba not installed")
def test_numba_table_names_its_kernels():
    assert REGISTRY.names("numba") == sorted(["ops", "set_threads", "csr_matvec", "ilu0_factor", "ilu0_solve",
                                              "ilu0_solve_T"])
    assert REGISTRY.describe(REGISTRY.lookup("numba", "ops")) == "solver.bsp.krylov.numba_ops.NumbaOps"


@pytest.mark.skipif(not numba_available(), reason="numba not installed")
def test_numba_matvec_and_ops_match_scipy(rng):
    A = sp.csr_matrix(sp.random(300, 300, density=0.05, random_state=3) + sp.eye(300))
    v, w = rng.standard_normal(300), rng.standard_normal(300)
    ref = make_operator(A, "scipy")
    try:
        for t in (1, 2):
            ops, _ = vector_ops("numba", t)
            op = make_operator(A, "numba")
            np.testing.assert_allclose(op.matvec(v), ref.matvec(v), rtol=1e-13, atol=1e-13)
            np.testing.assert_allclose(op.rmatvec(v), ref.rmatvec(v), rtol=1e-13, atol=1e-13)
            assert ops.dot(v, w) == pytest.approx(float(v @ w), rel=1e-12)
            np.testing.assert_allclose(ops.axpbypcz(2.0, v, -3.0, w, 0.5, v), 2.5 * v - 3.0 * w, rtol=1e-14)
    finally:
        set_threads = REGISTRY.lookup("numba", "set_threads")
        set_threads(set_threads(10**6))
