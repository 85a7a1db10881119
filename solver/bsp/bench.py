"""Backend comparisons and per-phase baselines.

``python -m solver bsp compare-backends``: the same run on two backends, largest relative
difference of the state after N steps (GPU vs NumPy acceptance: 1e-10 after 20 steps).
``python -m solver bsp phases``: per-phase time of one (or a few) steps on each backend, as a
tidy CSV (backend, phase, seconds per step) with the run records beside it.
``python -m solver bsp bench``: the time step of every (mesh, backend, threads) case, each in its
own process (:func:`bench`): steps.csv, steps_spread.csv and run.json.
"""
from __future__ import annotations

from solver.config import float_option, int_option

import json
import os
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from solver import io

if TYPE_CHECKING:  # pandas is imported where a table is made (bench-case makes none): start-up time
    import pandas as pd


def _rel(a, b) -> float:
    a, b = np.asarray(a), np.asarray(b)
    return float(np.max(np.abs(a - b)) / max(np.max(np.abs(b)), 1e-300))


def compare_backends(cfg_path=None, overrides=(), backends=("numpy", "cupy"), steps=20) -> pd.DataFrame:
    from solver.backend import get_backend
    from solver.bsp.model import load
    from solver.bsp.simulation import Simulation

    states = {}
    for name in backends:
        cfg = load(cfg_path, list(overrides) + [f"time.steps={steps}", "time.t_end_ps=null",
                                                f"numerics.backend={name}", "output.progress=false"])
        sim = Simulation(cfg, backend=get_backend(name), progress=False)
        sim.run()
        be, st = sim.backend, sim.state
        states[name] = {k: be.to_numpy(getattr(st, k)) for k in ("Phi", "V", "eps", "rho")}
        states[name]["mean_current"] = sim.scalars[-1]["mean_current_A_per_m"]
    ref = states[backends[0]]
    import pandas as pd

    rows = []
    for name in backends[1:]:
        for k in ("Phi", "V", "eps", "rho", "mean_current"):
            rows.append({"backend": name, "reference": backends[0], "steps": steps, "field": k,
                         "max_rel_diff": _rel(states[name][k], ref[k])})
    return pd.DataFrame(rows)


def phase_times(cfg_path=None, overrides=(), backends=("numpy",), steps=1, out=None) -> pd.DataFrame:
    from solver.backend import get_backend
    from solver.bsp.model import load
    from solver.bsp.simulation import Simulation

    rows = []
    for name in backends:
        cfg = load(cfg_path, list(overrides) + [f"time.steps={steps}", "time.t_end_ps=null",
                                                f"numerics.backend={name}", "output.progress=false",
                                                "output.checkpoint_every_steps=0"])
        run_dir = Path(out, name) if out else None
        sim = Simulation(cfg, backend=get_backend(name), out_dir=run_dir, progress=False)
        rec = sim.run(resume=False)
        for phase, sec in rec["timers"]["mean_per_step_s"].items():
            rows.append({"backend": name, "device": rec["device"].get("device"), "phase": phase,
                         "seconds_per_step": sec})
        for phase, sec in rec["timers"]["startup_s"].items():
            rows.append({"backend": name, "device": rec["device"].get("device"), "phase": phase,
                         "seconds_per_step": sec})
        print(f"{name}: {rec['summary']['steps']} steps, startup {rec['summary']['startup_s']:.2f} s", file=sys.stderr)
    import pandas as pd

    return pd.DataFrame(rows)


# ------------------------------------------------------------------------------ steps bench
STEPS_COLUMNS = ["mesh", "backend", "threads", "steps", "step_ms", "bte_ms", "dens_ms", "iter_ms", "newton_per_step",
                 "startup_s", "commit"]
SPREAD_COLUMNS = ["mesh", "backend", "threads", "steps", "step_ms_min", "step_ms_p10", "step_ms_median", "step_ms_p90",
                  "step_ms_max", "note"]
STEP_PHASES = {"step_ms": "step", "bte_ms": "step/BTE", "dens_ms": "step/DENS", "iter_ms": "step/ITER"}
STARTUP_S = ("seconds from just before the case's process is started to the end of the Simulation's start-up "
             "(model, INITCOND, THERMEQUIL, initial densities), before the first (warm-up) step")
THREAD_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS")


