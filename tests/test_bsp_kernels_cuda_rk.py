"""The RK phase: the reference ``bte.rk_update`` (what rhs + rk3_combine + DENS compute, bit for bit),
``bte.advance`` with and without the fast path, and the CUDA fast path (solver/bsp/kernels/cuda/rk.py
+ rk.cu: the stage update fused with the loss product, the sum of the terms and DENS).

CPU tests: rk.cu compiled with g++ behind a stand-in ``cupy`` (conftest ``emulated_cuda``): Phi^{s+1},
rho and PhiHat within 1e-12 relative (max |diff| / max |ref|) of the NumPy reference for the three
stages, with and without scattering, NPHI = 4, 6, 8, 48 (full and partial tiles).  The fused stage
kernel (``stage_update``, key RK_wphi: WENO w + phi + RK + DENS, bsp_wphi_rk of weno.cu): equal to
the separate fast kernels bit for bit and within 1e-12 of the NumPy reference ``bte.stage_update``
(one and several chunks of energy rows per plane).  GPU tests (marked ``gpu``): the same against
NumPy on the device, two calls bitwise equal, and the device bits equal the host build's.
"""
import numpy as np
import pytest

from solver.backend import get_backend
from solver.bsp import bte, dens, kernels, scattering
from solver.dispatch import Registry

NP_BE = get_backend("numpy")
TOL = 1e-12


def _parts(bte_cases, m, rng):
    d = bte_cases.inputs(m, rng, "random")
    P = d["Phi"]
    P0 = P * (1.0 + 0.2 * rng.random(P.shape))
    G = scattering.scat_gain(m, NP_BE, d["PhiHat"], d["eps"], d["W"])
    Lc = scattering.scat_loss(m, NP_BE, d["eps"], d["W"])
    scale = np.abs(G).max() / np.abs(P).max()
    terms = tuple(scale * rng.standard_normal(P.shape) for _ in range(3))
    return d, P0, P, G, Lc, terms


def _stage_data(m, d, scattering_on=True):
    return bte.StageData(eps=d["eps"], deps_dx=d["deps"], W=d["W"], PhiHat=d["PhiHat"], rho=d["rho"],
                         rho_eq=d["rho_eq"], A_eps=d["A"], scattering=scattering_on)


@pytest.mark.parametrize("scat", [True, False])
def test_rk_update_is_rhs_plus_rk3_combine_plus_dens(bte_cases, rng, scat):
    """The reference of the fast path computes what the array path computes, bit for bit."""
    m = bte_cases.model(NX=9, NS=2, NW=12, NPHI=8, kernels_mode="array")
    d, P0, P, *_ = _parts(bte_cases, m, rng)
    sd = _stage_data(m, d, scat)
    dt = 0.3 * m.dt_max(d["A"])
    for s in range(3):
        L = bte.rhs(m, NP_BE, P, sd)
        ref = bte.rk3_combine(s, P0, P, L, dt)
        G, Lc, terms = bte.rhs_parts(m, NP_BE, P, sd)
        assert (G is None) == (not scat)
        got, rho, PhiHat = bte.rk_update(m, NP_BE, s, P0, P, G, Lc, terms, dt)
        assert np.array_equal(got, ref)
        r2, PH2 = dens.dens(m, NP_BE, ref)
        assert np.array_equal(rho, r2) and np.array_equal(PhiHat, PH2)
        adv, dn = bte.advance(m, NP_BE, s, P0, P, sd, dt)  # no RK fast path on numpy
        assert dn is None and np.array_equal(adv, ref)


@pytest.mark.parametrize("scat", [True, False])
@pytest.mark.parametrize("mesh", [dict(NX=9, NS=2, NW=20, NPHI=8), dict(NX=9, NS=3, NW=13, NPHI=6),
                                  dict(NX=9, NS=1, NW=7, NPHI=4), dict(NX=9, NS=2, NW=10, NPHI=48)])
