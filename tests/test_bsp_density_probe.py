"""dens.density_probe, the numbers of the stage's density check (Simulation._check_density): the array
reference, and the CUDA fast path (kernel density_probe, dens.cu) run on the host through the g++
emulation and on the device: the sum to rounding, the minimum exactly, NaN / Inf / negative cases.
dens.scalars_probe, the numbers of a scalars row (Simulation.scalar_fields): the reference is the
sums of the host fields bit for bit; the CUDA kernel scalars_probe (emulated, device) to rounding, the
contact lines' min and max exactly."""
import numpy as np
import pytest

from solver.backend import get_backend
from solver.bsp import dens
from solver.bsp.model import Model, load

NP = get_backend("numpy")


def _model():
    return Model(load(None, []))


def _cases(rng, NX=65, NS=6):
    rho = rng.uniform(0.1, 2.0, (NX, 3, NS))
    if NX < 41:
        return {"healthy": rho}
    neg = rho.copy()
    neg[17, 1, 1] = -50.0  # a negative N_s(x) at x = 17
    nan = rho.copy()
    nan[3, 0, 0] = np.nan
    inf = rho.copy()
    inf[40, 2, NS - 1] = np.inf
    return {"healthy": rho, "negative": neg, "nan": nan, "inf": inf}


def _want(rho):
    total = rho.sum(axis=(1, 2))
    return total.sum(), total.min()


def test_reference_probe_gives_the_sum_and_the_minimum(rng):
    m = _model()
    for name, rho in _cases(rng).items():
        s, lo = dens.density_probe(m, NP, rho).result()
        ws, wl = _want(rho)
        if name in ("nan", "inf"):
            assert not np.isfinite(s), name
        else:
            assert s == ws and lo == wl, name
    assert dens.density_probe(m, NP, _cases(rng)["negative"]).result()[1] < 0


@pytest.mark.parametrize("NX", [1, 5, 65, 300, 513])
def test_emulated_cuda_probe_matches_the_reference(emulated_cuda, rng, NX):
    m = _model()
    for name, rho in _cases(rng, NX=NX, NS=4 if NX != 65 else 6).items():
        s, lo = emulated_cuda.dens.density_probe(m, NP, rho).result()
        ws, wl = _want(rho)
        if name in ("nan", "inf"):
            assert not np.isfinite(s), name
            continue
        assert abs(s - ws) <= 1e-14 * abs(ws), (name, s, ws)
        # N_s(x) summed over k in order: the minimum is the reference's per-x sum in that order
        assert lo == min(sum(rho[x].ravel()[k] for k in range(rho[x].size)) for x in range(NX)), name
        if name == "negative":
            assert lo < 0


def test_cupy_table_has_the_probe():
    from solver.bsp import kernels
    assert kernels.REFERENCE["density_probe"] == "solver.bsp.dens.density_probe"


@pytest.mark.gpu
def test_cuda_probe_matches_the_reference_and_repeats(rng):
    be = get_backend("cupy")
    cp = be.xp
    m = Model(load(None, ["numerics.backend=cupy"]))
    for name, rho in _cases(rng).items():
        out = [dens.density_probe(m, be, cp.asarray(rho)).result() for _ in range(3)]
        assert all(np.array_equal(o, out[0], equal_nan=True) for o in out), name  # bitwise, pool reused
        s, lo = out[0]
        ws, wl = _want(rho)
        if name in ("nan", "inf"):
            assert not np.isfinite(s), name
        else:
            assert abs(s - ws) <= 1e-14 * abs(ws) and abs(lo - wl) <= 1e-14 * abs(wl), name


# ---------------------------------------------------------------------------- scalars_probe
def _scalar_case(rng, NX=9, NS=2, NW=12, NPHI=8):
    m = Model(load(None, [f"mesh.NX={NX}", f"mesh.N_sbn={NS}", f"mesh.NW={NW}", f"mesh.NPHI={NPHI}"]))
    Phi = rng.uniform(0.0, 1.0, (NX, 3, NS, NW, NPHI))
    Phi[0, 1, 0, 3, 2] = -0.25  # a negative value on the contact node x = 0, a large one on x = NX - 1
    Phi[NX - 1, 2, NS - 1, NW - 1, 0] = 7.5
    rho = rng.uniform(0.1, 2.0, (NX, 3, NS))
    return m, rho, Phi


