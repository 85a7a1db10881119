"""CUDA fast paths of the WENO phases (solver/bsp/kernels/cuda/weno.py + weno.cu) against the array
reference, for both variants of numerics.bte_kernels.

CPU tests: weno.cu compiled with g++ (``-ffp-contract=off``, like the device's ``--fmad=false``)
behind a stand-in ``cupy`` (conftest ``emulated_cuda``), so that the Python launchers and the
kernels' logic run end to end without a GPU.  ``exact``: the WENO terms equal the NumPy array path
bit for bit.  ``fast`` (FMAs written out, one division per face, WENO_phi by the coalesced tile
kernel): within 1e-12 relative (max |diff| / max |ref|), on random, smooth and on-grid levels,
closed contacts, segmented lines, partial tiles, the strided phi fallback and scaled Phi.
``fast2`` (WENO_x only: bsp_weno_dx with the fast2 faces, docs/performance-bte-kernels.md §13): within 1e-12
on the left- and right-biased lines, open (reference and hybrid contact rule) and closed contacts, segmented lines,
scaled Phi; the build per variant and eps (``x_defines``).

GPU tests (marked ``gpu``): each fast path on the cupy backend (numerics.kernels auto, checked to
dispatch to cuda/weno.py) against the array path on the same backend and on NumPy: exact bit for
bit against the CuPy array path, fast within 1e-12; two calls bitwise identical; and the fast
kernels' device results equal their host build bit for bit (the FMAs are explicit); the same for fast2's x term.
"""
import numpy as np
import pytest

from solver.backend import get_backend
from solver.bsp import kernels, weno

NP_BE = get_backend("numpy")
TOL = 1e-12


def _model(bte_cases, variant, **mesh):
    return bte_cases.model(kernels_mode="array", extra=(f"numerics.bte_kernels={variant}",), **mesh)


def _three(mod, m, be, d, closed=False, scale=1.0):
    """(x, w, phi) terms of ``mod`` (solver.bsp.weno or a fast-path module) on Phi * scale."""
    P = d["Phi"] * scale
    args = (d["rho_eq"][0] * scale, d["rho_eq"][-1] * scale, d["rho"][0] * scale, d["rho"][-1] * scale)
    return (mod.weno_x(m, be, P, *args, closed=closed), mod.weno_w(m, be, P, d["deps"]),
            mod.weno_phi(m, be, P, d["deps"], d["A"]))


def test_emulated_weno_compiled_without_contraction(emulated_cuda, bte_cases, rng):
    m = _model(bte_cases, "exact", NX=9, NS=1, NW=8, NPHI=4)
    d = bte_cases.inputs(m, rng, "random")
    emulated_cuda.weno.weno_w(m, NP_BE, d["Phi"], d["deps"])
    emulated_cuda.weno.weno_phi(_model(bte_cases, "fast", NX=9, NS=1, NW=8, NPHI=4), NP_BE, d["Phi"], d["deps"],
                                d["A"])
    opts = [o for code, o in emulated_cuda.cupy.compiled if "bsp_weno_dw" in code]
    assert opts and all("--fmad=false" in o for o in opts)
    assert any("-DBSP_WENO_FAST=1" in o and "-DNPHI_=4" in o and "-DLINES=384" in o for o in opts)
    assert any(not any(x.startswith("-D") for x in o) for o in opts)  # the exact build: no defines


@pytest.mark.parametrize("closed", [False, True])
def test_emulated_weno_exact_bitwise(emulated_cuda, bte_cases, rng, closed):
    m = _model(bte_cases, "exact", NX=9, NS=2, NW=20, NPHI=8)
    d = bte_cases.inputs(m, rng, "random")
    for ref, got in zip(_three(weno, m, NP_BE, d, closed), _three(emulated_cuda.weno, m, NP_BE, d, closed)):
        assert np.array_equal(ref, got), bte_cases.rel(got, ref)


@pytest.mark.parametrize("levels", ["random", "smooth", "grid"])
@pytest.mark.parametrize("closed", [False, True])
@pytest.mark.parametrize("mesh", [dict(NX=9, NS=2, NW=20, NPHI=8), dict(NX=10, NS=3, NW=13, NPHI=6),
                                  dict(NX=9, NS=1, NW=9, NPHI=4)])
def test_emulated_weno_fast_within_tolerance(emulated_cuda, bte_cases, rng, levels, closed, mesh):
    """NPHI = 6: LINES = 256 lines per tile, the last tile partial; NPHI = 4: the smallest periodic line."""
    m = _model(bte_cases, "fast", **mesh)
    d = bte_cases.inputs(m, rng, levels)
    refs, gots = _three(weno, m, NP_BE, d, closed), _three(emulated_cuda.weno, m, NP_BE, d, closed)
    for name, ref, got in zip("xwp", refs, gots):
        assert np.abs(ref).max() > 0
        r = bte_cases.rel(got, ref)
        assert r <= TOL, (name, r)


