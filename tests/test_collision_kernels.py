"""Fast paths of the collision integral through solver.dispatch: which backend has which table,
and the numba gain on a subset of cells (the sampled bench timings) equals the whole-mesh gain
and the NumPy reference."""
import numpy as np
import pytest

from solver.backend import get_backend, numba_available
from solver.collision.coeffs import build_table
from solver.collision.kernels import REGISTRY
from solver.collision.operator import CollisionOperator, VelocityGrid, maxwellian


def test_numpy_has_no_fast_path():
    assert REGISTRY.table("numpy") == {}


@pytest.mark.skipif(not numba_available(), reason="numba not installed")
def test_numba_gain_on_cells_matches_the_reference(rng):
    assert REGISTRY.names("numba") == ["gain", "gain_cells"]
    g = VelocityGrid.centred(6, 1.0)
    f = maxwellian(g, 1.0, (0.2, 0.0, -0.1), 1.1) * (1 + 0.2 * rng.random((6, 6, 6)))
    op = CollisionOperator(g, backend=get_backend("numba"), table=build_table(6))
    ref = op.gain_reference(f)
    full = op.gain(f)
    assert REGISTRY.describe(REGISTRY.lookup("numba", "gain")) == "solver.collision.kernels.numba_cpu.gain"
    np.testing.assert_allclose(full, ref, rtol=1e-12, atol=1e-14 * np.abs(ref).max())
    cells = np.arange(0, 6 ** 3, 7)
    part = REGISTRY.lookup("numba", "gain_cells")(op, f, cells)
    assert np.array_equal(part, full.reshape(-1)[cells])
    assert set(op.device_cache) == {"numba"}
