"""numerics.eigen = twisted (solver/bsp/kernels/cuda/eigen_tw.cu: eigenvalues_tw, two threads per
eigenvalue on the halves of a twisted factorization, and ipim_t, the LU once with the reciprocals
kept; docs/performance-iter-eigen.md) against eigen_nr.cu / eigen.cu (the kernels they replace as the
default), numpy.linalg.eigvalsh and LAPACK (schrodinger.eigen_host).

CPU tests: the g++ emulation (conftest ``emulated_cuda``: one OS thread per CUDA thread, the warp
shuffles and __reduce_max_sync through per-warp buffers and barriers, __shared__ per block), so the
pairing of lanes, the warp-uniform loop and the shared-memory layout run as on the device, except the
device's FMA contraction.  GPU tests (marked ``gpu``) on the device."""
import numpy as np
import pytest

from solver.backend import get_backend
from solver.bsp import poisson, schrodinger
from solver.bsp.model import Model, load

from eigen_cases import eigvalsh_levels as _eigvalsh, ic_V as _ic_V

NP = get_backend("numpy")
DBL_EPS = np.finfo(float).eps
TOL = 16 * DBL_EPS  # x ||T||, as tests/test_bsp_kernels_cuda_eigen.py


def model(*overrides):
    return Model(load(None, list(overrides)))


def _double_well_V(m, depth):
    z = np.linspace(-1.0, 1.0, m.NZ)
    prof = depth * np.exp(-((np.abs(z) - 0.7) / 0.08) ** 2)
    return np.ascontiguousarray(np.broadcast_to(prof, (m.NX, m.NZ)))


# NZ odd and even (N = NZ - 2 odd: halves of equal length; even: one node more forward), N_sbn that
# does not divide 32 (blocks straddle matrices), a partial last block
MESHES = [("mesh.NX=9", "mesh.NZ=17"), ("mesh.NX=9", "mesh.NZ=12", "mesh.N_sbn=5"),
          ("mesh.NX=9", "mesh.NZ=33", "mesh.N_sbn=4"), ("mesh.NX=9", "mesh.NZ=65")]


@pytest.mark.parametrize("mesh", MESHES)
def test_emulated_tw_cold_and_warm_match_nr_and_eigvalsh(emulated_cuda, mesh, rng):
    """Cold (bisection) and warm (Newton from the levels of V, solved at V + dV) eigenvalues_tw equal
    eigvalsh and eigenvalues_nr to 16 DBL_EPSILON ||T|| in about as many evaluations; the diagonals
    Dg are eigenvalues_nr's bitwise."""
    ce = emulated_cuda.eigen
    m = model(*mesh)
    V = _ic_V(m)
    e_cold, Dg_cold, its_cold = ce.eigenvalues_tw(m, V, iterations=True)
    e_nr, Dg_nr = ce.eigenvalues_nr(m, V)
    np.testing.assert_array_equal(Dg_cold, Dg_nr)
    el, tn = _eigvalsh(m, V)
    assert np.all(np.abs(e_cold - el) <= TOL * tn[..., None])
    assert np.all(np.abs(e_cold - e_nr) <= TOL * tn[..., None])
    assert its_cold.min() > 40
    for dv, cap in ((0.0, 4), (1e-6, 5), (1e-3, 6), (3e-2, 40)):
        V1 = np.ascontiguousarray(V + dv * np.abs(V).max() * rng.standard_normal(V.shape))
        e, Dg, its = ce.eigenvalues_tw(m, V1, e_cold, iterations=True)
        e_n, Dg_n, its_n = ce.eigenvalues_nr(m, V1, e_cold, iterations=True)
        np.testing.assert_array_equal(Dg, Dg_n)
        el, tn = _eigvalsh(m, V1)
        assert np.all(np.abs(e - el) <= TOL * tn[..., None]), dv
        assert np.all(np.abs(e - e_n) <= TOL * tn[..., None]), dv
        assert np.abs(e - e_n).max() <= 1e-12 * np.abs(e_n).max(), dv
        assert its.max() <= min(cap, its_n.max() + 1), (dv, its.max(), its_n.max())
        assert abs(its.mean() - its_n.mean()) <= 0.5, (dv, its.mean(), its_n.mean())


