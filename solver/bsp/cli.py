"""``python -m solver run CONFIG --out DIR`` and ``python -m solver bsp ...``."""
from __future__ import annotations

import importlib
import json
import sys

from solver.config import int_option
from solver.gpuslot import gpu_option

# the bsp subcommands that other modules register: (module, its register function, its subcommands)
BSP_CLIS = (("solver.bsp.validate", "register", ("validate",)),
            ("solver.bsp.iv", "register", ("iv",)),
            ("solver.bsp.bench", "register", ("bench", "bench-merge", "bench-case", "compare-backends", "phases")),
            ("solver.bsp.profile", "register", ("kernel-profile", "iter-kernels", "ncu-step", "ncu-profile", "overlap")),
            ("solver.bsp.krylov", "register_cli", ("krylov",)))


def register(sub, words=()) -> None:
    """``run`` and ``bsp``; ``words`` (solver.cli.command_words) naming a bsp subcommand import its
    module only, naming ``run`` none of them, naming nothing (or ``bsp`` alone) all of them."""
    p = sub.add_parser("run", help="run the BSP DG-MOSFET solver on a YAML configuration")
    p.add_argument("config", nargs="?", default=None, help="YAML run configuration (default: all defaults)")
    p.add_argument("--out", required=True, help="output folder (run.json, profiles, scalars, timers, fields)")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="override a config value, e.g. --set mesh.NX=33 (repeatable)")
    p.add_argument("--backend", choices=["numpy", "numba", "cupy", "auto"], help="shortcut for numerics.backend")
    p.add_argument("--threads", type=int_option(1), help="shortcut for numerics.threads (numba backend)")
    p.add_argument("--gpu", type=gpu_option, metavar="auto|exclusive[:K]|own|slice|N",
                   help="GPU of a host with several: N; 'auto' = shared, the one with the fewest runs started with "
                        "--gpu auto; 'exclusive' = one with no other run, waiting for it (timings); 'own' = "
                        "no new auto run goes to it, without waiting for those there (iv.long_points_gpu); 'slice' = "
                        "exclusive, pinned to that GPU's share of the CPUs; "
                        "solver/gpuslot.py; placement only, not part of the configuration")
    p.add_argument("--no-resume", action="store_true", help="ignore an existing checkpoint in --out")
    p.add_argument("--overwrite", action="store_true",
                   help="replace the run of another configuration found in --out (its files are removed)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("--init-from", metavar="RUN_DIR",
                   help="start from the final state of another run (shortcut for continuation.init_from; that run "
                        "needs continuation.save_final_state: true); continuation.ramp_ps ramps the bias")
    p.set_defaults(func=_run)

    b = sub.add_parser("bsp", help="BSP utilities")
    bs = b.add_subparsers(dest="bsp_command", metavar="SUBCOMMAND")
    v = bs.add_parser("config", help="validate a run configuration and print it resolved (defaults filled)")
    v.add_argument("config", nargs="?", default=None)
    v.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    v.set_defaults(func=_show_config)
    words = list(words)
    name = words[1] if words[:1] == ["bsp"] and len(words) > 1 else None
    if words[:1] == ["run"] or name == "config":
        chosen = []
    else:
        chosen = [c for c in BSP_CLIS if name in c[2]] or BSP_CLIS
    for module, function, _ in chosen:
        getattr(importlib.import_module(module), function)(bs)


def _overrides(args) -> list[str]:
    ov = list(args.overrides)
    if getattr(args, "backend", None):
        ov.append(f"numerics.backend={args.backend}")
    if getattr(args, "threads", None) is not None:
        ov.append(f"numerics.threads={args.threads}")
    if getattr(args, "init_from", None):
        ov.append(f"continuation.init_from={args.init_from}")
    return ov


def _show_config(args) -> int:
    from solver.bsp.model import load

    print(json.dumps(load(args.config, _overrides(args)), indent=2))
    return 0


def _run(args) -> int:
    from solver.backend import prewarm
    from solver.gpuslot import select

    select(args.gpu)  # before CUDA starts: CUDA_VISIBLE_DEVICES
    prewarm(args.backend)  # cupy: the CUDA context in a background thread while the modules load
    from solver.bsp.model import load

    from solver.io import check_out_dir

    cfg = load(args.config, _overrides(args))  # a bad value stops here, before any numerics
    check_out_dir(args.out)
    prewarm(cfg["numerics"]["backend"])  # (no --backend: the configuration's)
    from solver.bsp.simulation import Simulation

    sim = Simulation(cfg, out_dir=args.out, progress=False if args.no_progress else None)  # checks memory
    rec = sim.run(resume=not args.no_resume, overwrite=args.overwrite)
    s = rec["summary"]
    if "steady" in s:
        st = s["steady"]
        print(f"steady state {'reached at t = %.4f ps' % st['t_reached_ps'] if st['reached'] else 'NOT reached'}: "
              f"current {st.get('current_A_per_m', float('nan')):.6g} A/m, drift {st.get('drift', float('nan')):.2e}, "
              f"charging {st.get('charging', float('nan')):.2e}", file=sys.stderr)
    print(f"done: {s['steps']} steps to t = {s['t_end_s'] * 1e12:.4f} ps, mean current "
          f"{s['mean_current_A_per_m']:.6g} A/m, wall {s['wall_s']:.1f} s "
          f"({rec['device']['backend']} on {rec['device'].get('device')}); outputs in {args.out}", file=sys.stderr)
    return 0
