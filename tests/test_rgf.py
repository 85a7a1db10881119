"""rgf (paper 002): Hamiltonian pinned by bulk and wire gaps, leads, four-step RGF, kernels, Table 1."""
import numpy as np
import pytest

from solver.rgf import sched
from solver.rgf.leads import self_energies, self_energies_cell
from solver.rgf.rgf import BatchedOps, ComplexOps, Device, dense_reference
from solver.rgf.tb import bulk_gap, hopping_block, load_params
from solver.rgf.wire import build_wire, cell_hamiltonian, wire_bands, wire_gap


@pytest.mark.parametrize("name,so,gap,kmin", [("jancu1998", True, 1.170, 0.846), ("jancu1998", False, 1.184, 0.846),
                                              ("boykin2004", True, 1.131, 0.813), ("boykin2004", False, 1.147, 0.813)])
def test_bulk_gap(name, so, gap, kmin):
    g = bulk_gap(load_params(name), so)
    assert g["gap_eV"] == pytest.approx(gap, abs=6e-4)
    assert g["kmin_2pi_over_a"] == pytest.approx(kmin, abs=6e-4)


def test_rotated_blocks_match_slater_koster(rng):
    p = load_params("jancu1998")
    h = p.hopping
    for _ in range(3):
        d = rng.normal(size=3)
        l, m, n = d / np.linalg.norm(d)
        H = hopping_block(p, d)
        assert H[0, 1] == pytest.approx(l * h["sp_sigma"])
        assert H[1, 0] == pytest.approx(-l * h["sp_sigma"])
        assert H[1, 2] == pytest.approx(l * m * (h["pp_sigma"] - h["pp_pi"]))
        assert H[1, 4] == pytest.approx(np.sqrt(3) * l * l * m * h["pd_sigma"] + m * (1 - 2 * l * l) * h["pd_pi"])
        assert H[4, 4] == pytest.approx(3 * l * l * m * m * h["dd_sigma"] + (l * l + m * m - 4 * l * l * m * m) * h["dd_pi"]
                                        + (n * n + l * l * m * m) * h["dd_delta"])
        assert H[8, 8] == pytest.approx((n * n - (l * l + m * m) / 2) ** 2 * h["dd_sigma"] + 3 * n * n * (l * l + m * m) * h["dd_pi"]
                                        + 0.75 * (l * l + m * m) ** 2 * h["dd_delta"])


@pytest.mark.parametrize("n,gap", [(2, 3.095), (3, 2.183)])
def test_passivated_wire_gap(n, gap):
    g = wire_gap(build_wire(n, n, "boykin2004", False, 20.0), nk=3)
    assert g["gap_eV"] == pytest.approx(gap, abs=1e-3)
    assert g["k_cbm"] == 0.0 and g["k_vbm"] == 0.0


def test_block_size_and_hermiticity():
    w = build_wire(2, 1, "jancu1998", True)
    assert w.block_size == 20 * 2 * 1 * 2
    H00, H01 = cell_hamiltonian(w)
    assert np.allclose(H00, H00.conj().T)


def test_lead_elimination_matches_cell_decimation():
    w = build_wire(1, 1, "jancu1998", False)
    H00, H01 = cell_hamiltonian(w)
    Ez = 2.7 + 1e-6j
    SL, SR = self_energies_cell(Ez, H00.astype(complex), H01.astype(complex))
    sl, sr = self_energies(np, Ez, [d.astype(complex) for d in w.D], [c.astype(complex) for c in w.C])
    n = w.block_size
    assert np.abs(SL[:n, :n] - sl).max() < 1e-9 * np.abs(sl).max()
    assert np.abs(SR[-n:, -n:] - sr).max() < 1e-9 * np.abs(sr).max()


@pytest.fixture(scope="module")
def bulk_cell():
    w = build_wire(1, 1, "jancu1998", False, periodic=True)
    return w, wire_bands(w, np.linspace(-0.5, 0.5, 1201))


def _right_movers(B, E):
    """Upward crossings of E by the sorted bands over the Brillouin zone = right-moving modes."""
    below = B < E
    return int(np.sum(below[:-1] & ~below[1:]))


@pytest.mark.parametrize("E", [-1.0, 2.0, 3.0])
def test_bulk_supercell_integer_transmission(bulk_cell, E):
    w, B = bulk_cell
    modes = _right_movers(B, E)
    for eta in (1e-7, 1e-9):
        r = Device(w, 2, eta).solve(E)
        assert r["T_LR"] == pytest.approx(modes, abs=1e-4)
        assert r["T_RL"] == pytest.approx(r["T_LR"], rel=1e-10)
    assert modes > 0


def test_rgf_matches_dense_inverse():
    w = build_wire(1, 2, "jancu1998", False)
    for E in (-2.5, 5.0):
        ref = dense_reference(w, 3, E)
        for offdiag in ("row", "all"):
            r = Device(w, 3).solve(E, offdiag=offdiag)
            assert r["T_LR"] == pytest.approx(ref["T_LR"], rel=1e-9, abs=1e-12)
            assert np.allclose(r["ldos_layers"], ref["ldos_layers"], rtol=1e-9, atol=1e-12)
            assert r["T_RL"] == pytest.approx(r["T_LR"], rel=1e-9, abs=1e-12)