def test_emulated_tw_far_off_and_clustered(emulated_cuda):
    """The safeguard (far-off starts) and near-degenerate pairs (double wells) as for eigenvalues_nr."""
    ce = emulated_cuda.eigen
    m = model("mesh.NX=9", "mesh.NZ=33")
    V = _ic_V(m)
    el, tn = _eigvalsh(m, V)
    span = el.max() - el.min()
    starts = {"below": el - 100 * span, "above": el + 1e6 * span, "nan": np.full_like(el, np.nan),
              "reversed": el[..., ::-1].copy(), "all at level 0": np.repeat(el[..., :1], el.shape[-1], -1)}
    for name, e0 in starts.items():
        e, _, its = ce.eigenvalues_tw(m, V, np.ascontiguousarray(e0), iterations=True)
        assert np.all(np.abs(e - el) <= TOL * tn[..., None]), name
        assert its.max() < 400, name
    m = model("mesh.NX=9", "mesh.NZ=65", "mesh.N_sbn=6")
    for depth in (2e2, 5e3):
        V = _double_well_V(m, depth)
        el, tn = _eigvalsh(m, V)
        e_cold, _ = ce.eigenvalues_tw(m, V)
        assert np.all(np.abs(e_cold - el) <= TOL * tn[..., None]), depth
        for e_prev in (e_cold, el + 1e-6 * np.abs(el).max()):
            e, _, its = ce.eigenvalues_tw(m, V, np.ascontiguousarray(e_prev), iterations=True)
            assert np.all(np.abs(e - el) <= TOL * tn[..., None]), depth
            assert np.all(np.diff(e, axis=-1) >= -TOL * tn[..., None])


@pytest.mark.parametrize("mesh", MESHES)
def test_emulated_ipim_t_matches_ipim_a_and_lapack(emulated_cuda, mesh, rng):
    """ipim_t from the same eigenvalues and diagonals as ipim_a: the vectors to 1e-13 of ipim_a and
    to 1e-9 of LAPACK (the bound of test_bsp_kernels_cuda_eigen), orthonormal to 1e-12; the matrix
    from shared memory and blocks of 64 give the same bits."""
    ce = emulated_cuda.eigen
    m = model(*mesh)
    ic = poisson.initcond(m, NP)
    for V in (np.ascontiguousarray(ic.V), ic.V + 0.3 * rng.standard_normal(ic.V.shape)):
        e0, Dg = ce.eigenvalues(m, V)
        ca = ce.ipim(m, e0, Dg, variant="a")
        ct = ce.ipim_t(m, e0, Dg)
        np.testing.assert_array_equal(ce.ipim_t(m, e0, Dg, shared=True), ct)  # the matrix from shared memory
        np.testing.assert_array_equal(ce.ipim_t(m, e0, Dg, block=64), ct)
        assert np.abs(ct - ca).max() <= 1e-13 * np.abs(ca).max()
        el, cl = schrodinger.eigen_host(m, V)
        assert np.abs(ct - cl).max() < 1e-9 * np.abs(cl).max()
        G = np.einsum("ivpz,ivqz->ivpq", ct, ct) * m.dz
        np.testing.assert_allclose(G, np.broadcast_to(np.eye(m.N_sbn), G.shape), atol=1e-12)


@pytest.mark.parametrize("mesh", MESHES[:3])
def test_emulated_candidates_rcp_and_carry(emulated_cuda, mesh, rng):
    """The candidates of eigen_tw.cu (off by default, docs/performance-iter-eigen.md §5): TW_CARRY
    gives ipim_t's bits; TW_RCP (one division per node) keeps the levels within 16 DBL_EPSILON ||T||
    of eigvalsh and eigenvalues_nr in as many evaluations (+1), the vectors within 1e-13 of ipim_a."""
    ce = emulated_cuda.eigen
    m = model(*mesh)
    V = _ic_V(m)
    e_prev, _ = ce.eigenvalues_nr(m, V)
    e_cold, _ = ce.eigenvalues_tw(m, V, rcp=True)
    el, tn = _eigvalsh(m, V)
    assert np.all(np.abs(e_cold - el) <= TOL * tn[..., None])
    for dv in (1e-6, 1e-3):
        V1 = np.ascontiguousarray(V + dv * np.abs(V).max() * rng.standard_normal(V.shape))
        e_n, Dg_n, its_n = ce.eigenvalues_nr(m, V1, e_prev, iterations=True)
        e_r, Dg_r, its_r = ce.eigenvalues_tw(m, V1, e_prev, iterations=True, rcp=True)
        np.testing.assert_array_equal(Dg_r, Dg_n)
        el, tn = _eigvalsh(m, V1)
        assert np.all(np.abs(e_r - el) <= TOL * tn[..., None]) and np.all(np.abs(e_r - e_n) <= TOL * tn[..., None])
        assert its_r.max() <= its_n.max() + 1
        ca, ct = ce.ipim(m, e_n, Dg_n, variant="a"), ce.ipim_t(m, e_n, Dg_n)
        np.testing.assert_array_equal(ce.ipim_t(m, e_n, Dg_n, carry=True), ct)
        for kw in ({"rcp": True}, {"rcp": True, "carry": True}):
            c = ce.ipim_t(m, e_n, Dg_n, **kw)
            assert np.abs(c - ca).max() <= 1e-13 * np.abs(ca).max(), kw


