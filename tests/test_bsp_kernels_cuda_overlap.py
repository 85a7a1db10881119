"""bsp_overlap (scattering.cu) after docs/performance-bte-kernels.md §15: one block per x index, the squares of
chi[i] staged in shared memory (transposed, rows padded to an odd length), one thread per pair (a, b) summing
sq_a * sq_b over z in the order j = 1 .. NZ-2: the same bits as the one-thread-per-pair kernel of a7e270b (its
text kept verbatim in tools/bsp/old_kernels/scattering_a7e270b.cu, built and launched as a7e270b's
scattering.py did).

Host builds (conftest ``emulated_cuda``): new == old bit for bit and == the in-order sum on the host
(np.cumsum over the products (c_a^2)(c_b^2): sequential) on meshes with odd and even NB = 3 N_sbn (3 .. 36:
NB^2 = 1296 pairs, more than one block's 1024 threads), NZ = 9, 17, 65, 129, 257, values over many decades
(the reversed order gives other bits: the data tell orders apart); the interior in chunks (a small OVL_TILE:
partial sums carried in W, a last partial chunk) and fewer threads than pairs; NaN / inf entries; within 1e-13
(elementwise relative) of the NumPy reference (scattering.overlap: matmul).

GPU (``gpu``): on the device, new == old (built from the kept text) == the host's in-order sum, bit for bit, on
the standard (6x65x65), fine (6x129x129) and NZ = 257 meshes, odd NB, chunked; repeatable launch to launch.
"""
from pathlib import Path

import numpy as np
import pytest

from solver.backend import get_backend
from solver.bsp import scattering

NP_BE = get_backend("numpy")
OLD = Path(__file__).resolve().parent.parent / "tools" / "bsp" / "old_kernels" / "scattering_a7e270b.cu"


