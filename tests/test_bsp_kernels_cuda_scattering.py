"""CUDA fast paths of the scattering phases (solver/bsp/kernels/cuda/scattering.py + scattering.cu)
against the array reference.

CPU tests: scattering.cu compiled with g++ behind a stand-in ``cupy`` (conftest ``emulated_cuda``):
gain and loss within 1e-14 of the NumPy array path (the summation order of einsum), the elastic
top node exactly.  GPU tests (marked ``gpu``): the fast paths (numerics.kernels auto, checked to
dispatch to cuda/scattering.py) against the array path on the cupy backend and on NumPy, realistic
and random subband levels and mechanism subsets: max |diff| / max |ref| <= 1e-12.
"""
import numpy as np
import pytest

from solver.backend import get_backend
from solver.bsp import kernels, scattering

NP_BE = get_backend("numpy")
TOL = 1e-12


@pytest.mark.parametrize("levels,mechanisms", [("random", None), ("grid", None), ("smooth", (0, 3, 5))])
def test_emulated_scattering_matches_array(emulated_cuda, bte_cases, rng, levels, mechanisms):
    cs = emulated_cuda.scattering
    m = bte_cases.model(NX=9, NS=3, NW=24, NPHI=4, kernels_mode="array")
    d = bte_cases.inputs(m, rng, levels)
    G0 = scattering.scat_gain(m, NP_BE, d["PhiHat"], d["eps"], d["W"], mechanisms)
    G1 = cs.scat_gain(m, NP_BE, d["PhiHat"], d["eps"], d["W"], mechanisms)
    L0 = scattering.scat_loss(m, NP_BE, d["eps"], d["W"], mechanisms)
    L1 = cs.scat_loss(m, NP_BE, d["eps"], d["W"], mechanisms)
    assert np.abs(G0).max() > 0 and np.abs(L0).max() > 0
    assert bte_cases.rel(G1, G0) <= 1e-14, bte_cases.rel(G1, G0)
    assert bte_cases.rel(L1, L0) <= 1e-14, bte_cases.rel(L1, L0)
    opts = [o for code, o in emulated_cuda.cupy.compiled if "bsp_scat_gain" in code]
    assert opts and all("--fmad=false" in o for o in opts)


def test_emulated_scattering_two_energies_per_thread(emulated_cuda, bte_cases, rng):
    """NW = 70: one block of 64 threads per row (i, nu, p), two energies per thread (l and l + 64), the second
    set partial (l = 64 .. 69); the block forms the row's (branch, p') table once."""
    cs = emulated_cuda.scattering
    m = bte_cases.model(NX=9, NS=2, NW=70, NPHI=4, kernels_mode="array")
    assert cs.row_threads(m.NW) == (64, 2)
    d = bte_cases.inputs(m, rng, "random")
    G0 = scattering.scat_gain(m, NP_BE, d["PhiHat"], d["eps"], d["W"])
    L0 = scattering.scat_loss(m, NP_BE, d["eps"], d["W"])
    assert bte_cases.rel(cs.scat_gain(m, NP_BE, d["PhiHat"], d["eps"], d["W"]), G0) <= 1e-14
    assert bte_cases.rel(cs.scat_loss(m, NP_BE, d["eps"], d["W"]), L0) <= 1e-14
    assert np.all(G0[..., 64:] != 0) and np.all(L0[..., 64:] != 0)  # the second energies are written


def test_emulated_elastic_top_node(emulated_cuda, bte_cases, rng):
    """Elastic intrasubband term alone (mechanism 0, diagonal W): Gamma = w_l exactly, the top
    node included -- the gain must equal the array path's exactly."""
    m = bte_cases.model(NX=9, NS=2, NW=10, NPHI=4, kernels_mode="array")
    d = bte_cases.inputs(m, rng, "random")
    W = np.zeros_like(d["W"])
    for nu in range(3):
        for p in range(2):
            W[:, nu, p, nu, p] = d["W"][:, nu, p, nu, p]
    G0 = scattering.scat_gain(m, NP_BE, d["PhiHat"], d["eps"], W, (0,))
    G1 = emulated_cuda.scattering.scat_gain(m, NP_BE, d["PhiHat"], d["eps"], W, (0,))
    assert np.array_equal(G0, G1)
    assert np.all(G1[..., -1] > 0)  # the top node is reached


# ---------------------------------------------------------------------------- GPU
def _dev(cp, d):
    return {k: (cp.asarray(v) if isinstance(v, np.ndarray) else v) for k, v in d.items()}


@pytest.mark.gpu
@pytest.mark.parametrize("levels,mechanisms,NW", [("random", None, 40), ("smooth", None, 40), ("grid", None, 40),
                                                  ("random", (0, 3, 5), 40), ("smooth", (0,), 40),
                                                  ("random", None, 150), ("grid", (0, 3, 5), 150)])
def test_gpu_scattering_fast_matches_array(cupy_backend, bte_cases, rng, levels, mechanisms, NW):
    from solver.bsp.kernels.cuda import scattering as cs
    cp = cupy_backend.xp
    mesh = dict(NX=9, NS=3, NW=NW, NPHI=16)
    ma, mr = bte_cases.model(kernels_mode="auto", **mesh), bte_cases.model(kernels_mode="array", **mesh)
    assert kernels.lookup(ma, cupy_backend, "scat_gain") is cs.scat_gain
    assert kernels.lookup(ma, cupy_backend, "scat_loss") is cs.scat_loss
    assert kernels.lookup(mr, cupy_backend, "scat_gain") is None
    d = _dev(cp, bte_cases.inputs(mr, rng, levels))
    for fn in ("scat_gain", "scat_loss"):
        args = (d["PhiHat"], d["eps"], d["W"]) if fn == "scat_gain" else (d["eps"], d["W"])
        fast = getattr(scattering, fn)(ma, cupy_backend, *args, mechanisms)
        ref = getattr(scattering, fn)(mr, cupy_backend, *args, mechanisms)
        assert fast.shape == ref.shape and fast.dtype == ref.dtype
        r = bte_cases.rel(cp.asnumpy(fast), cp.asnumpy(ref))
        print(f"{fn} {levels} {mechanisms}: max rel diff {r:.3e}")
        assert float(cp.abs(ref).max()) > 0
        assert r <= TOL, (fn, r)


@pytest.mark.gpu
def test_gpu_scattering_fast_matches_numpy_reference(cupy_backend, bte_cases, rng):
    """The fast paths against the NumPy array path too (the project's oracle)."""
    cp = cupy_backend.xp
    mesh = dict(NX=9, NS=2, NW=24, NPHI=8)
    ma, mr = bte_cases.model(kernels_mode="auto", **mesh), bte_cases.model(kernels_mode="array", **mesh)
    h = bte_cases.inputs(mr, rng, "random")
    d = _dev(cp, h)
    pairs = [
        (scattering.scat_gain(ma, cupy_backend, d["PhiHat"], d["eps"], d["W"]),
         scattering.scat_gain(mr, NP_BE, h["PhiHat"], h["eps"], h["W"])),
        (scattering.scat_loss(ma, cupy_backend, d["eps"], d["W"]),
         scattering.scat_loss(mr, NP_BE, h["eps"], h["W"])),
    ]
    for fast, ref in pairs:
        assert bte_cases.rel(cp.asnumpy(fast), ref) <= TOL
