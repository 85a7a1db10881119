"""CUDA fast path of the eigen phase (solver/bsp/kernels/cuda/eigen.py + eigen.cu + eigen_nr.cu):
the kernels ``eigenvalues`` (bisection), ``eigenvalues_nr`` (warm-started Newton-Raphson, variant
numerics.eigen = newton) and ``ipim`` (variants A and B) against LAPACK (schrodinger.eigen_host)
and numpy.linalg.eigvalsh.

CPU tests: the .cu sources compiled with g++ behind a stand-in ``cupy`` (conftest ``emulated_cuda``;
one OS thread per CUDA thread where a kernel synchronises, __shared__ shared by the block), so that
the Python launchers (launch shapes, the shared-memory bound) and the kernels run end to end without
a GPU.  GPU tests (marked ``gpu``) on the device.
"""
import numpy as np
import pytest

from solver.backend import get_backend
from solver.bsp import poisson, schrodinger
from solver.bsp.model import Model, load

from eigen_cases import eigvalsh_levels as _eigvalsh, ic_V as _ic_V

NP = get_backend("numpy")
DBL_EPS = np.finfo(float).eps
TOL = 16 * DBL_EPS  # x ||T||: the accuracy of a Sturm count (bisection and eigvalsh differ by up to ~9 here)


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
        e2, c2 = ce.eigen(model(*mesh, "numerics.eigen=newton"), None, V)
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
        ce.eigen(model("mesh.NX=9", "mesh.NZ=11", f"numerics.ipim={v}", "numerics.eigen=newton"), None, V)
    assert seen == ["a", "b"]


def test_emulated_eigen_follows_numerics_eigen(emulated_cuda, monkeypatch):
    """numerics.eigen: newton = eigenvalues_nr from the levels passed in, bisection = the kernel
    eigenvalues (levels ignored), twisted (and auto) = eigenvalues_tw + ipim_t."""
    ce = emulated_cuda.eigen
    seen = []
    monkeypatch.setattr(ce, "eigenvalues_nr", lambda m, V, levels=None: seen.append(("nr", levels)) or (1, 2))
    monkeypatch.setattr(ce, "eigenvalues", lambda m, V: seen.append(("bisection",)) or (1, 2))
    monkeypatch.setattr(ce, "ipim", lambda m, e, Dg, variant="a": "chi")
    monkeypatch.setattr(ce, "eigenvalues_tw", lambda m, V, levels=None, **k: seen.append(("tw", levels)) or (1, 2))
    monkeypatch.setattr(ce, "ipim_t", lambda m, e, Dg, **k: "chi_t")
    for v in ("newton", "bisection"):
        assert ce.eigen(model("mesh.NX=9", "mesh.NZ=11", f"numerics.eigen={v}"), None, "V", "levels") == (1, "chi")
    for v in ("auto", "twisted"):
        assert ce.eigen(model("mesh.NX=9", "mesh.NZ=11", f"numerics.eigen={v}"), None, "V", "levels") == (1, "chi_t")
    ce.eigen(model("mesh.NX=9", "mesh.NZ=11", "numerics.eigen=newton"), None, "V")
    assert seen == [("nr", "levels"), ("bisection",), ("tw", "levels"), ("tw", "levels"), ("nr", None)]


def test_newton_loop_passes_the_previous_levels(monkeypatch):
    """poisson._newton_loop calls eigen with the levels of the current iterate (the warm start):
    none for the first solve of a problem, then the eps of the previous call."""
    calls = []
    real = schrodinger.eigen

    def spy(m, backend, V, levels=None):
        out = real(m, backend, V, levels)
        calls.append((None if levels is None else np.array(levels), out[0].copy()))
        return out

    monkeypatch.setattr(schrodinger, "eigen", spy)
    res = poisson.initcond(model("mesh.NX=9", "mesh.NZ=13", "mesh.N_sbn=3"), NP)
    assert res.converged and len(calls) == res.iterations + 1
    assert calls[0][0] is None
    for (_, prev), (levels, _) in zip(calls, calls[1:]):
        np.testing.assert_array_equal(levels, prev)


# ---------------------------------------------------------------------------- Newton-Raphson eigenvalues