@pytest.mark.parametrize("scale", [1e-25, 1e25])
def test_emulated_weno_fast_scaled(emulated_cuda, bte_cases, rng, scale):
    """One division per face over the common denominator q0 q1 q2: no overflow or underflow for Phi
    scaled by 1e+-25 (smoothness indicators up to ~1e50)."""
    m = _model(bte_cases, "fast", NX=9, NS=2, NW=12, NPHI=8)
    d = bte_cases.inputs(m, rng, "random")
    for name, ref, got in zip("xwp", _three(weno, m, NP_BE, d, False, scale),
                              _three(emulated_cuda.weno, m, NP_BE, d, False, scale)):
        assert np.all(np.isfinite(got))
        assert bte_cases.rel(got, ref) <= TOL, (name, bte_cases.rel(got, ref))


def test_emulated_weno_fast_phi_strided_fallback(emulated_cuda, bte_cases, rng, monkeypatch):
    """Lines longer than MAX_TILE go to the strided phi kernel with the fast arithmetic."""
    cw = emulated_cuda.weno
    monkeypatch.setattr(cw, "MAX_TILE", 4)
    m = _model(bte_cases, "fast", NX=9, NS=2, NW=12, NPHI=8)
    d = bte_cases.inputs(m, rng, "random")
    n = len(emulated_cuda.cupy.compiled)
    got = cw.weno_phi(m, NP_BE, d["Phi"], d["deps"], d["A"])
    new = [o for code, o in emulated_cuda.cupy.compiled[n:]]
    assert all("-DNPHI_=8" not in o for o in new)
    assert bte_cases.rel(got, weno.weno_phi(m, NP_BE, d["Phi"], d["deps"], d["A"])) <= TOL


@pytest.mark.parametrize("variant", ["exact", "fast"])
def test_emulated_weno_segments(emulated_cuda, bte_cases, rng, monkeypatch, variant):
    """Lines cut into several segments (x and w; NPHI = 6: the partner angle m + 3)."""
    cw = emulated_cuda.weno
    monkeypatch.setattr(cw, "TARGET_THREADS", 1 << 22)
    monkeypatch.setattr(cw, "MIN_SEGMENT", 3)
    m = _model(bte_cases, variant, NX=10, NS=1, NW=17, NPHI=6)
    assert cw._segments(3 * 17 * 6, 10)[1] > 1 and cw._segments(10 * 3 * 6, 17)[1] > 1
    d = bte_cases.inputs(m, rng, "random")
    for closed in (False, True):
        for ref, got in zip(_three(weno, m, NP_BE, d, closed), _three(cw, m, NP_BE, d, closed)):
            if variant == "exact":
                assert np.array_equal(ref, got)
            else:
                assert bte_cases.rel(got, ref) <= TOL


# ------------------------------------------------------------- WENO_x, fast2 (docs/performance-bte-kernels.md §13)
def _x_args(d, rho=None):
    rho = d["rho"] if rho is None else rho
    return d["rho_eq"][0], d["rho_eq"][-1], rho[0], rho[-1]


def _deficit_rho(d):
    """rho short of rho_eq at the source (every valley, subband 0) and in valley 1 at the drain, in excess in valley 2
    there: the hybrid contact rule's ghosts differ from the reference rule's (tests/test_bsp_contact_rule.py)."""
    rho = d["rho"].copy()
    rho[0, :, 0] = 0.7 * d["rho_eq"][0, :, 0]
    rho[-1, 1, :] = 0.8 * d["rho_eq"][-1, 1, :]
    rho[-1, 2, :] = 1.3 * d["rho_eq"][-1, 2, :]
    return rho


def _fast2_x_check(cw, bte_cases, m, m1, d, args, closed):
    """x term of fast2 (m) against NumPy: within TOL over all lines, over the left-biased and over the
    right-biased lines each; a second call bitwise equal; returns (result, fast's result of m1)."""
    ref = weno.weno_x(m, NP_BE, d["Phi"], *args, closed=closed)
    got = cw.weno_x(m, NP_BE, d["Phi"], *args, closed=closed)
    again = cw.weno_x(m, NP_BE, d["Phi"], *args, closed=closed)
    assert np.array_equal(got, again)
    assert np.abs(ref).max() > 0 and np.all(np.isfinite(got))
    assert bte_cases.rel(got, ref) <= TOL, bte_cases.rel(got, ref)
    left = np.asarray(weno._phi_masks(m)[2], dtype=bool)  # (3, NW, NPHI): left-biased lines
    assert left.any() and (~left).any()
    for mask in (left, ~left):
        a, b = got.transpose(1, 3, 4, 0, 2)[mask], ref.transpose(1, 3, 4, 0, 2)[mask]
        assert np.abs(b).max() > 0 and bte_cases.rel(a, b) <= TOL, bte_cases.rel(a, b)
    return got, cw.weno_x(m1, NP_BE, d["Phi"], *args, closed=closed)


