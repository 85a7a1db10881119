"""Drivers behind the CLI: bulk/wire gap tables, T(E)/LDOS sweeps (chunked), the optimization
cases (Table 3 / Fig 7), the cost growth (Fig 2), Table 1 and the energy strong scaling (Fig 8a).
Every CSV is written atomically with a ``<name>.run.json`` provenance record beside it."""
from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pandas as pd

from solver import io, provenance
from solver.backend import get_backend
from solver.timing import PhaseTimer

EXPECTED_BULK = {  # ../shared/data/tb/si_sp3d5s_star.yaml comments and issue 6
    ("jancu1998", True): (1.170, 0.846), ("jancu1998", False): (1.184, 0.846),
    ("boykin2004", True): (1.131, 0.813), ("boykin2004", False): (1.147, 0.813),
}
EXPECTED_WIRE = {2: 3.095, 3: 2.183, 4: 1.798}  # Boykin, no SO, shift 20 eV (issue 6)
STEPS = ("leads", "step1", "step2", "step3", "step4")


def write_with_record(df, path, config=None, backend=None, extra=None):
    path = Path(path)
    io.write_csv(df, path)
    io.write_json(path.with_name(path.stem + ".run.json"), provenance.collect(config, backend, extra))


def bulk_table(out_csv, fig_path=None):
    from solver.rgf.tb import bulk_bands, bulk_gap, load_params

    rows = []
    for (name, so), (eg, km) in EXPECTED_BULK.items():
        g = bulk_gap(load_params(name), so)
        rows.append({"set": name, "spin_orbit": so, "gap_eV": g["gap_eV"], "kmin_2pi_over_a": g["kmin_2pi_over_a"],
                     "expected_gap_eV": eg, "expected_kmin": km})
    df = pd.DataFrame(rows)
    write_with_record(df, out_csv, {"command": "bulk"})
    if fig_path:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        p = load_params("jancu1998")
        t = np.linspace(0, 1, 60)
        path = [np.array([0.5, 0.5, 0.5]) * (1 - x) for x in t] + [np.array([1.0, 0, 0]) * x for x in t[1:]]
        E = bulk_bands(p, path, True) - bulk_gap(p, True)["vbm_eV"]
        fig, ax = plt.subplots(figsize=(4.5, 4))
        ax.plot(np.arange(len(path)), E, "k-", lw=0.8)
        ax.set_xticks([0, len(t) - 1, len(path) - 1], ["L", r"$\Gamma$", "X"])
        ax.set_ylim(-6, 6)
        ax.set_ylabel("E (eV)")
        ax.set_title("bulk Si, sp3d5s* (Jancu) with spin-orbit")
        io.save_figure(fig, fig_path)
    return df


def wire_gap_table(out_csv, sizes=(2, 3, 4), tb_set="boykin2004", spin_orbit=False, shift=20.0, nk=6):
    from solver.rgf.wire import build_wire, wire_gap

    rows = []
    for n in sizes:
        t0 = time.perf_counter()
        g = wire_gap(build_wire(n, n, tb_set, spin_orbit, shift), nk=nk)
        rows.append({"ny": n, "nz": n, "set": tb_set, "spin_orbit": spin_orbit, "shift_eV": shift, **g,
                     "expected_gap_eV": EXPECTED_WIRE.get(n, np.nan), "time_s": time.perf_counter() - t0})
    df = pd.DataFrame(rows)
    write_with_record(df, out_csv, {"command": "wire-gaps", "sizes": list(sizes), "set": tb_set, "shift": shift})
    return df


def make_ops(backend_name, case=None, gpu_kernel="cublas"):
    from solver.rgf.kernels import GPUStep3Ops, NumbaOps
    from solver.rgf.rgf import ComplexOps

    if case in (1, 2, 3, 4):
        return NumbaOps(case)
    if case == 5:
        return GPUStep3Ops(gpu_kernel)
    be = get_backend(backend_name)
    return ComplexOps(be.xp)


def energy_grid(emin, emax, n):
    return np.linspace(emin, emax, n)


