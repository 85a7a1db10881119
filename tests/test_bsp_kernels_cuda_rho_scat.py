"""bsp_rho (rk.cu) and bsp_scat_gain / bsp_scat_loss (scattering.cu) after docs/performance-bte-kernels.md
§14: the same bits as the kernels of a7e270b (their text kept verbatim in tools/bsp/old_kernels/, built the
same way), on the host build (conftest ``emulated_cuda``) and on the device (``gpu``).

bsp_rho: the rows staged through shared memory in blocks of rk.rho_rows(NW) rows, each row still summed by one
thread in the order l = 0 .. NW-1: bitwise the old one-thread-per-row kernel; meshes with a row count not a
multiple of the block's rows, NW not a multiple of 32, 4 / 3 / 2 rows per block, and one row in chunks of
RHO_TILE values (NW > RHO_TILE).  Within 1e-12 of the NumPy sum, and not bit-equal to NumPy's pairwise sum
somewhere (the data tell summation orders apart).

scat_gain / scat_loss: one block per row, 2 energies per thread, the validity of a (pair, l) by an l interval
found by bisection: bitwise the old kernels on meshes with NW = 300, 70, 37, 24, 6 (a thread's second energy
partial or past the row), random / grid / smooth levels, mechanism subsets, nodes exactly on the edges of the
validity rule (r = -1/2, r = NW-1, Gamma = 0, one ulp either side), NaN and infinite levels and a NaN W.

GPU (``gpu``): on the device, new == old kernel (built from the same kept text) == the host build, bit for bit.
"""
import math
import types
from pathlib import Path

import numpy as np
import pytest

from solver.backend import get_backend
from solver.bsp import scattering

NP_BE = get_backend("numpy")
OLD = Path(__file__).resolve().parent.parent / "tools" / "bsp" / "old_kernels"
TOL = 1e-12


def _phihat(rng, shape):
    """Values over ~12 decades with both signs rare: summation orders give different bits."""
    return np.exp(rng.uniform(-14.0, 14.0, shape)) * rng.uniform(0.5, 1.5, shape)


