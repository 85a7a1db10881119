"""CUDA fast paths of the WENO phases (solver/bsp/kernels/cuda/weno.py + weno.cu) against the array
reference.

CPU tests: weno.cu compiled with g++ (``-ffp-contract=off``, like the device's ``--fmad=false``)
behind a stand-in ``cupy`` (conftest ``emulated_cuda``), so that the Python launchers and the
kernels' logic run end to end without a GPU: the WENO terms must agree with the NumPy array path
bit for bit there.

GPU tests (marked ``gpu``): each fast path on the cupy backend (numerics.kernels auto, checked to
dispatch to cuda/weno.py) against the array path on the same backend (numerics.kernels array),
on small meshes with random positive Phi and realistic and random subband levels, closed contacts:
max |diff| / max |ref| <= 1e-12.
"""
import numpy as np
import pytest

from solver.backend import get_backend
from solver.bsp import kernels, weno

NP_BE = get_backend("numpy")
TOL = 1e-12


def test_emulated_weno_compiled_without_fma(emulated_cuda, bte_cases, rng):
    m = bte_cases.model(NX=9, NS=1, NW=8, NPHI=4, kernels_mode="array")
    d = bte_cases.inputs(m, rng, "random")
    emulated_cuda.weno.weno_w(m, NP_BE, d["Phi"], d["deps"])
    opts = [o for code, o in emulated_cuda.cupy.compiled if "bsp_weno_dw" in code]
    assert opts and all("--fmad=false" in o for o in opts)


@pytest.mark.parametrize("closed", [False, True])
def test_emulated_weno_bitwise(emulated_cuda, bte_cases, rng, closed):
    cw = emulated_cuda.weno
    m = bte_cases.model(NX=9, NS=2, NW=20, NPHI=8, kernels_mode="array")
    d = bte_cases.inputs(m, rng, "random")
    P = d["Phi"]
    args = (d["rho_eq"][0], d["rho_eq"][-1], d["rho"][0], d["rho"][-1])
    x0 = weno.weno_x(m, NP_BE, P, *args, closed=closed)
    x1 = cw.weno_x(m, NP_BE, P, *args, closed=closed)
    assert np.array_equal(x0, x1), bte_cases.rel(x1, x0)
    w0, w1 = weno.weno_w(m, NP_BE, P, d["deps"]), cw.weno_w(m, NP_BE, P, d["deps"])
    assert np.array_equal(w0, w1), bte_cases.rel(w1, w0)
    p0, p1 = weno.weno_phi(m, NP_BE, P, d["deps"], d["A"]), cw.weno_phi(m, NP_BE, P, d["deps"], d["A"])
    assert np.array_equal(p0, p1), bte_cases.rel(p1, p0)


def test_emulated_weno_segments(emulated_cuda, bte_cases, rng, monkeypatch):
    """Lines cut into several segments (x and w; NPHI = 6: the partner angle m + 3)."""
    cw = emulated_cuda.weno
    monkeypatch.setattr(cw, "TARGET_THREADS", 1 << 22)
    monkeypatch.setattr(cw, "MIN_SEGMENT", 3)
    m = bte_cases.model(NX=10, NS=1, NW=17, NPHI=6, kernels_mode="array")
    assert cw._segments(3 * 17 * 6, 10)[1] > 1 and cw._segments(10 * 3 * 6, 17)[1] > 1
    d = bte_cases.inputs(m, rng, "random")
    P = d["Phi"]
    for closed in (False, True):
        args = (d["rho_eq"][0], d["rho_eq"][-1], d["rho"][0], d["rho"][-1])
        assert np.array_equal(weno.weno_x(m, NP_BE, P, *args, closed=closed),
                              cw.weno_x(m, NP_BE, P, *args, closed=closed))
    assert np.array_equal(weno.weno_w(m, NP_BE, P, d["deps"]), cw.weno_w(m, NP_BE, P, d["deps"]))
    assert np.array_equal(weno.weno_phi(m, NP_BE, P, d["deps"], d["A"]),
                          cw.weno_phi(m, NP_BE, P, d["deps"], d["A"]))


# ---------------------------------------------------------------------------- GPU
def _dev(cp, d):
    return {k: (cp.asarray(v) if isinstance(v, np.ndarray) else v) for k, v in d.items()}


@pytest.mark.gpu
@pytest.mark.parametrize("levels", ["random", "smooth"])
@pytest.mark.parametrize("mesh", [dict(NX=9, NS=3, NW=40, NPHI=16), dict(NX=12, NS=2, NW=31, NPHI=10)])
def test_gpu_weno_fast_matches_array(cupy_backend, bte_cases, rng, levels, mesh):
    from solver.bsp.kernels.cuda import weno as cw
    cp = cupy_backend.xp
    ma, mr = bte_cases.model(kernels_mode="auto", **mesh), bte_cases.model(kernels_mode="array", **mesh)
    for phase, fn in (("WENO_x", "weno_x"), ("WENO_w", "weno_w"), ("WENO_phi", "weno_phi")):
        assert kernels.lookup(ma, cupy_backend, phase) is getattr(cw, fn)
    d = _dev(cp, bte_cases.inputs(mr, rng, levels))
    calls = {
        "weno_x": lambda m, c: weno.weno_x(m, cupy_backend, d["Phi"], d["rho_eq"][0], d["rho_eq"][-1],
                                           d["rho"][0], d["rho"][-1], closed=c),
        "weno_w": lambda m, c: weno.weno_w(m, cupy_backend, d["Phi"], d["deps"]),
        "weno_phi": lambda m, c: weno.weno_phi(m, cupy_backend, d["Phi"], d["deps"], d["A"]),
    }
    for fn, call in calls.items():
        for closed in ((False, True) if fn == "weno_x" else (False,)):
            fast, ref = call(ma, closed), call(mr, closed)
            r = bte_cases.rel(cp.asnumpy(fast), cp.asnumpy(ref))
            print(f"{fn} closed={closed} {levels} {mesh}: max rel diff {r:.3e}")
            assert r <= TOL, (fn, closed, r)


@pytest.mark.gpu
def test_gpu_weno_fast_matches_numpy_reference(cupy_backend, bte_cases, rng):
    """The fast paths against the NumPy array path too (the project's oracle)."""
    cp = cupy_backend.xp
    mesh = dict(NX=9, NS=2, NW=24, NPHI=8)
    ma, mr = bte_cases.model(kernels_mode="auto", **mesh), bte_cases.model(kernels_mode="array", **mesh)
    h = bte_cases.inputs(mr, rng, "random")
    d = _dev(cp, h)
    pairs = [
        (weno.weno_x(ma, cupy_backend, d["Phi"], d["rho_eq"][0], d["rho_eq"][-1], d["rho"][0], d["rho"][-1]),
         weno.weno_x(mr, NP_BE, h["Phi"], h["rho_eq"][0], h["rho_eq"][-1], h["rho"][0], h["rho"][-1])),
        (weno.weno_w(ma, cupy_backend, d["Phi"], d["deps"]), weno.weno_w(mr, NP_BE, h["Phi"], h["deps"])),
        (weno.weno_phi(ma, cupy_backend, d["Phi"], d["deps"], d["A"]),
         weno.weno_phi(mr, NP_BE, h["Phi"], h["deps"], h["A"])),
    ]
    for fast, ref in pairs:
        assert bte_cases.rel(cp.asnumpy(fast), ref) <= TOL