@pytest.mark.parametrize("levels", ["random", "smooth", "grid"])
@pytest.mark.parametrize("rule", ["reference", "hybrid"])
@pytest.mark.parametrize("mesh", [dict(NX=9, NS=2, NW=20, NPHI=8), dict(NX=10, NS=3, NW=13, NPHI=6),
                                  dict(NX=9, NS=1, NW=9, NPHI=4), dict(NX=17, NS=2, NW=11, NPHI=12)])
def test_emulated_weno_x_fast2_within_tolerance(emulated_cuda, bte_cases, rng, levels, rule, mesh):
    """numerics.bte_kernels fast2: bsp_weno_dx built with -DBSP_WENO_FAST2=1 (weno2_face12, one reciprocal per
    face, every line walked upwards, a right-biased face on its reversed stencil): within 1e-12 of weno.weno_x on NumPy for
    open contacts (reference rule, hybrid rule with a deficit and an excess) and closed ones, on the left- and the
    right-biased lines each; two calls bitwise equal; other rounding than fast somewhere (the fast2 faces ran)."""
    cw = emulated_cuda.weno
    extra = (f"numerics.contact_rule={rule}",)
    walk = ("numerics.bte_kernels=fast2", "numerics.wenox_kernel=walk")  # bsp_weno_dx (the tile: tests below)
    m = bte_cases.model(kernels_mode="array", extra=walk + extra, **mesh)
    m1 = bte_cases.model(kernels_mode="array", extra=("numerics.bte_kernels=fast",) + extra, **mesh)
    d = bte_cases.inputs(m, rng, levels)
    rho = _deficit_rho(d) if rule == "hybrid" else None
    differs = False
    for closed in (False, True):
        got, fast = _fast2_x_check(cw, bte_cases, m, m1, d, _x_args(d, rho), closed)
        differs |= not np.array_equal(got, fast)
    assert differs
    if rule == "hybrid":  # the hybrid ghosts acted: the reference rule's result is far from this one
        mr = bte_cases.model(kernels_mode="array", extra=walk, **mesh)
        ref = weno.weno_x(m, NP_BE, d["Phi"], *_x_args(d, rho))
        assert bte_cases.rel(cw.weno_x(mr, NP_BE, d["Phi"], *_x_args(d, rho)), ref) > 1e-6
    opts = [o for code, o in emulated_cuda.cupy.compiled if "bsp_weno_dx" in code and "-DBSP_WENO_FAST2=1" in o]
    assert opts and all("--fmad=false" in o and "-DBSP_WENO_FAST=1" in o for o in opts)


def test_emulated_weno_x_fast2_segments(emulated_cuda, bte_cases, rng, monkeypatch):
    """fast2 x lines cut into several segments (the last one shorter): each segment walks its own faces up
    (left-biased) or down (right-biased); the faces at segment ends are formed by both neighbours."""
    cw = emulated_cuda.weno
    monkeypatch.setattr(cw, "TARGET_THREADS", 1 << 22)
    monkeypatch.setattr(cw, "MIN_SEGMENT", 3)
    mesh = dict(NX=11, NS=1, NW=17, NPHI=6)
    assert cw._segments(3 * 17 * 6, 11) == (3, 4)
    m = bte_cases.model(kernels_mode="array", extra=("numerics.bte_kernels=fast2", "numerics.wenox_kernel=walk"), **mesh)
    m1 = bte_cases.model(kernels_mode="array", extra=("numerics.bte_kernels=fast",), **mesh)
    d = bte_cases.inputs(m, rng, "random")
    for closed in (False, True):
        _fast2_x_check(cw, bte_cases, m, m1, d, _x_args(d), closed)