def old_overlap(cupy, chi, dz):
    """W by a7e270b's bsp_overlap: one thread per (i, a, b), blocks of 128, the module built without defines
    (only the overlap kernel is compiled then) with --fmad=false, as a7e270b's scattering.py did."""
    mod = cupy.RawModule(code=OLD.read_text(), options=("--fmad=false",))
    NX, NV, NS, NZ = chi.shape
    W = cupy.empty((NX, NV, NS, NV, NS), dtype=cupy.float64)
    n = W.size
    mod.get_function("bsp_overlap")((-(-n // 128),), (128,), (chi, W, np.int32(NX), np.int32(NV * NS), np.int32(NZ),
                                                              np.float64(dz)))
    return W


def in_order(chi, dz, reverse=False):
    """The sum over j = 1 .. NZ-2 of (c_a c_a)(c_b c_b) in that order (np.cumsum adds sequentially), times dz."""
    NX, NV, NS, NZ = chi.shape
    c = chi.reshape(NX, NV * NS, NZ)[..., 1:NZ - 1]
    sq = c * c
    prod = sq[:, :, None, :] * sq[:, None, :, :]
    if reverse:
        prod = prod[..., ::-1]
    with np.errstate(invalid="ignore"):
        s = np.cumsum(prod, axis=-1)[..., -1] * dz
    return s.reshape(NX, NV, NS, NV, NS)


def make_chi(rng, NX, NS, NZ):
    """Rows with magnitudes over ~8 decades, signs mixed, zero ends (as the eigenvectors)."""
    chi = rng.standard_normal((NX, 3, NS, NZ)) * np.exp(rng.uniform(-4.5, 4.5, (NX, 3, NS, NZ)))
    chi[..., 0] = chi[..., -1] = 0.0
    return chi


def rel_elementwise(a, b):
    return float(np.max(np.abs(a - b) / np.abs(b)))


def test_overlap_shape(emulated_cuda):
    cs = emulated_cuda.scattering
    assert cs.OVL_TILE == 6144 and cs.OVL_THREADS == 1024
    src = (Path(cs.__file__).parent / "scattering.cu").read_text()
    assert "#define OVL_TILE 6144" in src
    # (NB, NZ) -> (threads, rows per chunk): standard 18 x 65, fine 18 x 129, NZ = 257, odd NB, 36 pairs > 1024
    assert [cs.overlap_shape(nb, nz) for nb, nz in ((18, 65), (18, 129), (18, 257), (3, 9), (15, 257), (36, 65),
                                                    (18, 1000), (6143, 9))] == [
        (352, 63), (352, 127), (352, 255), (32, 7), (256, 255), (1024, 63), (352, 323), (1024, 1)]
    with pytest.raises(ValueError, match="bte_kernels: exact"):
        cs.overlap_shape(6144, 9)  # NBP = 6145 > OVL_TILE


# (NX, N_sbn, NZ): NB = 18 (standard), 9 (odd, NZ = 9: the schema's least), 3 (one warp), 15 (odd, NZ = 257),
# 18 x 257 (38.8 KB tile), 21 x 129, 36 (1296 pairs: a thread takes two), 6 x 17
@pytest.mark.parametrize("NX, NS, NZ", [(9, 6, 65), (5, 3, 9), (9, 1, 257), (3, 5, 257), (3, 6, 257), (2, 7, 129),
                                        (2, 12, 65), (9, 2, 17)])
def test_emulated_overlap_equals_old_kernel(emulated_cuda, bte_cases, rng, NX, NS, NZ):
    cupy = emulated_cuda.cupy
    m = bte_cases.model(kernels_mode="array")  # dz only; chi's shape sets the mesh of the kernels
    chi = make_chi(rng, NX, NS, NZ)
    got = emulated_cuda.scattering.overlap(m, NP_BE, chi)
    old = old_overlap(cupy, chi, m.dz)
    assert got.shape == (NX, 3, NS, 3, NS)
    assert np.array_equal(got, old), bte_cases.rel(got, old)
    assert np.array_equal(got, in_order(chi, m.dz))
    assert np.array_equal(got, got.transpose(0, 3, 4, 1, 2))
    assert not np.array_equal(got, in_order(chi, m.dz, reverse=True))  # the data see the order
    ref = scattering.overlap(m, NP_BE, chi)
    assert rel_elementwise(got, ref) <= 1e-13
    opts = [o for code, o in cupy.compiled if "OVL_UNROLL" in code and "-DOVL_TILE=6144" in o]
    assert opts and all("--fmad=false" in o for o in opts)


# a small tile: OVL_TILE = 80 holds 4 rows of NBP = 19 (NZ = 65: 15 chunks of 4 and one of 3), 64 doubles 3
# rows of NBP = 19 (21 chunks) or 7 rows of NBP = 9 (NZ = 9: one chunk of 7); fewer threads than pairs
@pytest.mark.parametrize("tile, threads, NS, NZ", [(80, 1024, 6, 65), (64, 1024, 6, 65), (64, 1024, 3, 9),
                                                   (80, 64, 6, 65), (19, 32, 6, 17)])
def test_emulated_overlap_chunks_and_thread_loop(emulated_cuda, bte_cases, rng, monkeypatch, tile, threads, NS, NZ):
    cs = emulated_cuda.scattering
    monkeypatch.setattr(cs, "OVL_TILE", tile)
    monkeypatch.setattr(cs, "OVL_THREADS", threads)
    NB = 3 * NS
    nthreads, rows = cs.overlap_shape(NB, NZ)
    assert rows == min(NZ - 2, tile // (NB | 1)) and nthreads == min(threads, 32 * -(-NB * NB // 32))
    m = bte_cases.model(kernels_mode="array")
    chi = make_chi(rng, 3, NS, NZ)
    got = cs.overlap(m, NP_BE, chi)
    assert np.array_equal(got, old_overlap(emulated_cuda.cupy, chi, m.dz))
    assert np.array_equal(got, in_order(chi, m.dz))
    assert any(f"-DOVL_TILE={tile}" in o for _, o in emulated_cuda.cupy.compiled)


def test_emulated_overlap_nan_inf(emulated_cuda, bte_cases, rng):
    m = bte_cases.model(kernels_mode="array")
    chi = make_chi(rng, 3, 2, 17)
    chi[1, 0, 1, 5] = np.nan
    chi[2, 2, 0, 7] = np.inf
    chi[2, 1, 1, 7] = 0.0  # inf^2 x 0 = NaN in that pair only
    got = emulated_cuda.scattering.overlap(m, NP_BE, chi)
    old = old_overlap(emulated_cuda.cupy, chi, m.dz)
    assert np.array_equal(got, old, equal_nan=True)
    assert np.isnan(got[1, 0, 1]).all() and np.isnan(got[1, :, :, 0, 1]).all()
    assert np.isnan(got[2, 2, 0, 1, 1]) and np.isinf(got[2, 2, 0, 2, 0])
    assert np.isfinite(got[0]).all() and np.isfinite(got).sum() > got.size // 2


def test_overlap_too_many_pairs(emulated_cuda, bte_cases, monkeypatch):
    cs = emulated_cuda.scattering
    monkeypatch.setattr(cs, "OVL_TILE", 8)  # NBP = 19 values do not fit
    m = bte_cases.model(kernels_mode="array")
    with pytest.raises(ValueError, match="do not fit"):
        cs.overlap(m, NP_BE, np.ones((1, 3, 6, 17)))


# ---------------------------------------------------------------------------- device
@pytest.mark.gpu
@pytest.mark.parametrize("NX, NS, NZ, tile", [(65, 6, 65, None), (129, 6, 129, None), (65, 6, 257, None),
                                              (65, 5, 65, None), (17, 3, 9, None), (65, 6, 65, 80)])
def test_gpu_overlap_equals_old_kernel(bte_cases, rng, monkeypatch, NX, NS, NZ, tile):
    import cupy as cp

    from solver.bsp.kernels.cuda import scattering as cs
    if tile is not None:
        monkeypatch.setattr(cs, "OVL_TILE", tile)
    m = bte_cases.model(kernels_mode="array")
    be = get_backend("cupy")
    chi_h = make_chi(rng, NX, NS, NZ)
    chi = cp.asarray(chi_h)
    got = cs.overlap(m, be, chi)
    old = old_overlap(cp, chi, m.dz)
    g = cp.asnumpy(got)
    assert np.array_equal(g, cp.asnumpy(old))
    assert np.array_equal(g, in_order(chi_h, m.dz))
    assert rel_elementwise(g, scattering.overlap(m, NP_BE, chi_h)) <= 1e-13
    for _ in range(3):
        assert np.array_equal(cp.asnumpy(cs.overlap(m, be, chi)), g)