def test_emulated_eigen_twisted_is_the_default(emulated_cuda, rng):
    """numerics.eigen auto = twisted: eigen runs eigenvalues_tw + ipim_t (bitwise their results),
    numerics.ipim is not used; newton stays eigenvalues_nr + ipim."""
    ce = emulated_cuda.eigen
    mesh = ("mesh.NX=9", "mesh.NZ=17")
    V = _ic_V(model(*mesh))
    m = model(*mesh)
    e_prev, _ = ce.eigenvalues_tw(m, V)
    V1 = np.ascontiguousarray(V + 1e-3 * np.abs(V).max() * rng.standard_normal(V.shape))
    e, Dg = ce.eigenvalues_tw(m, V1, e_prev, rcp=True)  # numerics.eigen_division auto = reciprocal
    chi = ce.ipim_t(m, e, Dg, rcp=True, carry=True)
    for v in ("auto", "twisted"):
        for ip in ("a", "b"):
            e2, c2 = ce.eigen(model(*mesh, f"numerics.eigen={v}", f"numerics.ipim={ip}"), None, V1, e_prev)
            np.testing.assert_array_equal(e2, e)
            np.testing.assert_array_equal(c2, chi)
    ed, Dgd = ce.eigenvalues_tw(m, V1, e_prev)  # divide: the first form
    e5, c5 = ce.eigen(model(*mesh, "numerics.eigen_division=divide"), None, V1, e_prev)
    np.testing.assert_array_equal(e5, ed)
    np.testing.assert_array_equal(c5, ce.ipim_t(m, ed, Dgd))
    assert not np.array_equal(c5, chi)  # the two forms round differently somewhere
    assert np.abs(e5 - e).max() <= 1e-12 * np.abs(e).max()
    assert np.abs(c5 - chi).max() <= 1e-12 * np.abs(chi).max()
    e3, c3 = ce.eigen(model(*mesh, "numerics.eigen=newton"), None, V1, e_prev)
    e4, Dg4 = ce.eigenvalues_nr(m, V1, e_prev)
    np.testing.assert_array_equal(e3, e4)
    np.testing.assert_array_equal(c3, ce.ipim(m, e4, Dg4))


def test_emulated_tw_refuses_partial_warps_and_tiny_meshes(emulated_cuda):
    ce = emulated_cuda.eigen
    m = model("mesh.NX=9", "mesh.NZ=17")
    with pytest.raises(ValueError, match="whole warps"):
        ce.eigenvalues_tw(m, _ic_V(m), block=48)
    with pytest.raises(ValueError, match="NZ >= 5"):
        ce._tw_function("ipim_t", 2, 6, 32)


# ---------------------------------------------------------------------------- GPU
@pytest.mark.gpu
@pytest.mark.parametrize("mesh", [("mesh.NX=65", "mesh.NZ=65"), ("mesh.NX=65", "mesh.NZ=129"),
                                  ("mesh.NX=17", "mesh.NZ=12", "mesh.N_sbn=5")])