@dataclass(frozen=True)
class Case:
    """One bench case: ``steps`` timed time steps after ``warmup`` untimed ones."""
    mesh: str  # N_sbn x NX x NZ x NW x NPHI, e.g. 6x65x65x300x48
    backend: str
    threads: int
    steps: int
    warmup: int

    @classmethod
    def parse(cls, text: str) -> "Case":
        """'MESH:BACKEND:THREADS:STEPS:WARMUP', e.g. '6x65x65x300x48:numba:8:10:2'."""
        from solver.backend import BACKENDS
        from solver.config import ConfigError

        allowed = ("allowed: MESH:BACKEND:THREADS:STEPS:WARMUP, MESH = N_sbn x NX x NZ x NW x NPHI "
                   f"(positive integers), BACKEND one of {', '.join(BACKENDS)}, THREADS >= 1, STEPS >= 1, WARMUP >= 0")
        parts = str(text).split(":")
        try:
            mesh, backend, threads, steps, warmup = parts
            dims = [int(v) for v in mesh.split("x")]
            case = cls(mesh, backend, int(threads), int(steps), int(warmup))
        except ValueError:
            raise ConfigError(f"option '--case': {text!r} given; {allowed}") from None
        if (len(dims) != 5 or min(dims) < 1 or backend not in BACKENDS or case.threads < 1 or case.steps < 1
                or case.warmup < 0):
            raise ConfigError(f"option '--case': {text!r} given; {allowed}")
        return case

    def __str__(self) -> str:
        return f"{self.mesh}:{self.backend}:{self.threads}:{self.steps}:{self.warmup}"

    def overrides(self) -> list[str]:
        dims = zip(("N_sbn", "NX", "NZ", "NW", "NPHI"), map(int, self.mesh.split("x")))  # checked by parse
        return ([f"mesh.{k}={v}" for k, v in dims]
                + [f"time.steps={self.warmup + self.steps}", "time.t_end_ps=null", f"numerics.backend={self.backend}",
                   f"numerics.threads={self.threads}", "output.progress=false", "output.checkpoint_every_steps=0"])


def run_case(cfg_path, overrides, case: Case, launched_at: float) -> dict:
    """Run one case in this process: start-up, ``warmup`` steps, ``steps`` timed steps.

    Returns {"startup_s", "steps": [{phase: seconds, "newton": iterations}, ...] (timed steps
    only), "device", "speculation"} (numerics.bte_speculate's counts over warm-up and timed steps, None where off).  startup_s = time.time() at the end of the Simulation's start-up (model
    built, INITCOND, THERMEQUIL, initial densities: the instant the first time step may begin)
    minus ``launched_at`` (time.time() of the parent just before it started this process, so
    interpreter start and imports are included).  Compilation that happens at a kernel's first
    call (numba JIT, CuPy kernels) falls in the warm-up steps, not in startup_s.
    """
    from solver.bsp.model import load
    from solver.bsp.simulation import Simulation

    cfg = load(cfg_path, list(overrides) + case.overrides())
    sim = Simulation(cfg, progress=False)
    sim._timer_rows = []  # as Simulation.run
    sim.startup()
    startup_s = time.time() - launched_at
    steps = []
    for _ in range(case.warmup + case.steps):
        sim.step()
        times = sim.timer.steps[-1]
        steps.append({**{k: float(times.get(k, 0.0)) for k in STEP_PHASES.values()},
                      "newton": int(sim.state.newton_iterations)})
    return {"startup_s": startup_s, "steps": steps[case.warmup:], "device": sim.backend.device_info(),
            "speculation": dict(sim.speculation) if sim._speculate else None}


def summarize(case: Case, result: dict | None, commit: str, note: str = "") -> tuple[dict, dict]:
    """(steps.csv row, steps_spread.csv row) of one case; ``result`` None = the case failed (times empty)."""
    row = {"mesh": case.mesh, "backend": case.backend, "threads": case.threads, "steps": case.steps,
           **{k: None for k in STEPS_COLUMNS[4:]}, "commit": commit}
    spread = {"mesh": case.mesh, "backend": case.backend, "threads": case.threads, "steps": case.steps,
              **{k: None for k in SPREAD_COLUMNS[4:]}, "note": note}
    if result is not None:
        steps = result["steps"]
        for col, key in STEP_PHASES.items():
            row[col] = 1e3 * float(np.median([s[key] for s in steps]))
        row["newton_per_step"] = float(np.mean([s["newton"] for s in steps]))
        row["startup_s"] = float(result["startup_s"])
        ms = 1e3 * np.array([s["step"] for s in steps])
        spread.update(step_ms_min=float(ms.min()), step_ms_p10=float(np.percentile(ms, 10)),
                      step_ms_median=float(np.median(ms)), step_ms_p90=float(np.percentile(ms, 90)),
                      step_ms_max=float(ms.max()))
    return row, spread


