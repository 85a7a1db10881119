"""The Table 2 benchmark of paper 000: every (solver, preconditioner, implementation / threads)
on the captured Newton systems, SuperLU beside, written as table2_krylov.csv,
table2_krylov_systems.csv and run.json."""
from __future__ import annotations

import time

import numpy as np
import scipy.sparse as sp
import scipy.sparse.linalg as spla

from solver.bsp.krylov.capture import capture_systems, load_systems, save_systems, systems_key
from solver.bsp.krylov.ops import make_operator, numba_kernel, vector_ops
from solver.bsp.krylov.precond import ILUT_DEFAULTS, make_preconditioner
from solver.bsp.krylov.solvers import IDR_S, PAPER_TABLE2, SOLVERS, TABLE2_ORDER


def _variants(threads_list, with_scipy=True):
    """(impl, threads): scipy SpMV/NumPy vector ops (one thread) and numba at each thread count."""
    out = [("scipy", 1)] if with_scipy else []
    return out + [("numba", int(t)) for t in threads_list]


def _warmup():
    """Compile the numba kernels outside the timings."""
    A = sp.csr_matrix(sp.eye(8) * 2.0 + sp.eye(8, k=1) * 0.1)
    b = np.ones(8)
    ops = numba_kernel("ops")()
    op = make_operator(A, "numba")
    P = make_preconditioner(A, "ilu0")
    for f in SOLVERS.values():  # every kernel (axpby, axpbypcz, dot, SpMV, ILU(0) solves) is used
        f(op.matvec, b, P.solve, rmatvec=op.rmatvec, precond_T=P.solve_T, ops=ops)


def benchmark(systems, solvers=TABLE2_ORDER, preconds=("ilut",), threads=(1,), tol=1e-8, maxiter=1000,
              stage="steps", with_scipy=True, ilut=None, superlu=True, log=None) -> tuple:
    """Solve every system with every (solver, preconditioner, impl/threads); returns
    (per_system DataFrame, table DataFrame).  ``stage``: 'steps' (the time-step systems: the cost
    per step), 'startup' or 'all'.  Preconditioner setup is done once per system and
    preconditioner and timed separately (setup_s); it is added to every solver's cost per step."""
    import pandas as pd

    ilut = dict(ilut or {})
    sel = [s for s in systems if stage == "all" or (stage == "steps") == (s["step"] > 0)]
    if not sel:
        raise ValueError(f"no captured systems for stage {stage!r}")
    n_steps = max(1, len({s["step"] for s in sel if s["step"] > 0})) if stage != "startup" else 1
    _warmup()
    rows = []
    for impl, t in _variants(threads, with_scipy):
        ops, t = vector_ops(impl, t)
        ops_list = [make_operator(s["A"], impl) for s in sel]
        for pk in preconds:
            pcs = [make_preconditioner(s["A"], pk, **(ilut if pk == "ilut" else {})) for s in sel]
            for name in solvers:
                f = SOLVERS[name]
                for s, op, pc in zip(sel, ops_list, pcs):
                    nmv = {"mv": 0, "ps": 0}

                    def mv(v, _op=op):
                        nmv["mv"] += 1
                        return _op.matvec(v)

                    def ps(v, _pc=pc):
                        nmv["ps"] += 1
                        return _pc.solve(v)
                    t0 = time.perf_counter()
                    res = f(mv, s["b"], ps, rmatvec=op.rmatvec, precond_T=pc.solve_T, tol=tol,
                            maxiter=maxiter, ops=ops)
                    dt = time.perf_counter() - t0
                    x = np.asarray(res.x)
                    bn = np.linalg.norm(s["b"])
                    rows.append({"solver": name, "precond": pk, "impl": impl, "threads": t, "step": s["step"],
                                 "call": s["call"], "x_bc": s["x_bc"], "iterations": res.iterations,
                                 "matvecs": nmv["mv"], "psolves": nmv["ps"], "converged": bool(res.converged),
                                 "breakdown": res.breakdown or "", "setup_s": pc.setup_s, "solve_s": dt,
                                 "precond_nnz": pc.nnz,
                                 "rel_residual": float(np.linalg.norm(s["b"] - s["A"] @ x) / bn),
                                 "rel_error_vs_lu": float(np.linalg.norm(x - s["x"]) / np.linalg.norm(s["x"]))})
                if log:
                    last = rows[-len(sel):]
                    print(f"{impl} t={t} {pk} {name}: {sum(r['solve_s'] for r in last):.3f} s solve, "
                          f"{sum(r['iterations'] for r in last)} it, conv {sum(r['converged'] for r in last)}/{len(sel)}",
                          file=log, flush=True)
    if superlu:
        for s in sel:
            for order in ("NATURAL", "COLAMD"):
                A = sp.csc_matrix(s["A"])
                t0 = time.perf_counter()
                lu = spla.splu(A, permc_spec=order)
                t1 = time.perf_counter()
                x = lu.solve(s["b"])
                t2 = time.perf_counter()
                bn = np.linalg.norm(s["b"])
                rows.append({"solver": f"superlu_{order.lower()}", "precond": "", "impl": "scipy", "threads": 1,
                             "step": s["step"], "call": s["call"], "x_bc": s["x_bc"], "iterations": 0, "matvecs": 0,
                             "psolves": 0, "converged": True, "breakdown": "", "setup_s": t1 - t0, "solve_s": t2 - t1,
                             "precond_nnz": int(lu.L.nnz + lu.U.nnz),
                             "rel_residual": float(np.linalg.norm(s["b"] - s["A"] @ x) / bn),
                             "rel_error_vs_lu": float(np.linalg.norm(x - s["x"]) / np.linalg.norm(s["x"]))})
    per = pd.DataFrame(rows)
    g = per.groupby(["solver", "precond", "impl", "threads"], sort=False)
    table = g.agg(systems=("call", "size"), iterations=("iterations", "sum"), matvecs=("matvecs", "sum"),
                  setup_s=("setup_s", "sum"), solve_s=("solve_s", "sum"), converged=("converged", "all"),
                  n_converged=("converged", "sum"), max_rel_residual=("rel_residual", "max"),
                  max_rel_error_vs_lu=("rel_error_vs_lu", "max"), precond_nnz=("precond_nnz", "mean")).reset_index()
    table["systems_per_step"] = table["systems"] / n_steps
    table["iterations_per_system"] = table["iterations"] / table["systems"]
    table["setup_per_step_s"] = table["setup_s"] / n_steps
    table["solve_per_step_s"] = table["solve_s"] / n_steps
    table["time_per_step_s"] = (table["setup_s"] + table["solve_s"]) / n_steps
    table["stage"] = stage
    table["paper_1core_s"] = [PAPER_TABLE2.get(s, (np.nan, np.nan))[0] for s in table["solver"]]
    table["paper_16core_s"] = [PAPER_TABLE2.get(s, (np.nan, np.nan))[1] for s in table["solver"]]
    cols = ["solver", "precond", "impl", "threads", "iterations_per_system", "time_per_step_s", "setup_per_step_s",
            "solve_per_step_s", "converged", "n_converged", "systems", "systems_per_step", "max_rel_residual",
            "max_rel_error_vs_lu", "matvecs", "precond_nnz", "stage", "paper_1core_s", "paper_16core_s"]
    return per, table[cols]


