"""CUDA fast path of the eigen phase (solver/bsp/kernels/cuda/eigen.py + eigen.cu): the kernels
``eigenvalues`` and ``ipim`` (variants A and B) against LAPACK (schrodinger.eigen_host).

CPU tests: eigen.cu compiled with g++ behind a stand-in ``cupy`` (conftest ``emulated_cuda``; one
OS thread per CUDA thread where a kernel synchronises, __shared__ shared by the block), so that the
Python launchers (launch shapes, the shared-memory bound) and the kernels run end to end without a
GPU.  GPU tests (marked ``gpu``) on the device.
"""
import numpy as np
import pytest

from solver.backend import get_backend
from solver.bsp import poisson, schrodinger
from solver.bsp.model import Model, load


def model(*overrides):
    return Model(load(None, list(overrides)))


@pytest.mark.parametrize("mesh,block", [(("mesh.NX=9", "mesh.NZ=17"), 32),
                                        (("mesh.NX=9", "mesh.NZ=13", "mesh.N_sbn=4"), 32),
                                        (("mesh.NX=11", "mesh.NZ=11", "mesh.N_sbn=5"), 64)])
def test_emulated_eigenvalues_and_ipim_variants(emulated_cuda, mesh, block, rng):
    """eigenvalues + ipim A and B agree bit for bit (host build, no FMA contraction), eigen (the
    dispatched fast path) equals them, and they match LAPACK; on the INITCOND potential and a
    perturbed one, blocks of 32 (the paper) and 64 threads, N_sbn that do not divide the block
    (blocks straddle matrices, a partial last block).  (The fused kernel that was their bitwise
    reference is deleted: git history and docs/performance-ipim.md keep it.)"""
    ce = emulated_cuda.eigen
    m = model(*mesh)
    ic = poisson.initcond(m, get_backend("numpy"))
    for V in (np.ascontiguousarray(ic.V), ic.V + 0.3 * rng.standard_normal(ic.V.shape)):
        e0, Dg = ce.eigenvalues(m, V, block=block)
        c0 = ce.ipim(m, e0, Dg, variant="a", block=block)
        c1 = ce.ipim(m, e0, Dg, variant="b", block=block)
        np.testing.assert_array_equal(c1, c0)
        e2, c2 = ce.eigen(m, None, V)
        np.testing.assert_array_equal(e2, e0)
        np.testing.assert_array_equal(c2, c0)
        el, cl = schrodinger.eigen_host(m, V)
        assert np.abs(e0 - el).max() < 1e-12 * np.abs(el).max()
        assert np.abs(c0 - cl).max() < 1e-9 * np.abs(cl).max()


def test_emulated_eigen_follows_numerics_ipim(emulated_cuda, monkeypatch):
    """eigen runs the ipim variant of numerics.ipim; ipim refuses other variants."""
    ce = emulated_cuda.eigen
    m = model("mesh.NX=9", "mesh.NZ=11")
    with pytest.raises(ValueError, match="ipim variant"):
        ce.ipim(m, np.zeros((9, 3, m.N_sbn)), np.zeros((9, 3, 9)), variant="c")
    seen = []
    monkeypatch.setattr(ce, "ipim", lambda m, e, Dg, variant="a", block=32: seen.append(variant))
    V = np.ascontiguousarray(np.ones((9, 11)))
    for v in ("a", "b"):
        ce.eigen(model("mesh.NX=9", "mesh.NZ=11", f"numerics.ipim={v}"), None, V)
    assert seen == ["a", "b"]


def test_emulated_eigenvalues_store_the_diagonals(emulated_cuda):
    m = model("mesh.NX=9", "mesh.NZ=11")
    V = poisson.initcond(m, get_backend("numpy")).V
    _, Dg = emulated_cuda.eigen.eigenvalues(m, np.ascontiguousarray(V))
    for nu in range(3):
        kd, _ = schrodinger._kinetic(m, nu)
        np.testing.assert_array_equal(Dg[:, nu], kd[None, :] - V[:, 1:-1] - m.V_c[1:-1][None, :])