@pytest.mark.parametrize("scale", [1e-25, 1e-9, 1e9, 1e25])
def test_emulated_weno_x_fast2_scaled(emulated_cuda, bte_cases, rng, scale):
    """One reciprocal of s = n0 + q0 (6 q2 + 3 q1) ~ IS^4 per x face (not the phi pair's s+ s- ~ IS^8): finite
    and within 1e-12 for Phi scaled by 1e+-25 (eps dominates the indicators at 1e-25; IS ~ 1e52 at 1e25)."""
    m = bte_cases.model(kernels_mode="array", extra=("numerics.bte_kernels=fast2",), NX=9, NS=2, NW=12, NPHI=8)
    d = bte_cases.inputs(m, rng, "random")
    args = tuple(a * scale for a in _x_args(d))
    for closed in (False, True):
        ref = weno.weno_x(m, NP_BE, d["Phi"] * scale, *args, closed=closed)
        got = emulated_cuda.weno.weno_x(m, NP_BE, d["Phi"] * scale, *args, closed=closed)
        assert np.all(np.isfinite(got))
        assert bte_cases.rel(got, ref) <= TOL, (scale, closed, bte_cases.rel(got, ref))


def test_x_defines(emulated_cuda, bte_cases):
    """The build of bsp_weno_dx per numerics.bte_kernels: exact none, fast -DBSP_WENO_FAST=1 (unchanged), fast2
    (the default) adds -DBSP_WENO_FAST2=1; fast2 with a WENO eps below FAST2_MIN_EPS falls back to fast's faces
    (the same limit as the fused kernel's)."""
    cw = emulated_cuda.weno
    mesh = dict(NX=9, NS=1, NW=20, NPHI=16)
    mk = lambda *e: bte_cases.model(extra=e, **mesh)  # noqa: E731
    assert cw.x_defines(mk("numerics.bte_kernels=exact"), 1e-6) == {}
    assert cw.x_defines(mk("numerics.bte_kernels=fast"), 1e-6) == {"BSP_WENO_FAST": 1}
    assert cw.x_defines(mk("numerics.bte_kernels=fast2"), 1e-6) == {"BSP_WENO_FAST": 1, "BSP_WENO_FAST2": 1}
    assert cw.x_defines(mk(), 1e-6) == {"BSP_WENO_FAST": 1, "BSP_WENO_FAST2": 1}  # the default
    assert cw.x_defines(mk("numerics.bte_kernels=fast2"), 1e-31) == {"BSP_WENO_FAST": 1}
    assert cw.FAST2_MIN_EPS == emulated_cuda.rk.FAST2_MIN_EPS == 1e-30
    tiny = mk("numerics.bte_kernels=fast2", "numerics.weno_eps=1.0e-31")
    d = bte_cases.inputs(tiny, np.random.default_rng(3), "random")
    n = len(emulated_cuda.cupy.compiled)
    got = cw.weno_x(tiny, NP_BE, d["Phi"], *_x_args(d))  # built as fast (a new build of the source, or the cached one)
    assert all("-DBSP_WENO_FAST2=1" not in o for code, o in emulated_cuda.cupy.compiled[n:])
    fast = cw.weno_x(mk("numerics.bte_kernels=fast", "numerics.weno_eps=1.0e-31"), NP_BE, d["Phi"], *_x_args(d))
    assert np.array_equal(got, fast)


# ------------------------------------------------- WENO_x, tile kernel (docs/performance-bte-kernels.md §19)
def _tile_pair(bte_cases, rule="reference", **mesh):
    """(walk model, tile model): fast2 with numerics.wenox_kernel walk and tile (the default)."""
    extra = ("numerics.bte_kernels=fast2", f"numerics.contact_rule={rule}")
    return (bte_cases.model(kernels_mode="array", extra=extra + ("numerics.wenox_kernel=walk",), **mesh),
            bte_cases.model(kernels_mode="array", extra=extra + ("numerics.wenox_kernel=tile",), **mesh))


TILE_MESHES = [dict(NX=9, NS=2, NW=20, NPHI=8), dict(NX=10, NS=3, NW=13, NPHI=6), dict(NX=9, NS=1, NW=9, NPHI=4),
               dict(NX=17, NS=2, NW=11, NPHI=12)]