def test_emulated_rk_matches_reference(emulated_cuda, bte_cases, rng, mesh, scat):
    """NPHI = 6 and 48: the last block's tile is partial (nline not a multiple of LINES)."""
    m = bte_cases.model(kernels_mode="array", **mesh)
    d, P0, P, G, Lc, terms = _parts(bte_cases, m, rng)
    dt = 0.3 * m.dt_max(d["A"])
    if not scat:
        G = Lc = None
    for s in range(3):
        ref = bte.rk_update(m, NP_BE, s, P0, P, G, Lc, terms, dt)
        got = emulated_cuda.rk.rk_update(m, NP_BE, s, P0, P, G, Lc, terms, dt)
        for name, a, b in zip(("Phi", "rho", "PhiHat"), got, ref):
            assert a.shape == b.shape and a.dtype == b.dtype
            assert bte_cases.rel(a, b) <= TOL, (s, name, bte_cases.rel(a, b))
    opts = [o for code, o in emulated_cuda.cupy.compiled if "bsp_rk_dens" in code]
    assert opts and all("--fmad=false" in o for o in opts)


def test_emulated_advance_with_the_rk_fast_path(emulated_cuda, bte_cases, rng, monkeypatch):
    """bte.advance through the hooks (every BTE phase, RK and the fused RK_wphi emulated) against the
    array path: one stage within 1e-12, the densities returned with it."""
    table = {p: emulated_cuda.TABLE[p] for p in ("WENO_x", "WENO_w", "WENO_phi", "scat_gain", "scat_loss", "RK",
                                                  "RK_wphi")}
    monkeypatch.setattr(kernels, "REGISTRY", Registry("bsp", {"numpy": lambda: table}))
    mesh = dict(NX=9, NS=2, NW=16, NPHI=8)
    ma, mr = bte_cases.model(kernels_mode="auto", **mesh), bte_cases.model(kernels_mode="array", **mesh)
    d, P0, P, *_ = _parts(bte_cases, mr, rng)
    dt = 0.3 * mr.dt_max(d["A"])
    for s in range(3):
        ref, dn0 = bte.advance(mr, NP_BE, s, P0, P, _stage_data(mr, d), dt)
        got, dn = bte.advance(ma, NP_BE, s, P0, P, _stage_data(ma, d), dt)
        assert dn0 is None and dn is not None
        assert bte_cases.rel(got, ref) <= TOL
        rho, PhiHat = dens.dens(mr, NP_BE, ref)
        assert bte_cases.rel(dn[0], rho) <= TOL and bte_cases.rel(dn[1], PhiHat) <= TOL


def test_stage_update_is_w_phi_plus_rk_update(bte_cases, rng):
    """The reference of the fused kernel: rk_update on the w and phi terms of Phi, bit for bit."""
    m = bte_cases.model(NX=9, NS=2, NW=12, NPHI=8, kernels_mode="array")
    d, P0, P, G, Lc, terms = _parts(bte_cases, m, rng)
    dt = 0.3 * m.dt_max(d["A"])
    sd = _stage_data(m, d)
    _, _, (tx, tw, tp) = bte.rhs_parts(m, NP_BE, P, sd)
    for s in range(3):
        got = bte.stage_update(m, NP_BE, s, P0, P, G, Lc, tx, d["deps"], d["A"], dt)
        ref = bte.rk_update(m, NP_BE, s, P0, P, G, Lc, (tx, tw, tp), dt)
        assert all(np.array_equal(a, b) for a, b in zip(got, ref))


@pytest.mark.parametrize("mesh, shared, scat", [(dict(NX=9, NS=2, NW=13, NPHI=8), None, True),  # one chunk per plane
                                                (dict(NX=9, NS=1, NW=11, NPHI=6), 8 * 7 * 6 + 4 * 6 + 4 * 8 * (7 + 12 + 24), False),
                                                (dict(NX=9, NS=1, NW=30, NPHI=48), None, True),  # 15 + 15 rows
                                                # NPHI < 6: angles 1, 2 are copied to both ends of the padded phi rows
                                                (dict(NX=9, NS=1, NW=9, NPHI=4), None, True)])