def commit_id() -> str:
    """The code's name for the tables (provenance.code_id)."""
    from solver import provenance

    return provenance.code_id(provenance.git_info())


def bench(cfg_path=None, overrides=(), cases=(), timeout=None, log=sys.stderr):
    """Every case in its own process (``python -m solver bsp bench-case``, thread pools pinned to
    the case's threads).  Returns (steps table, spread table, per-case records).  A case that fails
    (non-zero exit, time-out) gives a row with empty times; its error is the ``note`` of
    steps_spread.csv and in the records."""
    import pandas as pd

    import solver

    root = str(Path(solver.__file__).resolve().parents[1])
    commit = commit_id()
    rows, spreads, records = [], [], []
    for case in cases:
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([root] + [p for p in [os.environ.get("PYTHONPATH")] if p]))
        env.update({k: str(case.threads) for k in THREAD_VARIABLES})
        cmd = [sys.executable, "-m", "solver", "bsp", "bench-case", str(case)]
        if cfg_path is not None:
            cmd.append(str(cfg_path))
        for s in overrides:
            cmd += ["--set", s]
        try:  # launched-at: as late as possible, the start of this case's process
            r = subprocess.run(cmd + ["--launched-at", repr(time.time())], env=env, capture_output=True, text=True,
                               timeout=timeout)
            ok = r.returncode == 0
            err = r.stderr.strip().splitlines()
            note = "" if ok else f"exit {r.returncode}: {err[-1] if err else ''}"
        except subprocess.TimeoutExpired:
            ok, note = False, f"timed out after {timeout} s"
        result = json.loads(r.stdout.strip().splitlines()[-1]) if ok else None
        row, spread = summarize(case, result, commit, note)
        rows.append(row)
        spreads.append(spread)
        records.append({**asdict(case), "ok": ok, "note": note,
                        **({"startup_s": result["startup_s"], "device": result["device"],
                            "speculation": result.get("speculation")} if ok else {})})
        print(f"{case}: " + (f"{row['step_ms']:.3f} ms/step, startup {row['startup_s']:.2f} s" if ok else note),
              file=log, flush=True)
    return (pd.DataFrame(rows, columns=STEPS_COLUMNS), pd.DataFrame(spreads, columns=SPREAD_COLUMNS), records)


def write_bench(out, steps, spread, record) -> None:
    out = Path(out)
    io.write_csv(steps, out / "steps.csv", float_format="%.6g")
    io.write_csv(spread, out / "steps_spread.csv", float_format="%.6g")
    io.write_json(out / "run.json", record)


def merge(dirs):
    """The bench of several one-case (or few-case) bench folders, in the order given (the workflow
    runs every case as its own job, rule bsp_bench_case[_gpu], so that the GPU cases spread over
    the GPUs of a host): (steps table, spread table, per-case records).  Each record is its case's
    record from the folder's run.json with the folder, the host, CUDA_VISIBLE_DEVICES and the GPU
    slot (solver/gpuslot.py) of the process that ran it."""
    import pandas as pd

    steps, spreads, records = [], [], []
    for d in map(Path, dirs):
        steps.append(pd.read_csv(d / "steps.csv"))
        spreads.append(pd.read_csv(d / "steps_spread.csv"))
        rec = json.loads((d / "run.json").read_text())
        for case in rec.get("cases", []):
            records.append({**case, "folder": str(d), "hostname": rec.get("hostname"),
                            "CUDA_VISIBLE_DEVICES": (rec.get("threads") or {}).get("CUDA_VISIBLE_DEVICES"),
                            "gpu_slot": rec.get("gpu_slot")})
    return (pd.concat(steps, ignore_index=True)[STEPS_COLUMNS], pd.concat(spreads, ignore_index=True)[SPREAD_COLUMNS],
            records)