@pytest.mark.parametrize("levels", ["random", "smooth"])
@pytest.mark.parametrize("rule", ["reference", "hybrid"])
@pytest.mark.parametrize("mesh", TILE_MESHES)
def test_emulated_weno_x_tile_equals_walk(emulated_cuda, bte_cases, rng, levels, rule, mesh):
    """numerics.wenox_kernel tile (bsp_weno_dx_tile: 32 lines x a segment of x in shared memory, one thread per
    face, then the differences) computes the walk's bits: open contacts (reference rule; hybrid rule with a deficit
    and an excess) and closed ones; lines not a multiple of 32 (702, 108, 1584 lines; the schema's NX >= 9: segments shorter than the 3-row halo
    in test_emulated_weno_x_tile_segments); within 1e-12 of NumPy on the left- and the right-biased lines (the walk's checks)."""
    cw = emulated_cuda.weno
    mw, mt = _tile_pair(bte_cases, rule, **mesh)
    assert cw.x_kernel(mw, 1e-6, mesh["NX"])[0] == "bsp_weno_dx"
    assert cw.x_kernel(mt, 1e-6, mesh["NX"])[0] == "bsp_weno_dx_tile"
    d = bte_cases.inputs(mw, rng, levels)
    args = _x_args(d, _deficit_rho(d) if rule == "hybrid" else None)
    for closed in (False, True):
        walk = cw.weno_x(mw, NP_BE, d["Phi"], *args, closed=closed)
        tile, _ = _fast2_x_check(cw, bte_cases, mt, mw, d, args, closed)  # tolerance vs NumPy, repeat-equal
        assert np.array_equal(tile, walk), (closed, bte_cases.rel(tile, walk))
    opts = [o for code, o in emulated_cuda.cupy.compiled if f"-DXSEG_={mesh['NX']}" in o]
    assert opts and all("-DBSP_WENO_FAST2=1" in o and "-DXWARPS=8" in o and "--fmad=false" in o for o in opts)
    sizes = (f"-DXNX={mesh['NX']}", f"-DXNS={mesh['NS']}", f"-DXNW={mesh['NW']}", f"-DXNPHI={mesh['NPHI']}")
    assert any(all(x in o for x in sizes) for o in opts)  # this mesh's compile-time sizes (section 20)


@pytest.mark.parametrize("seg,NX", [(4, 11), (2, 11), (12, 23)])
def test_emulated_weno_x_tile_segments(emulated_cuda, bte_cases, rng, monkeypatch, seg, NX):
    """The tile kernel over x segments (TILE_X_SEG = 4: segments 4, 4, 3 of NX = 11; 2: six segments, shorter than the
    3-row halo; 12: 12 + 11 of NX = 23, the compile-time row classes of section 20 with a shorter last segment): each block stages its segment with the neighbours' rows and forms its end faces itself; the same
    bits as the walk (itself segmented here), open and closed, reference and hybrid rule."""
    cw = emulated_cuda.weno
    monkeypatch.setattr(cw, "TILE_X_SEG", seg)
    monkeypatch.setattr(cw, "TARGET_THREADS", 1 << 22)
    monkeypatch.setattr(cw, "MIN_SEGMENT", 3)
    mesh = dict(NX=NX, NS=1, NW=17, NPHI=6)  # NX 23 in 12 + 11: the fine mesh's two unequal segments (section 20)
    name, defs = cw.x_kernel(_tile_pair(bte_cases, **mesh)[1], 1e-6, NX)
    assert name == "bsp_weno_dx_tile" and defs["XSEG_"] == seg and defs["XNX"] == NX
    for rule in ("reference", "hybrid"):
        mw, mt = _tile_pair(bte_cases, rule, **mesh)
        d = bte_cases.inputs(mw, rng, "random")
        args = _x_args(d, _deficit_rho(d) if rule == "hybrid" else None)
        for closed in (False, True):
            walk = cw.weno_x(mw, NP_BE, d["Phi"], *args, closed=closed)
            tile = cw.weno_x(mt, NP_BE, d["Phi"], *args, closed=closed)
            assert np.array_equal(tile, walk), (rule, closed, bte_cases.rel(tile, walk))
            assert bte_cases.rel(tile, weno.weno_x(mt, NP_BE, d["Phi"], *args, closed=closed)) <= TOL