def test_batched_energies_match_single():
    # stacks over energies (one batched call per block operation) = one energy at a time; the
    # leads of one cross-section serve wires of every length
    w = build_wire(1, 1, "jancu1998", False)
    Es = np.array([-2.5, 4.6, 5.3, 7.7])
    for L in (2, 3):
        dev = Device(w, L)
        sig = dev.self_energies((Es + 1j * dev.eta).reshape(-1, 1, 1))
        rb = dev.solve(Es, BatchedOps(np), sigmas=sig)
        assert rb["ldos_layers"].shape == (4, 4 * L)
        for k, E in enumerate(Es):
            r = dev.solve(float(E))
            assert rb["T_LR"][k] == pytest.approx(r["T_LR"], rel=1e-10, abs=1e-12)
            assert rb["T_RL"][k] == pytest.approx(r["T_RL"], rel=1e-10, abs=1e-12)
            assert np.allclose(rb["ldos_layers"][k], r["ldos_layers"], rtol=1e-10, atol=1e-12)
    assert rb["T_LR"][2] == pytest.approx(2.0, abs=1e-3)  # a plateau of the 1 x 1 wire


def test_spin_orbit_wire_transmission_symmetric():
    w = build_wire(1, 1, "jancu1998", True)
    r = Device(w, 2).solve(-2.5)
    assert r["T_LR"] > 0.5 and r["T_RL"] == pytest.approx(r["T_LR"], rel=1e-9)


def test_step3_product_count():
    # full triangle per half: sum_{i} (m - 1 - i) = (m-1)m/2 products per half, m = 2 X-UC
    r = Device(build_wire(1, 1), 3).solve(3.0, offdiag="all")
    m = 6
    assert r["n_products"] == 2 * (m - 1) * m // 2


@pytest.mark.parametrize("case", [1, 2, 3, 4])
def test_numba_cases_match_blas(case):
    pytest.importorskip("numba")
    from solver.rgf.kernels import case_ops

    w = build_wire(1, 2, "jancu1998", False)
    dev = Device(w, 2)
    ref = dev.solve(5.0, ComplexOps(), offdiag="all")
    ops = case_ops(case)
    assert ops.name == ("aos", "soa", "tiled", "sched")[case - 1]
    r = dev.solve(5.0, ops, offdiag="all")
    assert r["T_LR"] == pytest.approx(ref["T_LR"], rel=1e-10)
    assert np.allclose(r["ldos_layers"], ref["ldos_layers"], rtol=1e-10)


def test_table1_exact():
    eff = [r["efficiency_scheduled"] for r in sched.table1(7, 80, 32)]
    assert eff == pytest.approx([80 / 96, 1, (2 + 80 / 96) / 3, 1, (4 + 80 / 96) / 5, 1, (6 + 80 / 96) / 7])
    assert sched.average(7) == pytest.approx(0.9601, abs=5e-5)
    assert sched.average(199) == pytest.approx(0.997, abs=5e-4)  # the paper's 99.7 % for X-UC = 100
    assert sched.efficiency(5, scheduled=False) == pytest.approx(80 / 96)
    assert sched.parts(100, 32) == [32, 32, 32, 4]


def test_measured_scaling_speedups_and_shared_gpu(tmp_path):
    """Fig 8a table from timed chunk runs: speed-ups against the 1-worker runs, GPUs counted from
    the chunks' device ids (two processes on one GPU count as one GPU)."""
    import json

    import pandas as pd

    from solver.rgf.bench import measured_scaling
    from solver.rgf.plots import fig8a_measured

    runs = {(1, 1): (40.0, [0]), (1, 2): (44.0, [0, 0]), (2, 2): (30.0, [0, 0]), (2, 4): (24.0, [0, 1, 0, 1])}
    paths = []
    for (w, c), (mk, dev) in runs.items():
        p = tmp_path / f"w{w}_c{c}.csv"
        pd.DataFrame({"chunk": range(c), "device": dev, "process_s": [mk / 2] * c, "compute_s": [1.0] * c}).to_csv(p)
        p.with_name(p.stem + ".run.json").write_text(json.dumps(
            {"config": {"workers": w, "chunks": c, "devices": "gpu"}, "makespan_s": mk}))
        paths.append(p)
    df = measured_scaling(paths, tmp_path / "fig8a.csv").set_index(["workers", "chunks"])
    assert df.loc[(2, 2), "speedup_vs_1worker_same_chunks"] == pytest.approx(44.0 / 30.0)
    assert df.loc[(2, 4), "speedup_vs_1worker_1chunk"] == pytest.approx(40.0 / 24.0)
    assert df.loc[(2, 4), "efficiency_vs_1worker_1chunk"] == pytest.approx(40.0 / 24.0 / 2)
    assert np.isnan(df.loc[(2, 4), "speedup_vs_1worker_same_chunks"])
    assert df.loc[(2, 2), "n_gpus"] == 1 and df.loc[(2, 4), "n_gpus"] == 2
    fig8a_measured(tmp_path / "fig8a.csv", tmp_path / "fig8a.png", "t")
    assert (tmp_path / "fig8a.png").stat().st_size > 0
