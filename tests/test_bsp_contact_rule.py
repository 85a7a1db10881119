"""numerics.contact_rule (docs/iv.md §9, §12): the hybrid inflow ghosts
a1 [min(r, 1) Phi(x_0) + max(rho_eq - rho, 0) s_w M], r = rho_eq/rho, against the reference rule
a1 r Phi(x_0) (physics.md §7): the same bits where no contact density falls short of rho_eq (r <= 1:
only the authors' factor acts); where one does, the ghosts hold the deficit injected with the start-up
shape, so a line whose Phi(x_0) is that shape has ghosts that carry exactly rho_eq.  The numba and CUDA
kernels (bsp_weno_dx: the array code's bits in the exact build) form the same ghosts within 1e-12, and
run.json says which rule ran."""
import numpy as np
import pytest

from solver.backend import get_backend
from solver.bsp import kernels, weno
from solver.bsp.model import Model, load

NP = get_backend("numpy")


def model(rule, NX=9, NS=2, NW=12, NPHI=8, kernels_mode="array"):
    return Model(load(None, [f"mesh.NX={NX}", f"mesh.N_sbn={NS}", f"mesh.NW={NW}", f"mesh.NPHI={NPHI}",
                             "mesh.NZ=17", f"numerics.kernels={kernels_mode}", f"numerics.contact_rule={rule}"]))


@pytest.fixture
def state(rng):
    m = model("reference")
    Phi = rng.random(m.shape) + 0.1
    rho_eq = rng.random((2, 3, m.N_sbn)) + 0.5
    return m, Phi, rho_eq


def x(m, Phi, rho_eq, rho):
    return weno.weno_x(m, NP, Phi, rho_eq[0], rho_eq[1], rho[0], rho[1])


@pytest.mark.parametrize("excess", [1.0, 1.3], ids=["rho=rho_eq", "excess"])
def test_hybrid_equals_the_reference_without_a_deficit(state, excess):
    m, Phi, rho_eq = state
    h = model("hybrid")
    rho = rho_eq * excess
    assert np.array_equal(x(h, Phi, rho_eq, rho), x(m, Phi, rho_eq, rho))


def test_a_deficit_changes_only_the_contact_nodes_of_inflow_lines(state):
    m, Phi, rho_eq = state
    h = model("hybrid")
    rho = rho_eq.copy()
    rho[0, 1, 0] *= 0.8  # valley 1, subband 0 short of rho_eq at the source
    a, b = x(h, Phi, rho_eq, rho), x(m, Phi, rho_eq, rho)
    d = np.abs(a - b)
    changed = np.argwhere(d > 0)
    assert len(changed) > 0
    assert set(changed[:, 1]) == {1} and set(changed[:, 2]) == {0}  # that valley and subband only
    assert changed[:, 0].max() <= 2  # the faces the three ghosts reach
    in_l = weno._phi_masks(m)[0][1]  # (NW, NPHI) inflow at the source
    assert not d[:, 1, 0][:, ~in_l].any()  # outflow lines keep constant extension


def test_deficit_ghost_of_a_start_up_shaped_line_carries_rho_eq(rng):
    """Phi(x_0) = rho s_w M on every line of one (nu, p) with rho < rho_eq: the hybrid ghost Phi is
    rho s_w M + (rho_eq - rho) s_w M = rho_eq s_w M, the start-up shape at the contact's density.
    The x derivative at x_0 of a field that is rho_eq s_w M at every x node is then zero on the
    inflow lines (the ghosts continue it), while the reference rule's ghost r Phi(x_0) = rho_eq s_w M too
    (for this shape the two rules agree: the mode needs Phi(x_0) off the shape)."""
    h, m = model("hybrid"), model("reference")
    shape = (m.s_w * m.maxwellian)  # (3, NW)
    rho_eq = rng.random((2, 3, m.N_sbn)) + 0.5
    Phi = np.broadcast_to(rho_eq[0][None, :, :, None, None] * shape[None, :, None, :, None], m.shape).copy()
    rho = rho_eq.copy()
    rho[0] *= 0.7
    Phi[0] *= 0.7  # the source node at 0.7 rho_eq (the drain at rho_eq)
    a, b = x(h, Phi, rho_eq, rho), x(m, Phi, rho_eq, rho)
    np.testing.assert_allclose(a, b, rtol=1e-13, atol=1e-13 * np.abs(b).max())