def test_wenox_kernel_key_reaches_the_launch(emulated_cuda, bte_cases, rng, monkeypatch):
    """numerics.wenox_kernel: tile is the default (performance-bte-kernels §20.5); tile builds and launches
    bsp_weno_dx_tile (-DXSEG_, -DXWARPS, -DXMINB, the mesh sizes) only with fast2's faces: exact, fast and fast2 below
    FAST2_MIN_EPS run their walk, the key ignored (the same bits as with walk); walk builds bsp_weno_dx; run.json's
    record names the kernel; an unknown value is refused."""
    from solver.dispatch import Registry
    cw = emulated_cuda.weno
    mesh = dict(NX=9, NS=1, NW=20, NPHI=16)
    mk = lambda *e: bte_cases.model(extra=e, **mesh)  # noqa: E731
    walk = lambda *e: mk("numerics.wenox_kernel=walk", *e)  # noqa: E731
    assert kernels.wenox_kernel(mk()) == "tile"
    assert cw.x_kernel(mk(), 1e-6, 9) == cw.x_kernel(mk("numerics.wenox_kernel=tile"), 1e-6, 9)
    assert cw.x_kernel(walk(), 1e-6, 9) == ("bsp_weno_dx", {"BSP_WENO_FAST": 1, "BSP_WENO_FAST2": 1})
    tile = mk("numerics.wenox_kernel=tile")
    assert cw.x_kernel(tile, 1e-6, 9) == ("bsp_weno_dx_tile", {"BSP_WENO_FAST": 1, "BSP_WENO_FAST2": 1, "XSEG_": 9,
                                                               "XWARPS": cw.TILE_X_WARPS, "XMINB": cw.TILE_X_MINB,
                                                               "XNX": 9, "XNS": 1, "XNW": 20, "XNPHI": 16})
    assert cw.x_kernel(tile, 1e-6, 9, 2, 5, 4)[1] | {"XNS": 1, "XNW": 20, "XNPHI": 16} == cw.x_kernel(tile, 1e-6, 9)[1]
    assert {k: cw.x_kernel(tile, 1e-6, 9, 2, 5, 4)[1][k] for k in ("XNS", "XNW", "XNPHI")} == {"XNS": 2, "XNW": 5,
                                                                                               "XNPHI": 4}
    assert cw.x_kernel(tile, 1e-6, 129)[1]["XSEG_"] == 65 and cw.x_kernel(tile, 1e-6, 66)[1]["XSEG_"] == 66
    assert cw.x_kernel(tile, 1e-31, 9)[0] == "bsp_weno_dx"
    d = bte_cases.inputs(tile, rng, "random")
    for variant in ("exact", "fast"):
        m = mk(f"numerics.bte_kernels={variant}", "numerics.wenox_kernel=tile")
        assert cw.x_kernel(m, 1e-6, 9) == ("bsp_weno_dx", cw.x_defines(m, 1e-6))
        n = len(emulated_cuda.cupy.compiled)
        got = cw.weno_x(m, NP_BE, d["Phi"], *_x_args(d))
        assert all("-DXSEG_" not in " ".join(o) for _, o in emulated_cuda.cupy.compiled[n:])
        assert np.array_equal(got, cw.weno_x(walk(f"numerics.bte_kernels={variant}"), NP_BE, d["Phi"], *_x_args(d)))
    calls = []
    real = cw._build.function
    monkeypatch.setattr(cw._build, "function", lambda src, name, *a: calls.append(name) or real(src, name, *a))
    cw.weno_x(tile, NP_BE, d["Phi"], *_x_args(d))
    cw.weno_x(walk(), NP_BE, d["Phi"], *_x_args(d))
    cw.weno_x(mk(), NP_BE, d["Phi"], *_x_args(d))
    assert calls == ["bsp_weno_dx_tile", "bsp_weno_dx", "bsp_weno_dx_tile"]
    monkeypatch.setattr(kernels, "REGISTRY", Registry("bsp", {"cupy": lambda: emulated_cuda.TABLE}))
    be = type("B", (), {"name": "cupy"})()
    assert kernels.implementations(tile, be)["WENO_x"] == (
        "solver.bsp.kernels.cuda.weno.weno_x [numerics.bte_kernels=fast2, numerics.wenox_kernel=tile (bsp_weno_dx_tile)]")
    assert kernels.implementations(mk(), be)["WENO_x"] == kernels.implementations(tile, be)["WENO_x"]
    assert kernels.implementations(walk(), be)["WENO_x"] == (
        "solver.bsp.kernels.cuda.weno.weno_x [numerics.bte_kernels=fast2, numerics.wenox_kernel=walk (bsp_weno_dx)]")
    fast = mk("numerics.bte_kernels=fast", "numerics.wenox_kernel=tile")
    assert kernels.implementations(fast, be)["WENO_x"] == "solver.bsp.kernels.cuda.weno.weno_x [numerics.bte_kernels=fast]"
    tiny = mk("numerics.weno_eps=1.0e-31")  # fast2 below FAST2_MIN_EPS: fast's faces and the walk run
    assert cw.x_kernel(tiny, 1e-31, 9) == ("bsp_weno_dx", {"BSP_WENO_FAST": 1})
    assert kernels.implementations(tiny, be)["WENO_x"] == (
        "solver.bsp.kernels.cuda.weno.weno_x [numerics.bte_kernels=fast2 (as fast: numerics.weno_eps below 1e-30)]")
    assert kernels.implementations(tiny, be)["RK_wphi"].endswith("[numerics.bte_kernels=fast2 (as fast: "
                                                                "numerics.weno_eps below 1e-30)]")
    with pytest.raises(Exception, match="wenox_kernel"):
        mk("numerics.wenox_kernel=rows")


# ---------------------------------------------------------------------------- GPU
def _dev(cp, d):
    return {k: (cp.asarray(v) if isinstance(v, np.ndarray) else v) for k, v in d.items()}