def test_cuda_twisted_matches_newton(cupy_backend, mesh, rng):
    """On the device, warm after a 1e-3 change of V: eigenvalues_tw within 16 DBL_EPSILON ||T|| of
    eigenvalues_nr and eigvalsh (and 1e-12 relative), iterations within one of it; ipim_t within 1e-12
    of ipim_a from the same eigenvalues; both kernels bitwise repeatable; eigen (auto) = them."""
    from solver.bsp.kernels.cuda import eigen
    xp = cupy_backend.xp
    m = model(*mesh)
    V0 = _ic_V(m)
    V = xp.asarray(V0)
    e_prev, _ = eigen.eigenvalues_nr(m, V)
    V1 = V + 1e-3 * float(xp.abs(V).max()) * xp.asarray(rng.standard_normal(V.shape))
    e_n, Dg_n, its_n = eigen.eigenvalues_nr(m, V1, e_prev, iterations=True)
    e_t, Dg_t, its_t = eigen.eigenvalues_tw(m, V1, e_prev, iterations=True)
    assert bool(xp.array_equal(Dg_t, Dg_n))
    el, tn = _eigvalsh(m, cupy_backend.to_numpy(V1))
    en, et = cupy_backend.to_numpy(e_n), cupy_backend.to_numpy(e_t)
    assert np.all(np.abs(et - en) <= TOL * tn[..., None]) and np.all(np.abs(et - el) <= TOL * tn[..., None])
    assert np.abs(et - en).max() <= 1e-12 * np.abs(en).max()
    assert int(its_t.max()) <= int(its_n.max()) + 1
    ca, ct = eigen.ipim(m, e_n, Dg_n), eigen.ipim_t(m, e_n, Dg_n)
    assert float(xp.abs(ct - ca).max()) <= 1e-12 * float(xp.abs(ca).max())
    assert bool(xp.array_equal(eigen.ipim_t(m, e_n, Dg_n, shared=True), ct))
    assert bool(xp.array_equal(eigen.eigenvalues_tw(m, V1, e_prev, block=32)[0], e_t))
    for _ in range(2):
        e2, Dg2 = eigen.eigenvalues_tw(m, V1, e_prev)
        assert bool(xp.array_equal(e2, e_t)) and bool(xp.array_equal(eigen.ipim_t(m, e_n, Dg_n), ct))
    e3, c3 = schrodinger.eigen(m, cupy_backend, V1, e_prev)  # the default: eigen_division reciprocal
    e_r, Dg_r = eigen.eigenvalues_tw(m, V1, e_prev, rcp=True)
    assert bool(xp.array_equal(e3, e_r)) and bool(xp.array_equal(c3, eigen.ipim_t(m, e_r, Dg_r, rcp=True, carry=True)))
    assert float(xp.abs(e_r - e_t).max()) <= 1e-12 * float(xp.abs(e_t).max())  # H200: ~1.6e-14


@pytest.mark.gpu
@pytest.mark.parametrize("mesh", [("mesh.NX=65", "mesh.NZ=65"), ("mesh.NX=17", "mesh.NZ=12", "mesh.N_sbn=5")])
def test_cuda_twisted_kernels_in_modules_of_their_own_are_bitwise_the_shared_module(cupy_backend, mesh, rng,
                                                                                   monkeypatch):
    """eigen.TW_KERNELS builds eigenvalues_tw and ipim_t each in a module of its own (TW_KERNEL 1 / 2, a
    fresh machine's start-up compiles them in parallel): the same bits as both kernels from one
    module (TW_KERNEL 0), cold and warm, with the default reciprocal and with the division."""
    from solver.bsp.kernels.cuda import eigen
    xp = cupy_backend.xp
    m = model(*mesh)
    V = xp.asarray(_ic_V(m))
    V1 = V + 1e-3 * float(xp.abs(V).max()) * xp.asarray(rng.standard_normal(V.shape))

    def run():
        out = []
        for r in (False, True):
            e0, _ = eigen.eigenvalues_tw(m, V, rcp=r, carry=r)
            e, Dg = eigen.eigenvalues_tw(m, V1, e0, rcp=r, carry=r)
            out += [e0, e, eigen.ipim_t(m, e, Dg, rcp=r, carry=r)]
        return out

    split = run()
    monkeypatch.setattr(eigen, "TW_KERNELS", {"eigenvalues_tw": 0, "ipim_t": 0})
    shared = run()
    assert all(bool(xp.array_equal(a, b)) for a, b in zip(split, shared))