NR_MESHES = [("mesh.NX=9", "mesh.NZ=17"), ("mesh.NX=9", "mesh.NZ=33", "mesh.N_sbn=4"), ("mesh.NX=9", "mesh.NZ=65")]


@pytest.mark.parametrize("mesh", NR_MESHES)
def test_emulated_nr_cold_start_is_the_bisection_bitwise(emulated_cuda, mesh, rng):
    ce = emulated_cuda.eigen
    m = model(*mesh)
    V0 = _ic_V(m)
    for V in (V0, np.ascontiguousarray(V0 + 0.3 * rng.standard_normal(V0.shape))):
        e_ref, Dg_ref = ce.eigenvalues(m, V)
        e, Dg, its = ce.eigenvalues_nr(m, V, iterations=True)
        np.testing.assert_array_equal(e, e_ref)
        np.testing.assert_array_equal(Dg, Dg_ref)
        assert its.min() > 40  # bisection from the Gershgorin interval to the last bit
        el, tn = _eigvalsh(m, V)
        assert np.all(np.abs(e - el) <= TOL * tn[..., None])


@pytest.mark.parametrize("mesh", NR_MESHES)
@pytest.mark.parametrize("dv", [0.0, 1e-6, 1e-3, 3e-2])
def test_emulated_nr_warm_start_converges_in_a_few_steps(emulated_cuda, mesh, dv, rng):
    """Levels of V warm-start the solve at V + dV (dV: a Newton update of relative size dv); the
    result equals eigvalsh and the bisection to ~DBL_EPSILON ||T||, in a few evaluations."""
    ce = emulated_cuda.eigen
    m = model(*mesh)
    V = _ic_V(m)
    e_prev, _ = ce.eigenvalues_nr(m, V)
    V1 = np.ascontiguousarray(V + dv * np.abs(V).max() * rng.standard_normal(V.shape))
    e, Dg, its = ce.eigenvalues_nr(m, V1, e_prev, iterations=True)
    e_bis, Dg_bis = ce.eigenvalues(m, V1)
    np.testing.assert_array_equal(Dg, Dg_bis)
    el, tn = _eigvalsh(m, V1)
    assert np.all(np.abs(e - el) <= TOL * tn[..., None])
    assert np.all(np.abs(e - e_bis) <= TOL * tn[..., None])
    assert its.max() <= {0.0: 4, 1e-6: 5, 1e-3: 6, 3e-2: 16}[dv]


def test_emulated_nr_far_off_starts_fall_back_on_bisection(emulated_cuda):
    """Start values far from the levels (all equal, outside the spectrum, the wrong order, NaN,
    the next level's value): the safeguard still returns eigenvalue p."""
    ce = emulated_cuda.eigen
    m = model("mesh.NX=9", "mesh.NZ=33")
    V = _ic_V(m)
    el, tn = _eigvalsh(m, V)
    span = el.max() - el.min()
    starts = {"zeros": np.zeros_like(el), "below": el - 100 * span, "above": el + 1e6 * span,
              "reversed": el[..., ::-1].copy(), "nan": np.full_like(el, np.nan),
              "next level": np.concatenate([el[..., 1:], el[..., -1:] + span], axis=-1),
              "all at level 0": np.repeat(el[..., :1], el.shape[-1], axis=-1)}
    for name, e0 in starts.items():
        e, _, its = ce.eigenvalues_nr(m, V, np.ascontiguousarray(e0), iterations=True)
        assert np.all(np.abs(e - el) <= TOL * tn[..., None]), name
        assert its.max() < 400, name  # converged, not the iteration cap


def _double_well_V(m, depth):
    """A potential symmetric in z with two deep wells at the oxide interfaces: the two lowest
    levels of every valley split by tunnelling only (nearly degenerate pairs)."""
    z = np.linspace(-1.0, 1.0, m.NZ)
    prof = depth * np.exp(-((np.abs(z) - 0.7) / 0.08) ** 2)
    return np.ascontiguousarray(np.broadcast_to(prof, (m.NX, m.NZ)))


