"""The Table 2 benchmark on real Newton systems (every method converges to the solver's LU
solution) and its reuse of a systems file."""
import pytest

from solver.backend import numba_available
from solver.bsp.krylov import bench
from solver.bsp.krylov.capture import capture_systems, systems_key
from solver.bsp.krylov.solvers import TABLE2_ORDER

SMALL = ["mesh.N_sbn=3", "mesh.NX=17", "mesh.NZ=17", "mesh.NW=12", "mesh.NPHI=8"]


@pytest.fixture(scope="module")
def newton_systems():
    return capture_systems(None, SMALL, steps=1)


@pytest.mark.parametrize("impl", ["scipy", "numba"])
def test_real_newton_systems_with_ilut(newton_systems, impl):
    if impl == "numba" and not numba_available():
        pytest.skip("numba not installed")
    per, table = bench.benchmark(newton_systems, TABLE2_ORDER, ("ilut",), threads=(2,) if impl == "numba" else (),
                                 tol=1e-8, stage="all", with_scipy=impl == "scipy", superlu=False)
    assert len(table) == 10 and table["converged"].all(), table
    assert (per["rel_residual"] < 1e-7).all()
    assert (per["rel_error_vs_lu"] < 1e-5).all(), per["rel_error_vs_lu"].max()
    assert (table["iterations_per_system"] >= 1).all()


def test_table2_recaptures_systems_of_another_config(newton_systems, tmp_path, monkeypatch):
    """A systems file is reused only for the configuration it was captured with (rule bsp_table2
    keeps systems.h5 between runs)."""
    calls = []

    def fake_capture(cfg_path, overrides, steps):
        calls.append(list(overrides))
        return newton_systems[:3]

    monkeypatch.setattr(bench, "capture_systems", fake_capture)
    path = tmp_path / "systems.h5"
    kw = dict(solvers=("bicgstab",), preconds=("ilut",), threads=(), systems_path=path, stage="all")
    bench.run_table2(tmp_path / "a", None, SMALL, **kw)
    bench.run_table2(tmp_path / "b", None, SMALL, **kw)
    assert len(calls) == 1  # the second run loads the file
    bench.run_table2(tmp_path / "c", None, SMALL[:-1] + ["mesh.NPHI=12"], **kw)
    assert len(calls) == 2  # another mesh: captured again
    assert systems_key(path) is not None
