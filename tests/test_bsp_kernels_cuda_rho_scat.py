"""bsp_rho (rk.cu) and bsp_scat_gain / bsp_scat_loss (scattering.cu) after docs/performance-bte-kernels.md
§14: the same bits as the kernels of a7e270b (their text kept verbatim in tools/bsp/old_kernels/, built the
same way), on the host build (conftest ``emulated_cuda``) and on the device (``gpu``).

bsp_rho: the rows staged through shared memory in blocks of rk.rho_rows(NW) rows, each row still summed by one
thread in the order l = 0 .. NW-1: bitwise the old one-thread-per-row kernel; meshes with a row count not a
multiple of the block's rows, NW not a multiple of 32, 4 / 3 / 2 rows per block, and one row in chunks of
RHO_TILE values (NW > RHO_TILE).  Within 1e-12 of the NumPy sum, and not bit-equal to NumPy's pairwise sum
somewhere (the data tell summation orders apart).
"""
import math
import types
from pathlib import Path

import numpy as np
import pytest

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