def test_emulated_stage_update_matches_reference(emulated_cuda, bte_cases, rng, monkeypatch, mesh, shared, scat):
    """bsp_wphi_rk (rows in chunks with halos, the bottom face of two columns of one block, the top
    face, a last chunk shorter than the others) equals the separate fast kernels (WENO_w, the phi
    tile kernel, bsp_rk_dens) bit for bit and the NumPy reference within 1e-12."""
    rk = emulated_cuda.rk
    if shared is not None:  # 4 rows per block: chunks 4 + 4 + 3
        monkeypatch.setattr(rk, "SHARED", shared)
        assert rk.rows_per_block(mesh["NW"], mesh["NPHI"]) == 4
    m = bte_cases.model(kernels_mode="array", extra=FAST, **mesh)  # fast: the faces of the separate kernels
    d, P0, P, G, Lc, terms = _parts(bte_cases, m, rng)
    tx = terms[0]
    if not scat:
        G = Lc = None
    dt = 0.3 * m.dt_max(d["A"])
    tw = emulated_cuda.weno.weno_w(m, NP_BE, P, d["deps"])
    tp = emulated_cuda.weno.weno_phi(m, NP_BE, P, d["deps"], d["A"])
    for s in range(3):
        ref = bte.stage_update(m, NP_BE, s, P0, P, G, Lc, tx, d["deps"], d["A"], dt)
        got = rk.stage_update(m, NP_BE, s, P0, P, G, Lc, tx, d["deps"], d["A"], dt)
        split = rk.rk_update(m, NP_BE, s, P0, P, G, Lc, (tx, tw, tp), dt)
        for name, a, b, c in zip(("Phi", "rho", "PhiHat"), got, ref, split):
            assert a.shape == b.shape and a.dtype == b.dtype
            assert bte_cases.rel(a, b) <= TOL, (s, name, bte_cases.rel(a, b))
            assert np.array_equal(a, c), (s, name, bte_cases.rel(a, c))
    opts = [o for code, o in emulated_cuda.cupy.compiled if "bsp_wphi_rk" in code]
    assert any("-DLROWS=4" in o for o in opts) or shared is None
    assert all("--fmad=false" in o and "-DBSP_WENO_FAST=1" in o for o in opts if any("LROWS" in x for x in o))


FAST2 = ("numerics.bte_kernels=fast2",)
FAST = ("numerics.bte_kernels=fast",)  # the default is fast2 (docs/performance-bte-kernels.md §12.4)


@pytest.mark.parametrize("mesh, shared, scat", [(dict(NX=9, NS=2, NW=13, NPHI=8), None, True),  # one chunk per plane
                                                (dict(NX=9, NS=1, NW=11, NPHI=6), 8 * 7 * 6 + 4 * 6 + 4 * 8 * (7 + 12 + 24), False),
                                                (dict(NX=9, NS=1, NW=30, NPHI=48), None, True),  # 15 + 15 rows
                                                (dict(NX=9, NS=1, NW=9, NPHI=4), None, True)])
