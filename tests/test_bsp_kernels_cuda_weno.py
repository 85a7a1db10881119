"""CUDA fast paths of the WENO phases (solver/bsp/kernels/cuda/weno.py + weno.cu) against the array
reference, for both variants of numerics.bte_kernels.

CPU tests: weno.cu compiled with g++ (``-ffp-contract=off``, like the device's ``--fmad=false``)
behind a stand-in ``cupy`` (conftest ``emulated_cuda``), so that the Python launchers and the
kernels' logic run end to end without a GPU.  ``exact``: the WENO terms equal the NumPy array path
bit for bit.  ``fast`` (FMAs written out, one division per face, WENO_phi by the coalesced tile
kernel): within 1e-12 relative (max |diff| / max |ref|), on random, smooth and on-grid levels,
closed contacts, segmented lines, partial tiles, the strided phi fallback and scaled Phi.

GPU tests (marked ``gpu``): each fast path on the cupy backend (numerics.kernels auto, checked to
dispatch to cuda/weno.py) against the array path on the same backend and on NumPy: exact bit for
bit against the CuPy array path, fast within 1e-12; two calls bitwise identical; and the fast
kernels' device results equal their host build bit for bit (the FMAs are explicit).
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
