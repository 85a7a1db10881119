"""The glue of ITER around the Newton kernels (docs/performance-iter-glue.md): POTENTIAL's boundary
values kept per bias (poisson._potential_boundary), the stage tail brought along by the last Newton
norms (IterResult.tail, poisson.norms_tail), the prediction of a stage's start as one function
(poisson.iter_start) and the right-hand side alone with a kept Jacobian (poisson.linsys_rhs).  The
CUDA kernels of these are tested in tests/test_bsp_kernels_cuda_newton.py."""
import numpy as np
import pytest

from solver.backend import get_backend
from solver.bsp import poisson
from solver.bsp.model import Model, load

NP = get_backend("numpy")
TINY = ["mesh.N_sbn=4", "mesh.NX=9", "mesh.NZ=13", "mesh.NW=12", "mesh.NPHI=8", "numerics.backend=numpy"]


def _model(*extra):
    return Model(load(None, TINY + list(extra)))


def test_potential_boundary_values_are_kept_per_bias(monkeypatch):
    """One host read of V_b per bias: the same read-only array while V_b and the bias stay, fresh
    values when the bias ramps (Simulation._ramp_bias replaces model.cfg) or V_b is another array."""
    m = _model()
    sysm = poisson._system(m, "dirichlet")
    V_b = np.linspace(0.1, 0.3, m.NZ)
    reads = []
    monkeypatch.setattr(NP, "to_numpy", lambda a: reads.append(1) or np.asarray(a))
    b1 = poisson._potential_boundary(m, NP, sysm, V_b)
    assert b1.ndim == 1 and not b1.flags.writeable
    np.testing.assert_array_equal(b1, sysm.boundary_values(m, V_b, V_b + m.V_DS).ravel())
    assert poisson._potential_boundary(m, NP, sysm, V_b) is b1 and len(reads) == 1
    m.cfg = {**m.cfg, "bias": {**m.cfg["bias"], "V_DS": m.cfg["bias"]["V_DS"] + 0.1}}
    b2 = poisson._potential_boundary(m, NP, sysm, V_b)
    assert b2 is not b1 and len(reads) == 2
    np.testing.assert_array_equal(b2, sysm.boundary_values(m, V_b, V_b + m.V_DS).ravel())
    assert not np.array_equal(b1, b2)
    m.cfg = {**m.cfg, "bias": {**m.cfg["bias"], "V_G": m.cfg["bias"]["V_G"] + 0.05}}
    b3 = poisson._potential_boundary(m, NP, sysm, V_b)
    np.testing.assert_array_equal(b3, sysm.boundary_values(m, V_b, V_b + m.V_DS).ravel())
    assert len(reads) == 3 and not np.array_equal(b2, b3)
    b4 = poisson._potential_boundary(m, NP, sysm, V_b.copy())
    assert b4 is not b3 and len(reads) == 4
    np.testing.assert_array_equal(b4, b3)
