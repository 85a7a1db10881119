"""``python -m solver bsp krylov``: Table 2 of paper 000 (the arguments of rule bsp_table2)."""
from __future__ import annotations

from solver.bsp.krylov.solvers import SOLVERS, TABLE2_ORDER
from solver.config import float_option, int_option


def register_cli(bs) -> None:
    k = bs.add_parser("krylov", help="Table 2 of paper 000: ILUT + 10 Krylov solvers on the captured Newton systems")
    k.add_argument("config", nargs="?", default=None, help="run configuration (mesh, physics)")
    k.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    k.add_argument("--out", required=True, help="output folder (table2_krylov.csv, table2_krylov_systems.csv, run.json)")
    k.add_argument("--steps", type=int_option(1), default=2, help="time steps whose Newton systems are captured")
    k.add_argument("--solvers", default=",".join(TABLE2_ORDER))
    k.add_argument("--precond", default="ilut", help="comma list of none, ilut, ilu0")
    k.add_argument("--threads", default="1", help="comma list of numba thread counts")
    k.add_argument("--tol", type=float_option(exclusive_minimum=0), default=1e-8)
    k.add_argument("--maxiter", type=int_option(1), default=1000)
    k.add_argument("--stage", choices=["steps", "startup", "all"], default="steps")
    k.add_argument("--drop-tol", type=float_option(minimum=0), default=None)
    k.add_argument("--fill-factor", type=float_option(exclusive_minimum=0), default=None)
    k.add_argument("--systems", default=None, help="HDF5 file of captured systems (.h5): loaded if it exists, else written")
    k.add_argument("--no-scipy", action="store_true", help="skip the scipy (one-thread) variant")
    k.set_defaults(func=_cli)


def _cli(args) -> int:
    import sys

    from solver.bsp.krylov.bench import run_table2

    solvers = [s.strip() for s in args.solvers.split(",") if s.strip()]
    bad = [s for s in solvers if s not in SOLVERS]
    if bad:
        print(f"unknown solver(s) {bad}; known: {list(SOLVERS)}", file=sys.stderr)
        return 2
    ilut = {k: v for k, v in (("drop_tol", args.drop_tol), ("fill_factor", args.fill_factor)) if v is not None}
    r = run_table2(args.out, args.config, args.overrides, args.steps, solvers,
                   [p.strip() for p in args.precond.split(",")], [int(t) for t in args.threads.split(",")],
                   args.tol, args.maxiter, args.stage, ilut, args.systems, not args.no_scipy, log=sys.stderr)
    t = r["table"]
    print(t[["solver", "precond", "impl", "threads", "iterations_per_system", "time_per_step_s", "setup_per_step_s",
             "converged", "max_rel_error_vs_lu"]].to_string(index=False))
    return 0 if t["converged"].all() else 1
