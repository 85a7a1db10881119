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


def make_ops(backend_name, case=None, gpu_kernel="cublas", batched=False):
    """The block algebra: optimization case ``case`` of Table 3 (solver.rgf.kernels), else the BLAS
    reference on the backend's array module (``batched``: energies stacked)."""
    from solver.rgf.kernels import case_ops
    from solver.rgf.rgf import BatchedOps, ComplexOps

    if case is not None:
        return case_ops(case, gpu_kernel)
    be = get_backend(backend_name)
    return BatchedOps(be.xp) if batched else ComplexOps(be.xp)


def energy_grid(emin, emax, n):
    return np.linspace(emin, emax, n)


BATCH_MAX_BLOCK = 256  # batch energies on the GPU up to this block size (measured: docs/performance-rgf.md)


def auto_batch(backend, block, n_blocks, n_energies, mem_bytes=8e9):
    """Energies per batched RGF call: 1 on NumPy (a stacked matmul loops anyway) and for blocks
    above BATCH_MAX_BLOCK on the GPU (one ZGEMM of n = 2560 already fills it); otherwise as many
    as fit ``mem_bytes`` of stored left/right-connected blocks (N n^2 x 16 B per energy)."""
    if backend != "cupy" or block > BATCH_MAX_BLOCK:
        return 1
    per_e = 3 * n_blocks * block * block * 16
    return int(max(1, min(n_energies, 64, mem_bytes // per_e)))


def sweep(out_csv, ny, nz, xuc, energies, tb_set="jancu1998", spin_orbit=False, shift=20.0, eta=1e-6,
          backend="numpy", chunk=0, n_chunks=1, config=None, batch=1):
    """T(E) and LDOS(E) for the chunk ``chunk`` of ``n_chunks`` (energies dealt round-robin), for
    one or several lengths ``xuc`` (the leads depend on the cross-section only: computed once per
    energy and shared).  ``batch`` energies go through one batched RGF (0 = :func:`auto_batch`)."""
    from solver.rgf.rgf import Device
    from solver.rgf.wire import build_wire

    lengths = [int(x) for x in np.atleast_1d(xuc)]
    be = get_backend(backend)
    w = build_wire(ny, nz, tb_set, spin_orbit, shift)
    devs = [Device(w, L, eta) for L in lengths]
    Es = np.asarray(energies, dtype=float)[chunk::n_chunks]
    if not batch:
        batch = auto_batch(backend, w.block_size, max(d.N for d in devs), len(Es))
    ops = make_ops(backend, batched=batch > 1)
    rows = []
    t_all = time.perf_counter()
    for b0 in range(0, len(Es), batch):
        Eb = Es[b0:b0 + batch]
        nb = len(Eb)
        t0 = time.perf_counter()
        lt = PhaseTimer(be)
        with lt.phase("leads"):
            Ez = Eb + 1j * eta
            sig = devs[0].self_energies(be.xp.asarray(Ez.reshape(-1, 1, 1)) if batch > 1 else complex(Ez[0]), be.xp)
        lt.end_step()
        t_leads = lt.summary()["total_s"]["leads"] / nb
        for dev in devs:
            timer = PhaseTimer(be)
            t1 = time.perf_counter()
            r = dev.solve(Eb if batch > 1 else float(Eb[0]), ops, offdiag="row", timer=timer, sigmas=sig)
            timer.end_step()
            ph = timer.summary()["total_s"]
            t_dev = (time.perf_counter() - t1) / nb
            for k, E in enumerate(Eb):
                pick = (lambda v: v[k]) if batch > 1 else (lambda v: v)  # noqa: E731
                lay = r["ldos_layers"][k] if batch > 1 else r["ldos_layers"]
                rows.append({"E_eV": float(E), "xuc": dev.n_cells, "T_LR": float(pick(r["T_LR"])),
                             "T_RL": float(pick(r["T_RL"])), "LDOS_per_eV": float(pick(r["ldos"])),
                             "LDOS_per_cell_per_eV": float(pick(r["ldos"])) / dev.n_cells,
                             "LDOS_mid_layer_per_eV": float(lay[dev.N // 2]), "batch": nb,
                             "time_s": t_dev + (t_leads if dev is devs[0] else 0.0), "leads_s": t_leads,
                             **{f"{st}_s": ph.get(st, 0.0) / nb for st in STEPS[1:]}})
        del sig
    wall = time.perf_counter() - t_all
    df = pd.DataFrame(rows)
    write_with_record(df, out_csv, config, be, {"chunk": chunk, "n_chunks": n_chunks, "wall_s": wall,
                                               "block_size": w.block_size, "n_blocks": [d.N for d in devs],
                                               "batch": batch, "xuc": lengths,
                                               "atoms": [4 * w.atoms_per_layer * L for L in lengths]})
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


def measured_scaling(run_csvs, out_csv, config=None):
    """Fig 8a from timed parallel runs (solver.rgf.scaling): one row per (workers,
    chunks) with the measured makespan; speed-up and efficiency against the 1-worker run with
    the same chunk count and against the 1-worker, 1-chunk run (when present)."""
    import json

    rows = []
    for p in run_csvs:
        p = Path(p)
        rec = json.loads(p.with_name(p.stem + ".run.json").read_text())
        df = pd.read_csv(p)
        rows.append({"workers": int(rec["config"]["workers"]), "chunks": int(rec["config"]["chunks"]),
                     "devices": rec["config"]["devices"],
                     "n_gpus": int(df.device.nunique()) if rec["config"]["devices"] == "gpu" else 0,
                     "makespan_s": rec["makespan_s"],
                     "sum_process_s": float(df.process_s.sum()), "sum_compute_s": float(df.compute_s.sum()),
                     "max_process_s": float(df.process_s.max())})
    df = pd.DataFrame(rows).sort_values(["chunks", "workers"]).reset_index(drop=True)
    one = df[df.workers == 1].set_index("chunks").makespan_s
    base = df[(df.workers == 1) & (df.chunks == 1)].makespan_s
    t11 = float(base.iloc[0]) if len(base) else np.nan
    df["speedup_vs_1worker_same_chunks"] = [one.get(c, np.nan) / m for c, m in zip(df.chunks, df.makespan_s)]
    df["speedup_vs_1worker_1chunk"] = t11 / df.makespan_s
    df["efficiency_vs_1worker_1chunk"] = df.speedup_vs_1worker_1chunk / df.workers
    write_with_record(df, out_csv, config, None, {"inputs": [str(p) for p in run_csvs]})
    return df


def _sync(xp):
    if xp is not np:
        xp.cuda.get_current_stream().synchronize()


def inverse_benchmark(out_csv, sizes=(64, 128, 256, 320, 512, 1024), batch=8, backend="cupy", reps=2,
                      gemm_sizes=(320, 1024, 2560), config=None):
    """Complex inverse of a stack of ``batch`` n x n blocks, three ways: the stacked
    ``xp.linalg.inv`` (CuPy: cuBLAS getrf/getriBatched), ``xp.linalg.solve`` against a stacked
    identity (CuPy: getrf/getrsBatched up to n = 256, gesv per matrix above), and one 2-D inverse
    per block (cuSOLVER gesv); plus the ZGEMM rate, the ceiling the RGF products run at.
    Time per block and GFLOP/s with 32/3 n^3 flop per inverse (LU + n right-hand sides)."""
    be = get_backend(backend)
    xp = be.xp
    rng = np.random.default_rng(0)
    rows = []

    def timeit(f):
        f()
        _sync(xp)
        t = time.perf_counter()
        for _ in range(reps):
            r = f()
        _sync(xp)
        return (time.perf_counter() - t) / reps, r

    for n in sizes:
        a = rng.normal(size=(batch, n, n)) + 1j * rng.normal(size=(batch, n, n)) + 4 * np.sqrt(n) * np.eye(n)
        A = xp.asarray(a)
        Ib = xp.ascontiguousarray(xp.broadcast_to(xp.eye(n, dtype=complex), A.shape))
        ref = None
        for method, f in (("per-block inv (gesv)", lambda: xp.stack([xp.linalg.inv(A[k]) for k in range(batch)])),
                          ("stacked solve", lambda: xp.linalg.solve(A, Ib)),
                          ("stacked inv", lambda: xp.linalg.inv(A))):
            if method == "stacked inv" and n > 512:
                continue
            t, r = timeit(f)
            r = np.asarray(r.get() if hasattr(r, "get") else r)
            ref = r if ref is None else ref
            rows.append({"kind": "inverse", "n": n, "batch": batch, "method": method, "s_per_block": t / batch,
                         "gflops": 32 / 3 * n ** 3 / (t / batch) / 1e9, "max_diff": float(np.abs(r - ref).max())})
    for n in gemm_sizes:
        a = xp.asarray(rng.normal(size=(n, n)) + 1j * rng.normal(size=(n, n)))
        t, _ = timeit(lambda: a @ a)
        rows.append({"kind": "zgemm", "n": n, "batch": 1, "method": "matmul", "s_per_block": t,
                     "gflops": 8 * n ** 3 / t / 1e9, "max_diff": 0.0})
        t, _ = timeit(lambda: xp.linalg.inv(a))
        rows.append({"kind": "inverse", "n": n, "batch": 1, "method": "2-D inv (gesv)", "s_per_block": t,
                     "gflops": 32 / 3 * n ** 3 / t / 1e9, "max_diff": 0.0})
    df = pd.DataFrame(rows)
    write_with_record(df, out_csv, config, be, {"reps": reps})
    return df


def batching_benchmark(out_csv, sections=((1, 1), (2, 2), (4, 4)), xuc=4, n_energies=16, emin=1.3, emax=2.6,
                       backend="cupy", config=None):
    """Whole RGF (leads + four steps, transport mode) per energy: one energy at a time vs all
    ``n_energies`` in one batched call (inverses by stacked solve, or by the stacked inv)."""
    from solver.rgf import leads
    from solver.rgf.rgf import Device
    from solver.rgf.wire import build_wire

    be = get_backend(backend)
    xp = be.xp
    Es = np.linspace(emin, emax, n_energies)
    rows = []
    orig = leads.inv
    for ny, nz in sections:
        dev = Device(build_wire(ny, nz, "jancu1998", False), xuc)
        ref = None
        for mode in ("one energy at a time", "batched, stacked solve", "batched, stacked inv"):
            batched = mode != "one energy at a time"
            if mode == "batched, stacked inv":
                if dev.wire.block_size > 320:
                    continue
                leads.inv = lambda xp_, a: xp_.linalg.inv(a)  # noqa: E731
            ops = make_ops(backend, batched=batched)
            try:
                dev.solve(Es[:2] if batched else float(Es[0]), ops)  # warm-up (plans, handles)
                _sync(xp)
                t = time.perf_counter()
                if batched:
                    T = dev.solve(Es, ops)["T_LR"]
                else:
                    T = np.array([dev.solve(float(E), ops)["T_LR"] for E in Es])
                _sync(xp)
                dt = time.perf_counter() - t
            finally:
                leads.inv = orig
            ref = T if ref is None else ref
            rows.append({"ny": ny, "nz": nz, "block": dev.wire.block_size, "xuc": xuc, "n_energies": n_energies,
                         "mode": mode, "s_per_energy": dt / n_energies,
                         "max_T_diff": float(np.abs(np.asarray(T) - ref).max())})
    df = pd.DataFrame(rows)
    write_with_record(df, out_csv, config, be, {"energies": Es.tolist()})
    return df