def test_ipim_maxm_bounds_the_matrices_of_a_block(emulated_cuda):
    """ipim_b's shared array holds ipim_maxm(NS, block) matrices: the most a block can touch."""
    ipim_maxm = emulated_cuda.eigen.ipim_maxm
    for NS in range(1, 9):
        for block in (32, 64, 128):
            span = max((t0 + block - 1) // NS - t0 // NS + 1 for t0 in range(0, 40 * block, block))
            assert span <= ipim_maxm(NS, block)
            assert ipim_maxm(NS, block) <= span + 1


# ---------------------------------------------------------------------------- GPU
def _coarse_V():
    m = model("mesh.NX=17", "mesh.NZ=33")
    ic = poisson.initcond(m, get_backend("numpy"))
    return m, ic


@pytest.mark.gpu
def test_cuda_eigenpairs_match_lapack(cupy_backend, rng):
    from solver.bsp.kernels.cuda import eigen
    m, ic = _coarse_V()
    for V in (ic.V, ic.V + 0.3 * rng.standard_normal(ic.V.shape)):
        e0, c0 = schrodinger.eigen_host(m, V)
        e1, c1 = eigen.eigen(m, cupy_backend, cupy_backend.asarray(V))
        e1, c1 = cupy_backend.to_numpy(e1), cupy_backend.to_numpy(c1)
        # LAPACK's bisection stops at ~ulp * ||T||: compare on that scale
        tnorm = max(np.abs(schrodinger._kinetic(m, nu)[0]).max() for nu in range(3)) + np.abs(V).max()
        assert np.abs(e1 - e0).max() < 1e-13 * tnorm
        assert np.abs(c1 - c0).max() < 1e-10 * np.abs(c0).max()
        # orthonormality on the device result: dz chi chi^T = I
        G = np.einsum("ivpz,ivqz->ivpq", c1, c1) * m.dz
        np.testing.assert_allclose(G, np.broadcast_to(np.eye(m.N_sbn), G.shape), atol=1e-12)


@pytest.mark.gpu
@pytest.mark.parametrize("mesh,host_ic", [(("mesh.NX=33", "mesh.NZ=33"), False),   # the coarse mesh
                                          (("mesh.NX=17", "mesh.NZ=65"), False),
                                          (("mesh.NX=17", "mesh.NZ=129"), True)])  # NZ > 127: host INITCOND
def test_cuda_ipim_variants_bitwise(cupy_backend, rng, mesh, host_ic):
    """ipim A and B (blocks of 32 and 64) agree bit for bit on the device, and schrodinger.eigen
    (the dispatched fast path) equals them, on the INITCOND state and a perturbed potential."""
    from solver.bsp.kernels.cuda import eigen
    xp = cupy_backend.xp
    m = model(*mesh)
    ic = poisson.initcond(m, get_backend("numpy") if host_ic else cupy_backend)
    V0 = xp.ascontiguousarray(xp.asarray(ic.V))
    for V in (V0, V0 + 0.3 * xp.asarray(rng.standard_normal(ic.V.shape))):
        e0, Dg0 = eigen.eigenvalues(m, V)
        c0 = eigen.ipim(m, e0, Dg0)
        for block in (32, 64):
            e1, Dg = eigen.eigenvalues(m, V, block=block)
            assert bool(xp.array_equal(e1, e0))
            for variant in ("a", "b"):
                c1 = eigen.ipim(m, e1, Dg, variant=variant, block=block)
                assert bool(xp.array_equal(c1, c0)), (block, variant)
        e2, c2 = schrodinger.eigen(m, cupy_backend, V)
        assert bool(xp.array_equal(e2, e0)) and bool(xp.array_equal(c2, c0))
