"""numerics.bte_graph: the BTE stage replayed from a CUDA graph (solver/bsp/kernels/cuda/bte_graph.py) and
the overlap integrals W by one kernel (bsp_overlap of scattering.cu).

CPU tests: the schema key (default false, boolean), ``bte.graphed`` only on cupy; on the g++ build of the
.cu sources (conftest ``emulated_cuda``): bsp_overlap within 1e-14 of the array reference and symmetric
bit for bit, and bsp_wphi_rk with alpha and dt read from device memory (``from_scal``, what the graph
does) equal to the same kernel with them as arguments, bit for bit.  GPU tests (marked ``gpu``): the
graph's stages equal the unfused-launch path (bte.advance with bte_graph false) bit for bit over two
steps (the rings rotate, the first step's Phi is copied in), with and without scattering and with the
x term given (numerics.overlap); whole runs with the graph are byte-identical run to run and within
1e-12 of runs without it; the fault checks still see a NaN.
"""
import numpy as np
import pytest

from solver.backend import get_backend
from solver.bsp import bte, scattering

NP_BE = get_backend("numpy")


def test_schema_key_bte_graph():
    from solver.bsp.model import load
    from solver.config import ConfigError

    assert load(None, [])["numerics"]["bte_graph"] is False
    assert load(None, ["numerics.bte_graph=true"])["numerics"]["bte_graph"] is True
    with pytest.raises(ConfigError):
        load(None, ["numerics.bte_graph=sometimes"])


def test_graphed_only_on_cupy(bte_cases):
    m = bte_cases.model(NX=9, NS=2, NW=12, NPHI=8)
    assert not bte.graphed(m, NP_BE)
    assert not bte.graphed(m, get_backend("numba"))


def test_emulated_overlap_kernel(emulated_cuda, bte_cases, rng):
    m = bte_cases.model(NX=9, NS=3, NW=12, NPHI=8, NZ=17)
    chi = bte_cases.sine_chi(m) * (1 + 0.3 * rng.random((m.NX, 3, m.N_sbn, 1)))
    ref = scattering.overlap(m, NP_BE, chi)
    got = emulated_cuda.scattering.overlap(m, NP_BE, chi)
    assert got.shape == ref.shape == (9, 3, 3, 3, 3)
    assert bte_cases.rel(got, ref) <= 1e-14
    assert np.array_equal(got, got.transpose(0, 3, 4, 1, 2))
    # one entry by hand: dz sum_{j=1}^{NZ-2} chi_a^2 chi_b^2 in order j = 1 .. NZ-2
    a, b = chi[4, 1, 2], chi[4, 2, 0]
    acc = 0.0
    for j in range(1, m.NZ - 1):
        acc += (a[j] * a[j]) * (b[j] * b[j])
    assert got[4, 1, 2, 2, 0] == acc * m.dz


@pytest.mark.parametrize("s", [0, 1, 2])
def test_emulated_stage_scalars_from_device(emulated_cuda, bte_cases, rng, s):
    """alpha and dt read by the kernel from a device array (the graph's path) give the bits of the
    same values passed as arguments."""
    rk = emulated_cuda.rk
    m = bte_cases.model(kernels_mode="auto", NX=9, NS=2, NW=13, NPHI=8)
    d = bte_cases.inputs(m, rng, "random")
    P = d["Phi"]
    P0 = P * (1.0 + 0.2 * rng.random(P.shape)) if s > 0 else None
    G = scattering.scat_gain(m, NP_BE, d["PhiHat"], d["eps"], d["W"])
    Lc = scattering.scat_loss(m, NP_BE, d["eps"], d["W"])
    tx = rng.standard_normal(P.shape) * np.abs(G).max() / np.abs(P).max()
    alpha, dt = float(d["A"] * m.A3), 0.3 * m.dt_max(d["A"])
    outs = []
    for scal in (None, np.array([alpha, dt])):
        out, rho, PH = np.empty_like(P), np.empty(P.shape[:3]), np.empty(P.shape[:4])
        kw = dict(alpha=alpha, dt=dt) if scal is None else dict(alpha=0.0, dt=0.0, scal=scal)
        rk.stage_into(m, NP_BE, s, P0, P, G, Lc, tx, d["deps"], out, rho, PH, **kw)
        outs.append((out, rho, PH))
    for a, b in zip(*outs):
        assert np.array_equal(a, b)
    ref = rk.stage_update(m, NP_BE, s, P if P0 is None else P0, P, G, Lc, tx, d["deps"], d["A"], dt)
    for a, b in zip(outs[0], ref):
        assert np.array_equal(a, b)


# ---------------------------------------------------------------------------- GPU
def _gpu_models(bte_cases, mesh, extra=()):
    on = bte_cases.model(kernels_mode="auto", extra=("numerics.bte_graph=true", *extra), **mesh)
    off = bte_cases.model(kernels_mode="auto", extra=("numerics.bte_graph=false", *extra), **mesh)
    return on, off


@pytest.mark.gpu
@pytest.mark.parametrize("mesh, scat, closed, given_dx, rule", [
    (dict(NX=9, NS=2, NW=60, NPHI=48), True, False, False, "reference"),
    (dict(NX=9, NS=2, NW=60, NPHI=48), False, False, False, "reference"),
    (dict(NX=9, NS=1, NW=40, NPHI=24), True, True, False, "reference"),
    (dict(NX=9, NS=2, NW=30, NPHI=48), True, False, True, "reference"),
    (dict(NX=9, NS=2, NW=60, NPHI=48), True, False, False, "hybrid")])