def _scalar_want(m, rho, Phi):
    j_sub = m.dw * m.dphi * np.einsum("inplm,nlm->inp", Phi, m.a1)
    ends = Phi[[0, -1]]
    return rho.sum(axis=(1, 2)), j_sub.sum(axis=(1, 2)), np.array([ends.min(), ends.max()])


def test_reference_scalars_probe_is_the_host_fields_sums(rng):
    m, rho, Phi = _scalar_case(rng)
    got = dens.scalars_probe(m, NP, rho, Phi)
    r, j, c = _scalar_want(m, rho, Phi)
    assert got.shape == (2 * m.NX + 2,)
    assert np.array_equal(got, np.concatenate([r, j, c]))
    assert list(c) == [-0.25, 7.5]


@pytest.mark.parametrize("NX, NS, NW, NPHI", [(9, 2, 12, 8), (9, 1, 7, 4), (11, 3, 40, 16)])
def test_emulated_cuda_scalars_probe_matches_the_reference(emulated_cuda, rng, NX, NS, NW, NPHI):
    m, rho, Phi = _scalar_case(rng, NX, NS, NW, NPHI)
    got = emulated_cuda.dens.scalars_probe(m, NP, rho, Phi)
    r, j, c = _scalar_want(m, rho, Phi)
    assert np.abs(got[:NX] - r).max() <= 1e-14 * np.abs(r).max()
    assert np.abs(got[NX:2 * NX] - j).max() <= 1e-13 * np.abs(j).max()
    assert np.array_equal(got[2 * NX:], c)  # the min and max exactly


@pytest.mark.parametrize("where", [(0, 1, 0, 3, 2), (0, 0, 0, 0, 0), (-1, 2, 0, 5, 7)])
def test_emulated_cuda_scalars_probe_propagates_a_nan_on_a_contact_node(emulated_cuda, rng, where):
    # NumPy's min and max give NaN where a contact node holds one; a bare `v < lo ? v : lo` would drop it
    m, rho, Phi = _scalar_case(rng, 9, 1, 40, 8)
    Phi[where] = np.nan
    got = emulated_cuda.dens.scalars_probe(m, NP, rho, Phi)
    want = dens.scalars_probe(m, NP, rho, Phi)
    assert np.isnan(want[2 * m.NX:]).all() and np.isnan(got[2 * m.NX:]).all()


def test_scalars_probe_is_a_phase_with_a_cuda_fast_path(emulated_cuda):
    from solver.bsp import kernels
    assert kernels.REFERENCE["scalars_probe"] == "solver.bsp.dens.scalars_probe"
    assert emulated_cuda.TABLE["scalars_probe"] is emulated_cuda.dens.scalars_probe


@pytest.mark.gpu
def test_cuda_scalars_probe_matches_the_reference_and_repeats(rng):
    be = get_backend("cupy")
    cp = be.xp
    m, rho, Phi = _scalar_case(rng, NX=65, NS=6, NW=300, NPHI=48)
    m = Model(load(None, ["numerics.backend=cupy", "mesh.NX=65", "mesh.N_sbn=6", "mesh.NW=300", "mesh.NPHI=48"]))
    out = [dens.scalars_probe(m, be, cp.asarray(rho), cp.asarray(Phi)) for _ in range(3)]
    assert all(np.array_equal(o, out[0]) for o in out)  # bitwise run to run
    r, j, c = _scalar_want(m, rho, Phi)
    NX = 65
    assert np.abs(out[0][:NX] - r).max() <= 1e-14 * np.abs(r).max()
    assert np.abs(out[0][NX:2 * NX] - j).max() <= 1e-13 * np.abs(j).max()
    assert np.array_equal(out[0][2 * NX:], c)
    Phi[-1, 1, 2, 100, 30] = np.nan  # NaN on a contact node: NaN, as NumPy's min and max
    got = dens.scalars_probe(m, be, cp.asarray(rho), cp.asarray(Phi))
    assert np.isnan(got[2 * NX:]).all() and np.array_equal(got[:2 * NX - 1], out[0][:2 * NX - 1])