def _gpu_model(bte_cases, mode, variant, **mesh):
    return bte_cases.model(kernels_mode=mode, extra=(f"numerics.bte_kernels={variant}",), **mesh)


@pytest.mark.gpu
@pytest.mark.parametrize("variant", ["exact", "fast"])
@pytest.mark.parametrize("levels", ["random", "smooth"])
@pytest.mark.parametrize("mesh", [dict(NX=9, NS=3, NW=40, NPHI=16), dict(NX=12, NS=2, NW=31, NPHI=10)])
def test_gpu_weno_fast_matches_array(cupy_backend, bte_cases, rng, levels, mesh, variant):
    from solver.bsp.kernels.cuda import weno as cw
    cp = cupy_backend.xp
    ma, mr = _gpu_model(bte_cases, "auto", variant, **mesh), _gpu_model(bte_cases, "array", variant, **mesh)
    for phase, fn in (("WENO_x", "weno_x"), ("WENO_w", "weno_w"), ("WENO_phi", "weno_phi")):
        assert kernels.lookup(ma, cupy_backend, phase) is getattr(cw, fn)
    d = _dev(cp, bte_cases.inputs(mr, rng, levels))
    for closed in (False, True):
        for name, fast, ref in zip("xwp", _three(weno, ma, cupy_backend, d, closed),
                                   _three(weno, mr, cupy_backend, d, closed)):
            r = bte_cases.rel(cp.asnumpy(fast), cp.asnumpy(ref))
            print(f"{variant} {name} closed={closed} {levels} {mesh}: max rel diff {r:.3e}")
            if variant == "exact":
                assert r == 0.0, (name, closed, r)
            assert r <= TOL, (name, closed, r)


@pytest.mark.gpu
@pytest.mark.parametrize("variant", ["exact", "fast"])
def test_gpu_weno_fast_matches_numpy_reference(cupy_backend, bte_cases, rng, variant):
    """The fast paths against the NumPy array path (the project's oracle), and two calls bitwise equal."""
    cp = cupy_backend.xp
    mesh = dict(NX=9, NS=2, NW=24, NPHI=48)
    ma, mr = _gpu_model(bte_cases, "auto", variant, **mesh), _gpu_model(bte_cases, "array", variant, **mesh)
    h = bte_cases.inputs(mr, rng, "random")
    d = _dev(cp, h)
    for closed in (False, True):
        fast = [cp.asnumpy(t) for t in _three(weno, ma, cupy_backend, d, closed)]
        again = [cp.asnumpy(t) for t in _three(weno, ma, cupy_backend, d, closed)]
        for name, f, a, ref in zip("xwp", fast, again, _three(weno, mr, NP_BE, h, closed)):
            assert bte_cases.rel(f, ref) <= TOL, (name, bte_cases.rel(f, ref))
            assert np.array_equal(f, a), name


@pytest.mark.gpu
def test_gpu_weno_fast_equals_its_host_build(cupy_backend, emulated_cuda, bte_cases, rng):
    """The fast kernels write their FMAs out and compile with --fmad=false: the device computes the
    bits of the g++ build that the CPU tests check."""
    cp = cupy_backend.xp
    mesh = dict(NX=9, NS=2, NW=24, NPHI=48)
    ma = _gpu_model(bte_cases, "auto", "fast", **mesh)
    h = bte_cases.inputs(ma, rng, "random")
    dev = [cp.asnumpy(t) for t in _three(weno, ma, cupy_backend, _dev(cp, h))]
    mh = _gpu_model(bte_cases, "auto", "fast", **mesh)  # its own device cache (host arrays)
    host = _three(emulated_cuda.weno, mh, NP_BE, h)
    for name, a, b in zip("xwp", dev, host):
        assert np.array_equal(a, b), (name, bte_cases.rel(a, b))