def old_rho(cupy, PhiHat, dw, NPHI=8, lines=192):
    """rho by a7e270b's bsp_rho (one thread per row, blocks of 128), from the module built as rk.py builds it."""
    mod = cupy.RawModule(code=(OLD / "rk_a7e270b.cu").read_text(),
                         options=("--fmad=false", f"-DNPHI_={NPHI}", f"-DLINES={lines}"))
    NX, NV, NS, NW = PhiHat.shape
    nrow = NX * NV * NS
    rho = cupy.empty((NX, NV, NS), dtype=cupy.float64)
    mod.get_function("bsp_rho")((-(-nrow // 128),), (128,), (PhiHat, rho, np.int32(nrow), np.int32(NW), np.float64(dw)))
    return rho


def new_rho(rk, cupy, PhiHat, dw, NPHI=8, lines=192):
    rho = cupy.empty(PhiHat.shape[:3], dtype=cupy.float64)
    rk._rho(types.SimpleNamespace(dw=dw), PhiHat, rho, NPHI, lines)
    return rho


def test_rho_rows(emulated_cuda):
    rows = emulated_cuda.rk.rho_rows
    assert emulated_cuda.rk.RHO_TILE == 2400 and emulated_cuda.rk.RHO_ROWS == 4
    assert "#define RHO_TILE 2400" in (Path(emulated_cuda.rk.__file__).parent / "rk.cu").read_text()
    # rk.py's RHO_TILE is read from that line (one source): _build.define finds exactly one integer define
    b = emulated_cuda._build
    assert b.define("rk.cu", "RHO_TILE") == 2400 and b.define("rk.cu", "RHO_UNROLL") == 10
    assert b.define("scattering.cu", "OVL_TILE") == 6144  # (behind #ifndef there: one line still)
    for macro in ("RHO_TIL", "NO_SUCH_DEFINE"):  # a prefix of a name is not the name
        with pytest.raises(ValueError, match="expected one"):
            b.define("rk.cu", macro)
    assert [rows(n) for n in (150, 300, 600, 700, 1000, 2400, 2401, 5000)] == [4, 4, 4, 3, 2, 1, 1, 1]


# (NX, NS, NW): rows 81 (20 blocks of 4 + 1), 18 (4 + 1 of 2), 27 (NW = 700: 3 rows per block),
# 10 x 2 rows (NW = 1000), one row in 2 chunks (NW = 2500 > RHO_TILE: 2400 + 100), tiny rows (NW = 7)
@pytest.mark.parametrize("NX, NS, NW", [(9, 3, 300), (3, 2, 600), (3, 3, 700), (5, 2, 1000), (1, 1, 2500),
                                        (3, 1, 2500), (7, 3, 7)])
def test_emulated_rho_equals_old_kernel(emulated_cuda, rng, NX, NS, NW):
    cupy = emulated_cuda.cupy
    PH = _phihat(rng, (NX, 3, NS, NW))
    dw = 0.0123
    got = new_rho(emulated_cuda.rk, cupy, PH, dw)
    ref = old_rho(cupy, PH, dw)
    assert got.shape == (NX, 3, NS) and np.array_equal(got, ref), np.abs(got - ref).max()
    exact = np.array([math.fsum(r) for r in PH.reshape(-1, NW)]).reshape(got.shape) * dw
    assert np.abs(got - exact).max() <= TOL * np.abs(exact).max()
    if NW >= 300:  # NumPy's pairwise sum rounds differently somewhere: the comparison sees orders
        assert not np.array_equal(got, PH.sum(axis=-1) * dw)


# ---------------------------------------------------------------------------- scat_gain / scat_loss
def old_scat(cs, cupy, kernel, m, args, nbranch, NS):
    """a7e270b's bsp_scat_gain / bsp_scat_loss (blocks of 64 energies of one row, nchunk per row), built and
    launched as its scattering.py did (args without nchunk; it is inserted before the last argument)."""
    mod = cupy.RawModule(code=(OLD / "scattering_a7e270b.cu").read_text(),
                         options=("--fmad=false", f"-DMAXE={max(1, nbranch * NS)}", f"-DNS_={NS}"))
    nchunk = -(-m.NW // 64)
    rows = args[-3].shape[0] * 3 * NS  # the output's rows (NX, 3, NS, NW)
    mod.get_function(kernel)((rows * nchunk,), (64,), (*args[:-1], np.int32(nchunk), args[-1]))


def old_gain_loss(cs, cupy, m, PH, eps, W, mechanisms):
    NX, NV, NS = eps.shape
    G = cupy.empty((NX, NV, NS, m.NW), dtype=cupy.float64)
    L = cupy.empty((NX, NV, NS, m.NW), dtype=cupy.float64)
    off, nu2, sig, wt, nb = cs._branch_table(m, mechanisms, "gain")
    old_scat(cs, cupy, "bsp_scat_gain", m, (PH, eps, W, cupy.asarray(np.asarray(m.s_w, dtype=np.float64)), off, nu2, sig, wt, G,
                                           np.int32(m.NW), np.float64(1.0 / m.dw)), nb, NS)
    off, nu2, sig, wt, nb = cs._branch_table(m, mechanisms, "loss")
    old_scat(cs, cupy, "bsp_scat_loss", m, (eps, W, cupy.asarray(np.asarray(m.w, dtype=np.float64)), off, nu2, sig, wt, L,
                                           np.int32(m.NW), np.float64(2.0 * m.alpha)), nb, NS)
    return G, L


def test_row_threads(emulated_cuda):
    rt = emulated_cuda.scattering.row_threads
    assert emulated_cuda.scattering.LPT == 2
    assert [rt(n) for n in (6, 70, 150, 300, 600, 2048, 2100, 5000)] == [
        (32, 2), (64, 2), (96, 2), (160, 2), (320, 2), (1024, 2), (704, 3), (1024, 5)]


# NW = 300 (160 threads x 2: the second energy of threads 140 .. 159 past the row), 70 (64 x 2: partial), 37
# (32 x 2), 6 (the schema's least NW); levels: random, grid (delta / dw integers: nodes exactly on l_d, r == NW-1
# reached), smooth; mechanism subsets
@pytest.mark.parametrize("NX, NS, NW, levels, mechanisms", [
    (9, 1, 300, "random", None), (9, 3, 70, "grid", None), (9, 2, 70, "smooth", (0, 3, 5)), (9, 2, 37, "random", (0,)),
    (9, 2, 6, "grid", None), (9, 3, 24, "random", None)])
def test_emulated_scattering_equals_old_kernels(emulated_cuda, bte_cases, rng, NX, NS, NW, levels, mechanisms):
    """gain and loss of this code = a7e270b's kernels bit for bit (host builds) and within 1e-14 of NumPy."""
    cs = emulated_cuda.scattering
    m = bte_cases.model(NX=NX, NS=NS, NW=NW, NPHI=4, kernels_mode="array")
    d = bte_cases.inputs(m, rng, levels)
    G1 = cs.scat_gain(m, NP_BE, d["PhiHat"], d["eps"], d["W"], mechanisms)
    L1 = cs.scat_loss(m, NP_BE, d["eps"], d["W"], mechanisms)
    G0, L0 = old_gain_loss(cs, emulated_cuda.cupy, m, d["PhiHat"], d["eps"], d["W"], mechanisms)
    assert np.abs(G0).max() > 0 and np.abs(L0).max() > 0
    assert np.array_equal(G1, G0), bte_cases.rel(G1, G0)
    assert np.array_equal(L1, L0), bte_cases.rel(L1, L0)
    Gr = scattering.scat_gain(m, NP_BE, d["PhiHat"], d["eps"], d["W"], mechanisms)
    Lr = scattering.scat_loss(m, NP_BE, d["eps"], d["W"], mechanisms)
    assert bte_cases.rel(G1, Gr) <= 1e-14 and bte_cases.rel(L1, Lr) <= 1e-14
    # the gain / loss builds of this source (not its bsp_overlap build, which has no defines)
    opts = [o for code, o in emulated_cuda.cupy.compiled if "ScatRef" in code and any(x.startswith("-DMAXE=") for x in o)]
    assert opts and all("--fmad=false" in o and "-DLPT=2" in o for o in opts)


def test_emulated_scattering_edges_equal_old_kernels(emulated_cuda, bte_cases, rng):
    """Nodes on the edges of the validity rule: delta / dw + l = -1/2, NW-1 exactly, just inside and outside,
    NaN and infinite levels (no valid l; NaN W: NaN terms summed as before), equal to the old kernels bit for bit."""
    cs = emulated_cuda.scattering
    m = bte_cases.model(NX=9, NS=2, NW=40, NPHI=4, kernels_mode="array")
    d = bte_cases.inputs(m, rng, "random")
    eps = d["eps"].copy()
    dw = m.dw
    # differences eps - eps' of (i, nu, p) pairs on the edges (sigma of the branches added on top: the edges shift
    # by the phonon energies, so also set levels so that some delta / dw land on half-integers and integers)
    eps[0, 0, 0] = eps[0, 1, 0] + 0.5 * dw
    eps[0, 0, 1] = eps[0, 1, 1] - (m.NW - 1) * dw
    eps[1, 0, 0] = eps[1, 0, 1] + np.nextafter(0.5, 1.0) * dw
    eps[1, 2, 0] = np.nan
    eps[2, 1, 1] = np.inf
    eps[2, 2, 1] = -np.inf
    W = d["W"].copy()
    W[4, 1, 0, 2, 1] = np.nan  # weight x W NaN: the valid terms of that pair make NaN sums, the invalid ones do not
    with np.errstate(invalid="ignore"):
        G1 = cs.scat_gain(m, NP_BE, d["PhiHat"], eps, W)
        L1 = cs.scat_loss(m, NP_BE, eps, W)
        G0, L0 = old_gain_loss(cs, emulated_cuda.cupy, m, d["PhiHat"], eps, W, None)
    assert np.array_equal(G1, G0, equal_nan=True) and np.array_equal(L1, L0, equal_nan=True)
    for a in (G1, L1):
        assert np.isnan(a[4, 1, 0]).any() and not np.isnan(a[4, 1, 0]).all() and np.isfinite(a).sum() > a.size // 2
    # delta / dw on exact integers and half-integers for every pair: sigma = 0 (mechanism 0) and eps on a dw grid
    e2 = np.round(d["eps"] / (0.5 * dw)) * (0.5 * dw)
    G1 = cs.scat_gain(m, NP_BE, d["PhiHat"], e2, d["W"], (0,))
    G0, _ = old_gain_loss(cs, emulated_cuda.cupy, m, d["PhiHat"], e2, d["W"], (0,))
    assert np.array_equal(G1, G0)


def test_loss_needs_an_increasing_w(emulated_cuda, bte_cases, rng, monkeypatch):
    cs = emulated_cuda.scattering
    m = bte_cases.model(NX=9, NS=1, NW=12, NPHI=4, kernels_mode="array")
    d = bte_cases.inputs(m, rng, "random")
    monkeypatch.setattr(type(m), "w", property(lambda self: np.zeros(self.NW)))
    with pytest.raises(ValueError, match="must increase"):
        cs.scat_loss(m, NP_BE, d["eps"], d["W"])


def _exact(targets, inv_dw, dw):
    """A double x with fl(x * inv_dw) == t for the first t of ``targets`` that has one within 64 ulps of t dw."""
    for t in targets:
        for direction in (np.inf, -np.inf):
            x = t * dw
            for _ in range(64):
                if x * inv_dw == t:
                    return x
                x = np.nextafter(x, direction)
    return None


def test_emulated_scattering_exact_edges(emulated_cuda, bte_cases, rng):
    """Elastic terms alone (mechanism 0: sigma = 0, p' of the same valley) with levels placed so that the node
    r = delta / dw + l lands exactly on -1/2 and on NW-1 (and one ulp inside and outside), and Gamma = delta + w_l
    exactly 0: the new kernels equal the old bit for bit, and these edges are indeed reached (checked on the host
    with the kernels' operations)."""
    cs = emulated_cuda.scattering
    m = bte_cases.model(NX=9, NS=2, NW=40, NPHI=4, kernels_mode="array")
    d = bte_cases.inputs(m, rng, "random")
    dw, inv_dw, NW = m.dw, 1.0 / m.dw, m.NW
    eps = np.zeros_like(d["eps"])
    xs = []
    for targets in ((3.5, 4.5, 5.5, 6.5, 7.5), (5.0, 6.0, 7.0, 9.0), (NW - 1.0, NW - 2.0, NW - 3.0), (0.5, 1.5, 2.5)):
        x = _exact(targets, inv_dw, dw)
        assert x is not None, targets
        xs += [x, np.nextafter(x, np.inf), np.nextafter(x, -np.inf)]
    w = np.asarray(m.w)
    xs = xs[:m.NX - 1] + [w[7]]
    for i, x in enumerate(xs):
        eps[i, :, 1] = x  # rows (i, nu, 0): delta = -x; rows (i, nu, 1): delta = +x
    G1 = cs.scat_gain(m, NP_BE, d["PhiHat"], eps, d["W"], (0,))
    L1 = cs.scat_loss(m, NP_BE, eps, d["W"], (0,))
    G0, L0 = old_gain_loss(cs, emulated_cuda.cupy, m, d["PhiHat"], eps, d["W"], (0,))
    assert np.array_equal(G1, G0) and np.array_equal(L1, L0)
    l = np.arange(NW, dtype=np.float64)
    rr = np.array([[(0.0 - x) * inv_dw + l, (x - 0.0) * inv_dw + l] for x in xs])
    assert (rr == -0.5).any() and (rr == NW - 1.0).any()  # the edges are reached
    assert ((0.0 - xs[-1]) + w == 0.0).any()  # Gamma = 0 exactly (the loss's Heaviside edge)


# ---------------------------------------------------------------------------- GPU
@pytest.mark.gpu
@pytest.mark.parametrize("NX, NS, NW", [(65, 6, 300), (9, 3, 700), (9, 6, 600), (3, 1, 2500), (9, 3, 37)])
def test_gpu_rho_equals_old_kernel_and_host_build(cupy_backend, emulated_cuda, rng, NX, NS, NW):
    from solver.bsp.kernels.cuda import rk
    cp = cupy_backend.xp
    PH = _phihat(rng, (NX, 3, NS, NW))
    dw = 0.0123
    new = cp.asnumpy(new_rho(rk, cp, cp.asarray(PH), dw, NPHI=48, lines=32))
    old = cp.asnumpy(old_rho(cp, cp.asarray(PH), dw, NPHI=48, lines=32))
    host = new_rho(emulated_cuda.rk, emulated_cuda.cupy, PH, dw, NPHI=48, lines=32)
    assert np.array_equal(new, old) and np.array_equal(new, host)


@pytest.mark.gpu
@pytest.mark.parametrize("NX, NS, NW, levels, mechanisms", [
    (9, 6, 300, "smooth", None), (9, 4, 300, "random", None), (9, 3, 70, "grid", None),
    (9, 2, 37, "random", (0, 3, 5)), (9, 3, 600, "grid", (0,))])
def test_gpu_scattering_equals_old_kernels_and_host_build(cupy_backend, emulated_cuda, bte_cases, rng, NX, NS, NW,
                                                          levels, mechanisms):
    from solver.bsp.kernels.cuda import scattering as cs
    cp = cupy_backend.xp
    m = bte_cases.model(NX=NX, NS=NS, NW=NW, NPHI=4, kernels_mode="auto")
    d = bte_cases.inputs(m, rng, levels)
    PH, eps, W = (cp.asarray(d[k]) for k in ("PhiHat", "eps", "W"))
    G1 = cp.asnumpy(cs.scat_gain(m, cupy_backend, PH, eps, W, mechanisms))
    L1 = cp.asnumpy(cs.scat_loss(m, cupy_backend, eps, W, mechanisms))
    G0, L0 = (cp.asnumpy(a) for a in old_gain_loss(cs, cp, m, PH, eps, W, mechanisms))
    hm = bte_cases.model(NX=NX, NS=NS, NW=NW, NPHI=4, kernels_mode="auto")  # its own device_cache (host arrays)
    Gh = emulated_cuda.scattering.scat_gain(hm, NP_BE, d["PhiHat"], d["eps"], d["W"], mechanisms)
    Lh = emulated_cuda.scattering.scat_loss(hm, NP_BE, d["eps"], d["W"], mechanisms)
    assert np.abs(G1).max() > 0 and np.abs(L1).max() > 0
    assert np.array_equal(G1, G0) and np.array_equal(G1, Gh), (bte_cases.rel(G1, G0), bte_cases.rel(G1, Gh))
    assert np.array_equal(L1, L0) and np.array_equal(L1, Lh), (bte_cases.rel(L1, L0), bte_cases.rel(L1, Lh))