def register(bs) -> None:
    b = bs.add_parser("bench", help="time step of each (mesh, backend, threads) case, one process each: steps.csv")
    b.add_argument("config", nargs="?", default=None)
    b.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    b.add_argument("--case", dest="cases", action="append", required=True, metavar="MESH:BACKEND:THREADS:STEPS:WARMUP")
    b.add_argument("--timeout", type=float_option(exclusive_minimum=0), help="seconds per case")
    b.add_argument("--out", required=True, help="folder of steps.csv, steps_spread.csv, run.json")
    b.set_defaults(func=_bench)
    m = bs.add_parser("bench-merge", help="one bench (steps.csv, steps_spread.csv, run.json) of several bench "
                                          "folders, e.g. one per case")
    m.add_argument("dirs", nargs="+", metavar="DIR", help="folders written by `bsp bench --out DIR`, in table order")
    m.add_argument("--out", required=True, help="folder of the merged steps.csv, steps_spread.csv, run.json")
    m.set_defaults(func=_bench_merge)
    o = bs.add_parser("bench-case", help="one bench case in this process; prints its record as a JSON line")
    o.add_argument("case", metavar="MESH:BACKEND:THREADS:STEPS:WARMUP")
    o.add_argument("config", nargs="?", default=None)
    o.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    o.add_argument("--launched-at", type=float, help="time.time() when the process was started (default: now)")
    o.set_defaults(func=_bench_case)
    c = bs.add_parser("compare-backends", help="largest relative difference between backends after N steps")
    c.add_argument("config", nargs="?", default=None)
    c.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    c.add_argument("--backends", default="numpy,cupy")
    c.add_argument("--steps", type=int_option(1), default=20)
    c.add_argument("--csv")
    c.add_argument("--tol", type=float_option(exclusive_minimum=0), default=1e-10)
    c.set_defaults(func=_compare)
    p = bs.add_parser("phases", help="per-phase time per step on each backend (tidy CSV)")
    p.add_argument("config", nargs="?", default=None)
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument("--backends", default="numpy")
    p.add_argument("--steps", type=int_option(1), default=1)
    p.add_argument("--out", help="folder for the runs' records")
    p.add_argument("--csv")
    p.set_defaults(func=_phases)


def _bench(args) -> int:
    from solver import provenance

    cases = [Case.parse(c) for c in args.cases]
    steps, spread, records = bench(args.config, args.overrides, cases, args.timeout)
    rec = provenance.collect({"config": args.config, "overrides": args.overrides, "cases": [str(c) for c in cases]},
                             extra={"cases": records, "startup_s": STARTUP_S})
    write_bench(args.out, steps, spread, rec)
    print(steps.to_string(index=False, float_format=lambda v: f"{v:.4g}"))
    return 1 if steps["step_ms"].isna().all() else 0


def _bench_merge(args) -> int:
    from solver import provenance

    steps, spread, records = merge(args.dirs)
    rec = provenance.collect({"merged": list(args.dirs), "cases": [f"{c['mesh']}:{c['backend']}:{c['threads']}:"
                                                                   f"{c['steps']}:{c['warmup']}" for c in records]},
                             extra={"cases": records, "startup_s": STARTUP_S})
    write_bench(args.out, steps, spread, rec)
    print(steps.to_string(index=False, float_format=lambda v: f"{v:.4g}"))
    return 1 if steps["step_ms"].isna().all() else 0


def _bench_case(args) -> int:
    from solver.backend import prewarm

    launched = args.launched_at if args.launched_at is not None else time.time()
    case = Case.parse(args.case)
    prewarm(case.backend)  # the CUDA context in a background thread while the run's modules load
    rec = run_case(args.config, args.overrides, case, launched)
    print(json.dumps(rec, default=str))
    return 0


def _compare(args) -> int:
    df = compare_backends(args.config, args.overrides, tuple(args.backends.split(",")), args.steps)
    if args.csv:
        io.write_csv(df, args.csv)
    print(df.to_string(index=False))
    return 0 if (df["max_rel_diff"] <= args.tol).all() else 1


def _phases(args) -> int:
    df = phase_times(args.config, args.overrides, tuple(args.backends.split(",")), args.steps, args.out)
    if args.csv:
        io.write_csv(df, args.csv)
    wide = df.pivot_table(index="phase", columns="backend", values="seconds_per_step")
    print(wide.to_string(float_format=lambda v: f"{v:.4g}"))
    return 0