def test_emulated_stage_update_fast2_matches_reference(emulated_cuda, bte_cases, rng, monkeypatch, mesh, shared, scat):
    """numerics.bte_kernels: fast2 (bsp_wphi_rk built with -DBSP_WENO_FAST2=1: the w and phi faces in fewer
    FP64 operations, one division per phi face pair, faces times 12): within 1e-12 of the NumPy reference
    bte.stage_update per stage, and so are the w + phi terms alone (the increment Phi^1 - Phi with tx = 0 and
    no scattering); other rounding than fast (not bit-equal to it); two calls bitwise equal."""
    rk = emulated_cuda.rk
    if shared is not None:  # 4 rows per block: chunks 4 + 4 + 3
        monkeypatch.setattr(rk, "SHARED", shared)
        assert rk.rows_per_block(mesh["NW"], mesh["NPHI"]) == 4
    m = bte_cases.model(kernels_mode="array", extra=FAST2, **mesh)
    m1 = bte_cases.model(kernels_mode="array", extra=FAST, **mesh)  # fast
    d, P0, P, G, Lc, terms = _parts(bte_cases, m, rng)
    tx = terms[0]
    if not scat:
        G = Lc = None
    dt = 0.3 * m.dt_max(d["A"])
    differs = False
    for s in range(3):
        ref = bte.stage_update(m, NP_BE, s, P0, P, G, Lc, tx, d["deps"], d["A"], dt)
        got = rk.stage_update(m, NP_BE, s, P0, P, G, Lc, tx, d["deps"], d["A"], dt)
        again = rk.stage_update(m, NP_BE, s, P0, P, G, Lc, tx, d["deps"], d["A"], dt)
        fast = rk.stage_update(m1, NP_BE, s, P0, P, G, Lc, tx, d["deps"], d["A"], dt)
        for name, a, b, c, f in zip(("Phi", "rho", "PhiHat"), got, ref, again, fast):
            assert a.shape == b.shape and a.dtype == b.dtype
            assert bte_cases.rel(a, b) <= TOL, (s, name, bte_cases.rel(a, b))
            assert np.array_equal(a, c), (s, name)
            differs |= not np.array_equal(a, f)
    assert differs  # the fast2 faces ran (their rounding differs from fast's somewhere)
    zero = np.zeros_like(P)
    ref = bte.stage_update(m, NP_BE, 0, P0, P, None, None, zero, d["deps"], d["A"], dt)[0] - P
    got = rk.stage_update(m, NP_BE, 0, P0, P, None, None, zero, d["deps"], d["A"], dt)[0] - P
    assert bte_cases.rel(got, ref) <= TOL, bte_cases.rel(got, ref)
    opts = [o for code, o in emulated_cuda.cupy.compiled  # the fused kernel's builds (LROWS), not WENO_x's fast2 build
            if "bsp_wphi_rk" in code and "-DBSP_WENO_FAST2=1" in o and any(x.startswith("-DLROWS=") for x in o)]
    assert opts and all("--fmad=false" in o and "-DBSP_WENO_FAST=1" in o and "-DWPHI_BLOCK=256" in o for o in opts)


@pytest.mark.parametrize("scale", [1e-9, 1e9])
def test_emulated_stage_update_fast2_scaled(emulated_cuda, bte_cases, rng, scale):
    """fast2's one division per phi face pair (s+ s- ~ IS^8): Phi scaled by 1e-9 (eps dominates the
    smoothness indicators) and 1e+9 (differences of g ~1e9: s+ s- ~ 1e150) stays within 1e-12 of NumPy."""
    mesh = dict(NX=9, NS=1, NW=20, NPHI=16)
    m = bte_cases.model(kernels_mode="array", extra=FAST2, **mesh)
    d, P0, P, G, Lc, terms = _parts(bte_cases, m, rng)
    P, P0 = P * scale, P0 * scale
    dt = 0.3 * m.dt_max(d["A"])
    zero = np.zeros_like(P)
    for s in range(2):
        ref = bte.stage_update(m, NP_BE, s, P0, P, None, None, zero, d["deps"], d["A"], dt)
        got = emulated_cuda.rk.stage_update(m, NP_BE, s, P0, P, None, None, zero, d["deps"], d["A"], dt)
        assert np.isfinite(got[0]).all()
        for name, a, b in zip(("Phi", "rho", "PhiHat"), got, ref):
            assert bte_cases.rel(a, b) <= TOL, (scale, s, name, bte_cases.rel(a, b))
        inc = bte_cases.rel(got[0] - P, ref[0] - P)
        assert inc <= TOL, (scale, s, inc)