def test_emulated_nr_clustered_levels(emulated_cuda):
    """Near-degenerate pairs (gaps down to ~1e-9 of the levels and below): warm starts from the
    converged, shifted and reversed levels return both members of every pair."""
    ce = emulated_cuda.eigen
    m = model("mesh.NX=9", "mesh.NZ=65", "mesh.N_sbn=6")
    for depth in (2e2, 1e3, 5e3):
        V = _double_well_V(m, depth)
        el, tn = _eigvalsh(m, V)
        gaps = np.diff(el, axis=-1).min(axis=-1)
        e_cold, _ = ce.eigenvalues_nr(m, V)
        for start, e_prev in (("cold levels", e_cold), ("shifted", el + 1e-6 * np.abs(el).max()),
                              ("reversed", el[..., ::-1].copy())):
            e, _, its = ce.eigenvalues_nr(m, V, np.ascontiguousarray(e_prev), iterations=True)
            assert np.all(np.abs(e - el) <= TOL * tn[..., None]), (depth, start)
            assert np.all(np.diff(e, axis=-1) >= -TOL * tn[..., None])  # ordered up to rounding
            # the double step on degenerate pairs keeps the mean well below bisection's ~55
            assert its.mean() < {"cold levels": 3, "shifted": 25, "reversed": 40}[start]
    assert gaps.min() < 1e-9 * np.abs(el).max()  # the deepest wells do make a cluster


def test_emulated_nr_levels_shape_is_checked(emulated_cuda):
    m = model("mesh.NX=9", "mesh.NZ=17")
    with pytest.raises(ValueError, match="levels"):
        emulated_cuda.eigen.eigenvalues_nr(m, _ic_V(m), np.zeros((9, 3, m.N_sbn + 1)))


def test_emulated_nr_compiles_once_for_every_mesh(emulated_cuda):
    """eigen_nr.cu takes N at run time: one module (no defines) serves every NZ."""
    fake = emulated_cuda.cupy
    for NZ in (11, 13):
        m = model("mesh.NX=9", f"mesh.NZ={NZ}")
        emulated_cuda.eigen.eigenvalues_nr(m, _ic_V(m))
    nr = [opts for code, opts in fake.compiled if "void eigenvalues_nr(" in code]
    assert nr and all(opts == ("-std=c++14",) for opts in nr)
    assert len([k for k in emulated_cuda._build._modules if k[0] == "eigen_nr.cu"]) == 1


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
        e2, c2 = schrodinger.eigen(model(*mesh, "numerics.eigen=newton"), cupy_backend, V)
        assert bool(xp.array_equal(e2, e0)) and bool(xp.array_equal(c2, c0))


@pytest.mark.gpu
@pytest.mark.parametrize("mesh", [("mesh.NX=33", "mesh.NZ=33"), ("mesh.NX=17", "mesh.NZ=129")])
def test_cuda_eigenvalues_nr(cupy_backend, mesh, rng):
    """eigenvalues_nr on the device: cold = the bisection bitwise; warm after a 1e-3 change of V
    within 16 DBL_EPSILON ||T|| of the bisection in at most 7 Sturm evaluations."""
    from solver.bsp.kernels.cuda import eigen
    xp = cupy_backend.xp
    m = model(*mesh)
    V = xp.asarray(_ic_V(m))
    e_bis, Dg_bis = eigen.eigenvalues(m, V)
    e_cold, Dg = eigen.eigenvalues_nr(m, V)
    assert bool(xp.array_equal(e_cold, e_bis)) and bool(xp.array_equal(Dg, Dg_bis))
    V1 = V + 1e-3 * float(xp.abs(V).max()) * xp.asarray(rng.standard_normal(V.shape))
    e1, _, its = eigen.eigenvalues_nr(m, V1, e_bis, iterations=True)
    e1_bis, _ = eigen.eigenvalues(m, V1)
    _, tn = _eigvalsh(m, cupy_backend.to_numpy(V1))
    assert np.all(cupy_backend.to_numpy(xp.abs(e1 - e1_bis)) <= TOL * tn[..., None])
    assert int(its.max()) <= 7
    # the dispatched fast path with levels (numerics.eigen = newton) is the same kernel
    e2, _ = schrodinger.eigen(model(*mesh, "numerics.eigen=newton"), cupy_backend, V1, e_bis)
    assert bool(xp.array_equal(e2, e1))