def test_gpu_graph_stages_equal_launches(cupy_backend, bte_cases, rng, mesh, scat, closed, given_dx, rule):
    """Two time steps (6 stages) of bte.advance through the graph and without it: Phi, rho and PhiHat
    bit for bit; new dt and alpha every stage (the scalars the graph copies in); both contact rules
    (hybrid: WENO_x's inflow shape and flag captured in the graph)."""
    cp = cupy_backend.xp
    on, off = _gpu_models(bte_cases, mesh, (f"numerics.contact_rule={rule}",))
    assert bte.graphed(on, cupy_backend) and not bte.graphed(off, cupy_backend)
    d = bte_cases.inputs(on, rng, "random")
    g = {k: cp.asarray(v) for k, v in d.items() if k != "A"}
    state = {}
    for name, m in (("on", on), ("off", off)):
        Phi, rho, PhiHat = g["Phi"].copy(), g["rho"].copy(), g["PhiHat"].copy()
        seq = []
        for step in range(2):
            Phi0 = Phi
            for s in range(3):
                A = d["A"] * (1.0 + 0.1 * (3 * step + s))
                sd = bte.StageData(eps=g["eps"], deps_dx=g["deps"] * (1.0 + 0.1 * s), W=g["W"], PhiHat=PhiHat,
                                   rho=rho, rho_eq=g["rho_eq"], A_eps=A, closed=closed, scattering=scat)
                dt = 0.3 * m.dt_max(A)
                dx = bte.x_term(m, cupy_backend, Phi, sd) if given_dx else None
                Phi, (rho, PhiHat) = bte.advance(m, cupy_backend, s, Phi0, Phi, sd, dt, dx=dx)
                seq.append(tuple(cp.asnumpy(x) for x in (Phi, rho, PhiHat)))
        state[name] = seq
    for k, (a, b) in enumerate(zip(state["on"], state["off"])):
        for name, x, y in zip(("Phi", "rho", "PhiHat"), a, b):
            assert np.array_equal(x, y), (k, name, bte_cases.rel(x, y))


@pytest.mark.gpu
def test_gpu_overlap_kernel_matches_matmul(cupy_backend, bte_cases, rng):
    from solver.bsp.kernels.cuda import scattering as cscat
    cp = cupy_backend.xp
    m = bte_cases.model(NX=17, NS=6, NW=12, NPHI=8, NZ=33)
    chi = bte_cases.sine_chi(m) * (1 + 0.3 * rng.random((m.NX, 3, m.N_sbn, 1)))
    got = cp.asnumpy(cscat.overlap(m, cupy_backend, cp.asarray(chi)))
    assert bte_cases.rel(got, scattering.overlap(m, NP_BE, chi)) <= 1e-14
    assert np.array_equal(got, cp.asnumpy(cscat.overlap(m, cupy_backend, cp.asarray(chi))))


def _run(cupy_backend, out, *extra):
    from solver.bsp.model import load
    from solver.bsp.simulation import Simulation

    cfg = load(None, ["mesh.N_sbn=3", "mesh.NX=17", "mesh.NZ=17", "mesh.NW=40", "mesh.NPHI=12",
                      "numerics.backend=cupy", "time.steps=6", "time.t_end_ps=null",
                      "output.checkpoint_every_steps=0", "output.progress=false", *extra])
    sim = Simulation(cfg, cupy_backend, out, progress=False)
    sim.run()
    return sim


@pytest.mark.gpu
def test_gpu_run_with_graph_bitwise_repeatable_and_close_to_launches(cupy_backend, tmp_path):
    a = _run(cupy_backend, tmp_path / "a", "numerics.bte_graph=true")
    b = _run(cupy_backend, tmp_path / "b", "numerics.bte_graph=true")
    c = _run(cupy_backend, tmp_path / "c", "numerics.bte_graph=false")
    for name in ("profiles.csv", "scalars.csv"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes(), name
    be = cupy_backend
    for k in ("Phi", "rho", "V"):
        x, y = be.to_numpy(getattr(a.state, k)), be.to_numpy(getattr(c.state, k))
        assert np.abs(x - y).max() <= 1e-12 * np.abs(y).max(), k
    assert np.array_equal(be.to_numpy(a.state.Phi), be.to_numpy(b.state.Phi))


@pytest.mark.gpu
def test_gpu_graph_fault_check_sees_nan(cupy_backend, tmp_path):
    """A NaN in Phi reaches the graph's rho, and the density check stops the run (phase BTE)."""
    from solver.bsp.model import load
    from solver.bsp.simulation import Simulation
    from solver.config import RunFault

    cfg = load(None, ["mesh.N_sbn=3", "mesh.NX=17", "mesh.NZ=17", "mesh.NW=40", "mesh.NPHI=12",
                      "numerics.backend=cupy", "time.steps=4", "time.t_end_ps=null", "numerics.bte_graph=true",
                      "output.checkpoint_every_steps=0", "output.progress=false"])
    sim = Simulation(cfg, cupy_backend, None, progress=False)
    sim._timer_rows = []  # as Simulation.run
    sim.startup()
    sim.step()
    sim.state.Phi[3, 0, 0, 5, 2] = float("nan")
    with pytest.raises(RunFault, match="phase BTE"):
        sim.step()