def test_wphi_defines(emulated_cuda, bte_cases):
    """The build of bsp_wphi_rk per numerics.bte_kernels: fast = -DBSP_WENO_FAST=1 (unchanged); fast2 adds
    -DBSP_WENO_FAST2=1 and the block size; fast2 with a WENO eps below FAST2_MIN_EPS (s+ s- could underflow)
    falls back to fast's faces."""
    rk = emulated_cuda.rk
    mesh = dict(NX=9, NS=1, NW=20, NPHI=16)
    base = {"BSP_WENO_FAST": 1, "NPHI_": 16, "LROWS": 20}
    assert rk.wphi_defines(bte_cases.model(extra=FAST, **mesh), 16, 20) == base
    assert rk.wphi_defines(bte_cases.model(extra=FAST2, **mesh), 16, 20) == dict(base, BSP_WENO_FAST2=1, WPHI_BLOCK=256)
    assert rk.wphi_defines(bte_cases.model(**mesh), 16, 20) == dict(base, BSP_WENO_FAST2=1, WPHI_BLOCK=256)  # default
    assert rk.BLOCK == 256  # __launch_bounds__(256, 6) of bsp_wphi_rk
    tiny = bte_cases.model(extra=FAST2 + ("numerics.weno_eps=1.0e-31",), **mesh)
    assert rk.wphi_defines(tiny, 16, 20) == base


def test_rows_per_block(emulated_cuda):
    """Energy rows of bsp_wphi_rk: the most that fit SHARED (36 KB) of shared memory, spread evenly
    over the chunks of a plane; 0 (the separate kernels) where not one row fits or NPHI < 3."""
    rows = emulated_cuda.rk.rows_per_block
    assert emulated_cuda.rk.SHARED == 36 * 1024
    assert rows(300, 48) == 16  # at most 16 rows: 19 chunks (the last 12)
    assert rows(600, 96) == 7  # at most 7: 86 chunks of 7 (the last 5)
    assert rows(150, 24) == 30  # at most 33: 5 chunks
    assert rows(10, 48) == 10
    assert rows(300, 2000) == 0
    assert rows(40, 2) == 0


# ---------------------------------------------------------------------------- GPU
def _dev(cp, xs):
    return [None if x is None else cp.asarray(x) for x in xs]


@pytest.mark.gpu
@pytest.mark.parametrize("scat", [True, False])
def test_gpu_rk_matches_numpy_reference(cupy_backend, bte_cases, rng, scat):
    from solver.bsp.kernels.cuda import rk
    cp = cupy_backend.xp
    mesh = dict(NX=9, NS=3, NW=40, NPHI=48)
    ma, mr = bte_cases.model(kernels_mode="auto", **mesh), bte_cases.model(kernels_mode="array", **mesh)
    assert kernels.lookup(ma, cupy_backend, "RK") is rk.rk_update
    exact = bte_cases.model(kernels_mode="auto", extra=("numerics.bte_kernels=exact",), **mesh)
    assert kernels.lookup(exact, cupy_backend, "RK") is None
    d, P0, P, G, Lc, terms = _parts(bte_cases, mr, rng)
    if not scat:
        G = Lc = None
    dt = 0.3 * mr.dt_max(d["A"])
    P0g, Pg, Gg, Lcg = _dev(cp, (P0, P, G, Lc))
    tg = tuple(_dev(cp, terms))
    for s in range(3):
        ref = bte.rk_update(mr, NP_BE, s, P0, P, G, Lc, terms, dt)
        got = [cp.asnumpy(x) for x in rk.rk_update(ma, cupy_backend, s, P0g, Pg, Gg, Lcg, tg, dt)]
        again = [cp.asnumpy(x) for x in rk.rk_update(ma, cupy_backend, s, P0g, Pg, Gg, Lcg, tg, dt)]
        for name, a, b, c in zip(("Phi", "rho", "PhiHat"), got, ref, again):
            r = bte_cases.rel(a, b)
            print(f"RK s={s} scat={scat} {name}: max rel diff {r:.3e}")
            assert r <= TOL, (s, name, r)
            assert np.array_equal(a, c), (s, name)


