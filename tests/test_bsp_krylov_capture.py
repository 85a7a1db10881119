"""Captured Newton systems: they are the solver's (known answer: the sparse LU it used), and they
survive the HDF5 round trip."""
import numpy as np
import pytest

from solver.bsp.krylov.capture import capture_systems, load_systems, save_systems

SMALL = ["mesh.N_sbn=3", "mesh.NX=17", "mesh.NZ=17", "mesh.NW=12", "mesh.NPHI=8"]


@pytest.fixture(scope="module")
def newton_systems():
    """The real Newton systems of start-up and one time step on a 3 x 17 x 17 x 12 x 8 mesh."""
    return capture_systems(None, SMALL, steps=1)


def test_captured_systems_are_the_solvers(newton_systems):
    S = newton_systems
    assert {s["x_bc"] for s in S} == {"neumann", "dirichlet"} and any(s["step"] == 1 for s in S)
    for s in S:
        A = s["A"]
        assert A.shape == (289, 289)
        np.testing.assert_allclose(A.diagonal(), 1.0)  # row-equilibrated
        assert np.linalg.norm(A @ s["x"] - s["b"]) <= 1e-10 * np.linalg.norm(s["b"])



def test_save_load_roundtrip(newton_systems, tmp_path):
    p = tmp_path / "s.h5"
    save_systems(p, newton_systems[:4])
    back = load_systems(p)
    assert len(back) == 4
    for a, b in zip(newton_systems[:4], back):
        assert (a["A"] != b["A"]).nnz == 0 and np.array_equal(a["b"], b["b"]) and a["x_bc"] == b["x_bc"]