def test_hybrid_on_numba_matches_the_array_code_and_says_so(bte_cases, rng):
    pytest.importorskip("numba")
    from solver.bsp.kernels.numba import weno as nw
    be = get_backend("numba", threads=2)
    h, m = model("hybrid", kernels_mode="auto"), model("reference", kernels_mode="auto")
    assert kernels.lookup(h, be, "WENO_x") is nw.weno_x
    impl = kernels.implementations(h, be)
    assert impl["WENO_x"].endswith("[contact_rule hybrid]")
    assert "contact_rule" not in kernels.implementations(m, be)["WENO_x"]
    for variant in ("exact", "fast"):
        mesh = dict(NX=9, NS=2, NW=20, NPHI=8)
        mh, d, args = _deficit_case(bte_cases, rng, variant, mode="auto", **mesh)
        ma = bte_cases.model(kernels_mode="array", extra=(f"numerics.bte_kernels={variant}",
                                                          "numerics.contact_rule=hybrid"), **mesh)
        got, ref = weno.weno_x(mh, be, d["Phi"], *args), weno.weno_x(ma, NP, d["Phi"], *args)
        assert bte_cases.rel(got, ref) <= 1e-12
        mr = bte_cases.model(kernels_mode="auto", extra=(f"numerics.bte_kernels={variant}",), **mesh)
        assert bte_cases.rel(weno.weno_x(mr, be, d["Phi"], *args), ref) > 1e-6  # the rule acts


def _deficit_case(bte_cases, rng, variant, mode="array", **mesh):
    m = bte_cases.model(kernels_mode=mode, extra=(f"numerics.bte_kernels={variant}", "numerics.contact_rule=hybrid"),
                        **mesh)
    d = bte_cases.inputs(m, rng, "random")
    rho = d["rho"].copy()
    rho[0, :, 0] = 0.7 * d["rho_eq"][0, :, 0]  # a deficit at the source (every valley, subband 0)
    rho[-1, 1, :] = 0.8 * d["rho_eq"][-1, 1, :]  # and at the drain (valley 1)
    rho[-1, 2, :] = 1.3 * d["rho_eq"][-1, 2, :]  # an excess (valley 2)
    return m, d, (d["rho_eq"][0], d["rho_eq"][-1], rho[0], rho[-1])


@pytest.mark.parametrize("variant", ["exact", "fast", "fast2"])
def test_emulated_cuda_hybrid_matches_the_array_code(emulated_cuda, bte_cases, rng, variant):
    """bsp_weno_dx with the hybrid ghosts (g++ build of weno.cu): exact = the array code's bits, fast
    within 1e-12; and not the reference rule's result."""
    mesh = dict(NX=9, NS=2, NW=20, NPHI=8)
    m, d, args = _deficit_case(bte_cases, rng, variant, **mesh)
    ref = weno.weno_x(m, NP, d["Phi"], *args)
    got = emulated_cuda.weno.weno_x(m, NP, d["Phi"], *args)
    if variant == "exact":
        assert np.array_equal(got, ref), bte_cases.rel(got, ref)
    assert bte_cases.rel(got, ref) <= 1e-12
    mr = bte_cases.model(kernels_mode="array", extra=(f"numerics.bte_kernels={variant}",), **mesh)
    assert bte_cases.rel(emulated_cuda.weno.weno_x(mr, NP, d["Phi"], *args), ref) > 1e-6  # the rule acts


@pytest.mark.gpu
@pytest.mark.parametrize("variant", ["exact", "fast", "fast2"])
def test_gpu_hybrid_kernel_matches_numpy(cupy_backend, bte_cases, rng, variant):
    from solver.bsp.kernels.cuda import weno as cw
    cp = cupy_backend.xp
    mesh = dict(NX=9, NS=2, NW=24, NPHI=48)
    m, d, args = _deficit_case(bte_cases, rng, variant, mode="auto", **mesh)
    assert kernels.lookup(m, cupy_backend, "WENO_x") is cw.weno_x
    assert kernels.implementations(m, cupy_backend)["WENO_x"].endswith("[contact_rule hybrid]")
    ma = bte_cases.model(kernels_mode="array", extra=(f"numerics.bte_kernels={variant}", "numerics.contact_rule=hybrid"),
                         **mesh)
    dev = [cp.asarray(a) for a in args]
    got = cp.asnumpy(weno.weno_x(m, cupy_backend, cp.asarray(d["Phi"]), *dev))
    again = cp.asnumpy(weno.weno_x(m, cupy_backend, cp.asarray(d["Phi"]), *dev))
    ref = weno.weno_x(ma, NP, d["Phi"], *args)
    assert bte_cases.rel(got, ref) <= 1e-12 and np.array_equal(got, again)
    if variant == "exact":
        arr = cp.asnumpy(weno.weno_x(ma, cupy_backend, cp.asarray(d["Phi"]), *dev))
        assert np.array_equal(got, arr)


def test_unknown_rule_is_one_line():
    from solver.config import ConfigError
    with pytest.raises(ConfigError, match="numerics.contact_rule"):
        load(None, ["numerics.contact_rule=maxwell"])