@pytest.mark.gpu
def test_gpu_rk_equals_its_host_build(cupy_backend, emulated_cuda, bte_cases, rng):
    """FMAs written out, --fmad=false, fixed summation orders: the device computes the host build's bits."""
    from solver.bsp.kernels.cuda import rk
    cp = cupy_backend.xp
    mesh = dict(NX=9, NS=2, NW=24, NPHI=48)
    m = bte_cases.model(kernels_mode="auto", **mesh)
    d, P0, P, G, Lc, terms = _parts(bte_cases, m, rng)
    dt = 0.3 * m.dt_max(d["A"])
    P0g, Pg, Gg, Lcg = _dev(cp, (P0, P, G, Lc))
    for s in range(3):
        dev = [cp.asnumpy(x) for x in rk.rk_update(m, cupy_backend, s, P0g, Pg, Gg, Lcg, tuple(_dev(cp, terms)), dt)]
        host = emulated_cuda.rk.rk_update(m, NP_BE, s, P0, P, G, Lc, terms, dt)
        for name, a, b in zip(("Phi", "rho", "PhiHat"), dev, host):
            assert np.array_equal(a, b), (s, name, bte_cases.rel(a, b))


@pytest.mark.gpu
@pytest.mark.parametrize("mesh", [dict(NX=9, NS=2, NW=60, NPHI=48), dict(NX=9, NS=1, NW=40, NPHI=96),
                                  dict(NX=9, NS=1, NW=30, NPHI=24)])
def test_gpu_stage_update_matches_numpy_and_host_build(cupy_backend, emulated_cuda, bte_cases, rng, mesh):
    """The fused kernel on the device (numerics.bte_kernels fast): within 1e-12 of bte.stage_update on NumPy,
    two calls bitwise equal, the same bits as the separate device kernels and as the host build."""
    from solver.bsp.kernels.cuda import rk, weno as cweno
    cp = cupy_backend.xp
    fast = ("numerics.bte_kernels=fast",)  # not the default fast2, whose faces the separate kernels do not share
    ma, mr = bte_cases.model(kernels_mode="auto", extra=fast, **mesh), bte_cases.model(kernels_mode="array", **mesh)
    assert kernels.lookup(ma, cupy_backend, "RK_wphi") is rk.stage_update
    d, P0, P, G, Lc, terms = _parts(bte_cases, mr, rng)
    dt = 0.3 * mr.dt_max(d["A"])
    tx = terms[0]
    P0g, Pg, Gg, Lcg, txg, dg = _dev(cp, (P0, P, G, Lc, tx, d["deps"]))
    split_terms = (txg, cweno.weno_w(ma, cupy_backend, Pg, dg), cweno.weno_phi(ma, cupy_backend, Pg, dg, d["A"]))
    for s in range(3):
        ref = bte.stage_update(mr, NP_BE, s, P0, P, G, Lc, tx, d["deps"], d["A"], dt)
        got = [cp.asnumpy(x) for x in rk.stage_update(ma, cupy_backend, s, P0g, Pg, Gg, Lcg, txg, dg, d["A"], dt)]
        again = [cp.asnumpy(x) for x in rk.stage_update(ma, cupy_backend, s, P0g, Pg, Gg, Lcg, txg, dg, d["A"], dt)]
        split = [cp.asnumpy(x) for x in rk.rk_update(ma, cupy_backend, s, P0g, Pg, Gg, Lcg, split_terms, dt)]
        host = emulated_cuda.rk.stage_update(ma, NP_BE, s, P0, P, G, Lc, tx, d["deps"], d["A"], dt)
        for name, a, b, c, e, h in zip(("Phi", "rho", "PhiHat"), got, ref, again, split, host):
            r = bte_cases.rel(a, b)
            print(f"RK_wphi {mesh} s={s} {name}: max rel diff {r:.3e}")
            assert r <= TOL, (s, name, r)
            assert np.array_equal(a, c) and np.array_equal(a, e) and np.array_equal(a, h), (s, name)


@pytest.mark.gpu
@pytest.mark.parametrize("mesh", [dict(NX=9, NS=2, NW=60, NPHI=48), dict(NX=9, NS=1, NW=40, NPHI=96),
                                  dict(NX=9, NS=1, NW=30, NPHI=24)])