def run_table2(out_dir, cfg_path=None, overrides=(), steps=2, solvers=TABLE2_ORDER, preconds=("ilut",),
               threads=(1,), tol=1e-8, maxiter=1000, stage="steps", ilut=None, systems_path=None,
               with_scipy=True, log=None) -> dict:
    """Capture (or load) the systems, run the benchmark, write table2_krylov.csv,
    table2_krylov_systems.csv and run.json into ``out_dir`` (atomically)."""
    from pathlib import Path

    import pandas as pd

    from solver import io, provenance
    from solver.bsp.model import load

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    cfg = load(cfg_path, list(overrides) + [f"time.steps={int(steps)}", "time.t_end_ps=null"])
    t0 = time.perf_counter()
    key = provenance.config_hash(cfg)  # the resolved run config: mesh, physics, steps
    systems = None
    if systems_path and Path(systems_path).exists():
        if systems_key(systems_path) == key:
            systems = load_systems(systems_path)
        elif log:
            log(f"{systems_path}: captured with another configuration; capturing again")
    if systems is None:
        systems = capture_systems(cfg_path, overrides, steps)
        if systems_path:
            save_systems(systems_path, systems, {"config": str(cfg_path), "overrides": list(overrides),
                                                 "steps": int(steps), "config_hash": key})
    capture_s = time.perf_counter() - t0
    per, table = benchmark(systems, solvers, preconds, threads, tol, maxiter, stage, with_scipy, ilut, log=log)
    io.write_csv(per, out / "table2_krylov_systems.csv", float_format="%.6e")
    io.write_csv(table, out / "table2_krylov.csv", float_format="%.6g")
    A0 = systems[-1]["A"]
    calls = pd.Series([s["step"] for s in systems]).value_counts().sort_index()
    extra = {"krylov": {"solvers": list(solvers), "preconds": list(preconds), "threads": list(threads), "tol": tol,
                        "maxiter": maxiter, "stage": stage, "ilut": {**ILUT_DEFAULTS, **(ilut or {})},
                        "idr_s": IDR_S, "n": int(A0.shape[0]), "nnz": int(A0.nnz),
                        "systems_per_step": {int(k): int(v) for k, v in calls.items()},
                        "capture_s": capture_s, "systems_file": str(systems_path) if systems_path else None,
                        "numba_threading_layer": _threading_layer()}}
    io.write_json(out / "run.json", provenance.collect(cfg, None, extra))
    return {"table": table, "per_system": per, "systems": systems}


def _threading_layer():
    try:
        import numba
        return numba.threading_layer()
    except Exception:  # noqa: BLE001 - not initialised or not installed
        return None