def sweep(out_csv, ny, nz, xuc, energies, tb_set="jancu1998", spin_orbit=False, shift=20.0, eta=1e-6,
          backend="numpy", chunk=0, n_chunks=1, config=None):
    """T(E) and LDOS(E) for the chunk ``chunk`` of ``n_chunks`` (energies dealt round-robin)."""
    from solver.rgf.rgf import Device
    from solver.rgf.wire import build_wire

    be = get_backend(backend)
    ops = make_ops(backend)
    w = build_wire(ny, nz, tb_set, spin_orbit, shift)
    dev = Device(w, xuc, eta)
    Es = np.asarray(energies)[chunk::n_chunks]
    rows = []
    t_all = time.perf_counter()
    for E in Es:
        timer = PhaseTimer(be)
        t0 = time.perf_counter()
        r = dev.solve(float(E), ops, offdiag="row", timer=timer)
        timer.end_step()
        ph = timer.summary()["total_s"]
        rows.append({"E_eV": float(E), "T_LR": r["T_LR"], "T_RL": r["T_RL"], "LDOS_per_eV": r["ldos"],
                     "LDOS_mid_layer_per_eV": float(r["ldos_layers"][dev.N // 2]),
                     "time_s": time.perf_counter() - t0, **{f"{k}_s": ph.get(k, 0.0) for k in STEPS}})
    wall = time.perf_counter() - t_all
    df = pd.DataFrame(rows)
    write_with_record(df, out_csv, config, be, {"chunk": chunk, "n_chunks": n_chunks, "wall_s": wall,
                                               "block_size": w.block_size, "n_blocks": dev.N,
                                               "atoms": 4 * w.atoms_per_layer * xuc})
    return df


def cases_benchmark(out_csv, ny, nz, xuc, E, cases=(1, 2, 3, 4), tb_set="jancu1998", offdiag="all",
                    gpu_kernels=("tiled", "cublas"), config=None):
    """Wall time of the four RGF steps (and the leads) for the optimization cases at one energy."""
    from solver.rgf.rgf import Device
    from solver.rgf.wire import build_wire

    import numba

    w = build_wire(ny, nz, tb_set, False)
    dev = Device(w, xuc)
    small = Device(build_wire(1, 1, tb_set, False), 2)
    rows = []
    ref = None
    for case in cases:
        for kern in (gpu_kernels if case == 5 else (None,)):
            ops = make_ops("numpy", case, kern or "cublas")
            small.solve(E, ops, offdiag=offdiag)  # JIT / kernel compilation outside the timing
            be = get_backend("numpy")
            timer = PhaseTimer(be)
            t0 = time.perf_counter()
            r = dev.solve(E, ops, offdiag=offdiag, timer=timer)
            total = time.perf_counter() - t0
            timer.end_step()
            ph = timer.summary()["total_s"]
            ref = ref if ref is not None else r["T_LR"]
            rows.append({"case": case, "ops": ops.name, "threads": numba.get_num_threads(), "ny": ny, "nz": nz,
                         "xuc": xuc, "block": w.block_size, "n_blocks": dev.N, "step3_products": r["n_products"],
                         **{f"{k}_s": ph.get(k, 0.0) for k in STEPS}, "total_s": total, "T_LR": r["T_LR"],
                         "T_diff_vs_first": abs(r["T_LR"] - ref)})
    df = pd.DataFrame(rows)
    write_with_record(df, out_csv, config, None, {"E_eV": E, "offdiag": offdiag})
    return df


def cost_scaling(out_csv, lengths, sections, E, base_section=(2, 2), base_length=4, tb_set="jancu1998",
                 backend="numpy", config=None):
    """Fig 2: step-3 products and times vs X-UC (at ``base_section``) and vs cross-section
    (at ``base_length``), full off-diagonal triangle, BLAS block algebra."""
    from solver.rgf.rgf import Device
    from solver.rgf.wire import build_wire

    be = get_backend(backend)
    ops = make_ops(backend)
    rows = []
    plan = [("length", base_section, L) for L in lengths] + [("section", tuple(s), base_length) for s in sections]
    for kind, (ny, nz), L in plan:
        w = build_wire(ny, nz, tb_set, False)
        dev = Device(w, L)
        timer = PhaseTimer(be)
        r = dev.solve(E, ops, offdiag="all", timer=timer)
        timer.end_step()
        ph = timer.summary()["total_s"]
        rows.append({"sweep": kind, "xuc": L, "ny": ny, "nz": nz, "yz_uc": ny * nz, "block": w.block_size,
                     "n_blocks": dev.N, "step3_products": r["n_products"],
                     **{f"{k}_s": ph.get(k, 0.0) for k in STEPS}})
    df = pd.DataFrame(rows)
    write_with_record(df, out_csv, config, be, {"E_eV": E})
    return df


def table1_csv(out_csv, rows=80, threads=32, targets=(7, 199, 399)):
    from solver.rgf import sched

    df = pd.DataFrame(sched.table1(7, rows, threads))
    avg = [{"j_loop_iterations": f"average 1..{n}", "parts": "", "formula": "",
            "efficiency_scheduled": sched.average(n, rows, threads),
            "efficiency_unscheduled": sched.average(n, rows, threads, False)} for n in targets]
    df = pd.concat([df, pd.DataFrame(avg)], ignore_index=True)
    write_with_record(df, out_csv, {"rows": rows, "threads": threads})
    return df


def strong_scaling(chunk_csvs, out_csv, config=None):
    """Fig 8a from the measured per-chunk wall times: the makespan with P workers is the
    longest-processing-time schedule of the measured chunks (one Snakemake job per chunk)."""
    import json

    times = []
    for p in chunk_csvs:
        rec = json.loads(Path(p).with_name(Path(p).stem + ".run.json").read_text())
        times.append(rec["wall_s"])
    times = sorted(times, reverse=True)
    rows = []
    T1 = sum(times)
    for P in range(1, len(times) + 1):
        load = [0.0] * P
        for t in times:
            load[int(np.argmin(load))] += t
        rows.append({"workers": P, "makespan_s": max(load), "speedup": T1 / max(load),
                     "efficiency": T1 / max(load) / P, "n_chunks": len(times), "sum_chunk_s": T1})
    df = pd.DataFrame(rows)
    write_with_record(df, out_csv, config, None, {"chunk_times_s": times})
    return df