def test_gpu_stage_update_fast2_matches_numpy_and_host_build(cupy_backend, emulated_cuda, bte_cases, rng, mesh):
    """numerics.bte_kernels: fast2 on the device: within 1e-12 of bte.stage_update on NumPy (and so are the
    w + phi terms alone), two calls bitwise equal, the same bits as the host build (FMAs written out,
    --fmad=false, IEEE division)."""
    from solver.bsp.kernels.cuda import rk
    cp = cupy_backend.xp
    ma = bte_cases.model(kernels_mode="auto", extra=FAST2, **mesh)
    mr = bte_cases.model(kernels_mode="array", extra=FAST2, **mesh)
    assert kernels.lookup(ma, cupy_backend, "RK_wphi") is rk.stage_update
    d, P0, P, G, Lc, terms = _parts(bte_cases, mr, rng)
    dt = 0.3 * mr.dt_max(d["A"])
    tx = terms[0]
    P0g, Pg, Gg, Lcg, txg, dg = _dev(cp, (P0, P, G, Lc, tx, d["deps"]))
    for s in range(3):
        ref = bte.stage_update(mr, NP_BE, s, P0, P, G, Lc, tx, d["deps"], d["A"], dt)
        got = [cp.asnumpy(x) for x in rk.stage_update(ma, cupy_backend, s, P0g, Pg, Gg, Lcg, txg, dg, d["A"], dt)]
        again = [cp.asnumpy(x) for x in rk.stage_update(ma, cupy_backend, s, P0g, Pg, Gg, Lcg, txg, dg, d["A"], dt)]
        host = emulated_cuda.rk.stage_update(ma, NP_BE, s, P0, P, G, Lc, tx, d["deps"], d["A"], dt)
        for name, a, b, c, h in zip(("Phi", "rho", "PhiHat"), got, ref, again, host):
            r = bte_cases.rel(a, b)
            print(f"RK_wphi fast2 {mesh} s={s} {name}: max rel diff {r:.3e}")
            assert r <= TOL, (s, name, r)
            assert np.array_equal(a, c) and np.array_equal(a, h), (s, name, bte_cases.rel(a, h))
    zero = np.zeros_like(P)
    ref = bte.stage_update(mr, NP_BE, 0, P0, P, None, None, zero, d["deps"], d["A"], dt)[0] - P
    got = cp.asnumpy(rk.stage_update(ma, cupy_backend, 0, P0g, Pg, None, None, cp.asarray(zero), dg, d["A"], dt)[0]) - P
    r = bte_cases.rel(got, ref)
    print(f"RK_wphi fast2 {mesh} w + phi terms: max rel diff {r:.3e}")
    assert r <= TOL, r


@pytest.mark.gpu
def test_gpu_run_with_rk_fast_path_resumes_bitwise(cupy_backend, tmp_path):
    """Killed after its checkpoint and resumed, a GPU run with the RK fast path (densities in the
    kernel's summation order) writes the same bytes as the uninterrupted run."""
    from solver.bsp.model import load
    from solver.bsp.simulation import Simulation

    cfg = load(None, ["mesh.N_sbn=3", "mesh.NX=17", "mesh.NZ=17", "mesh.NW=40", "mesh.NPHI=12",
                      "numerics.backend=cupy", "time.steps=5", "time.t_end_ps=null",
                      "output.checkpoint_every_steps=2", "output.progress=false"])

    class DiesAfter(Simulation):
        def step(self):
            super().step()
            if self.state.step == 3:
                raise KeyboardInterrupt

    a, b = tmp_path / "a", tmp_path / "b"
    Simulation(cfg, cupy_backend, a, progress=False).run()
    with pytest.raises(KeyboardInterrupt):
        DiesAfter(cfg, cupy_backend, b, progress=False).run()
    Simulation(cfg, cupy_backend, b, progress=False).run(resume=True)
    for name in ("profiles.csv", "scalars.csv"):
        assert (a / name).read_bytes() == (b / name).read_bytes(), name