@pytest.mark.gpu
@pytest.mark.parametrize("rule", ["reference", "hybrid"])
@pytest.mark.parametrize("mesh", [dict(NX=9, NS=2, NW=24, NPHI=48), dict(NX=70, NS=1, NW=12, NPHI=96)])
def test_gpu_weno_x_fast2_matches_numpy_and_host_build(cupy_backend, emulated_cuda, bte_cases, rng, rule, mesh):
    """numerics.bte_kernels fast2 on the device (bsp_weno_dx with the fast2 faces; NX = 70: segmented
    lines): the x term within 1e-12 of weno.weno_x on NumPy (open contacts, reference or hybrid rule with a deficit,
    and closed), two calls bitwise equal, and the device bits equal the g++ host build's (FMAs written out,
    --fmad=false, __drcp_rn = the correctly rounded 1.0 / s)."""
    from solver.bsp.kernels.cuda import weno as cw
    cp = cupy_backend.xp
    extra = ("numerics.bte_kernels=fast2", "numerics.wenox_kernel=walk", f"numerics.contact_rule={rule}")
    ma = bte_cases.model(kernels_mode="auto", extra=extra, **mesh)
    mr = bte_cases.model(kernels_mode="array", extra=extra, **mesh)
    assert kernels.lookup(ma, cupy_backend, "WENO_x") is cw.weno_x
    assert cw.x_kernel(ma, weno._eps(ma), mesh["NX"]) == ("bsp_weno_dx", {"BSP_WENO_FAST": 1, "BSP_WENO_FAST2": 1})
    h = bte_cases.inputs(mr, rng, "random")
    args = _x_args(h, _deficit_rho(h) if rule == "hybrid" else None)
    P, dargs = cp.asarray(h["Phi"]), tuple(cp.asarray(a) for a in args)
    for closed in (False, True):
        got = cp.asnumpy(weno.weno_x(ma, cupy_backend, P, *dargs, closed=closed))
        again = cp.asnumpy(weno.weno_x(ma, cupy_backend, P, *dargs, closed=closed))
        ref = weno.weno_x(mr, NP_BE, h["Phi"], *args, closed=closed)
        host = emulated_cuda.weno.weno_x(bte_cases.model(kernels_mode="auto", extra=extra, **mesh), NP_BE, h["Phi"],
                                         *args, closed=closed)
        r = bte_cases.rel(got, ref)
        print(f"WENO_x fast2 {rule} closed={closed} {mesh}: max rel diff {r:.3e}")
        assert r <= TOL, (closed, r)
        assert np.array_equal(got, again), closed
        assert np.array_equal(got, host), (closed, bte_cases.rel(got, host))


@pytest.mark.gpu
@pytest.mark.parametrize("rule", ["reference", "hybrid"])
@pytest.mark.parametrize("mesh", [dict(NX=9, NS=2, NW=24, NPHI=48), dict(NX=70, NS=1, NW=12, NPHI=96),
                                  dict(NX=9, NS=1, NW=7, NPHI=10), dict(NX=129, NS=1, NW=8, NPHI=16)])
def test_gpu_weno_x_tile_equals_walk(cupy_backend, bte_cases, rng, rule, mesh):
    """numerics.wenox_kernel tile on the device (bsp_weno_dx_tile; NX = 70 and 129: two x segments per line; 210 lines:
    not a multiple of 32): the x term equals the walk's (bsp_weno_dx fast2) bit for bit, open (reference or hybrid
    rule with a deficit) and closed; two calls bitwise equal; within 1e-12 of weno.weno_x on NumPy."""
    from solver.bsp.kernels.cuda import weno as cw
    cp = cupy_backend.xp
    extra = ("numerics.bte_kernels=fast2", f"numerics.contact_rule={rule}")
    mw = bte_cases.model(kernels_mode="auto", extra=extra + ("numerics.wenox_kernel=walk",), **mesh)
    mt = bte_cases.model(kernels_mode="auto", extra=extra + ("numerics.wenox_kernel=tile",), **mesh)
    mr = bte_cases.model(kernels_mode="array", extra=extra, **mesh)
    assert kernels.lookup(mt, cupy_backend, "WENO_x") is cw.weno_x
    assert cw.x_kernel(mt, weno._eps(mt), mesh["NX"])[0] == "bsp_weno_dx_tile"
    h = bte_cases.inputs(mr, rng, "random")
    args = _x_args(h, _deficit_rho(h) if rule == "hybrid" else None)
    P, dargs = cp.asarray(h["Phi"]), tuple(cp.asarray(a) for a in args)
    for closed in (False, True):
        walk = cp.asnumpy(weno.weno_x(mw, cupy_backend, P, *dargs, closed=closed))
        tile = cp.asnumpy(weno.weno_x(mt, cupy_backend, P, *dargs, closed=closed))
        again = cp.asnumpy(weno.weno_x(mt, cupy_backend, P, *dargs, closed=closed))
        ref = weno.weno_x(mr, NP_BE, h["Phi"], *args, closed=closed)
        r = bte_cases.rel(tile, ref)
        print(f"WENO_x tile {rule} closed={closed} {mesh}: equal to walk {np.array_equal(tile, walk)}, "
              f"max rel diff vs NumPy {r:.3e}")
        assert np.array_equal(tile, walk), (closed, bte_cases.rel(tile, walk))
        assert np.array_equal(tile, again), closed
        assert r <= TOL, (closed, r)
