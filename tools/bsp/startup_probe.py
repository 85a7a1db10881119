"""Issue #12: where the start-up of one bench case goes, in one process (what ``python -m solver bsp
bench-case CASE [CONFIG]`` does up to its first step, with time stamps).  Prints one JSON line:

    t_*           seconds since --launched-at (the shell's time just before this process started,
                  as bench's startup_s): python (interpreter and site), cli (solver.cli and the bench
                  module: numpy, yaml), modules (solver.bsp.model and .simulation), config (load),
                  backend_in / backend_out (Simulation.__init__'s get_backend: CuPy import and the CUDA
                  context), init (Simulation constructed), startup (Simulation.startup() done = startup_s)
    phases        Simulation.startup's phase timers (INITCOND, THERMEQUIL, ...), seconds
    cupy_modules  calls and seconds of cupy.cuda.compiler._compile_module_with_cache (every CuPy module:
                  a compile, or a load from the disk cache) during the start-up, where CuPy has it
    heavy         heavy packages imported at the first step
    prewarm       whether backend.prewarm ran (absent in trees before it; --no-prewarm to leave it out)

Run from the repository root of the tree to measure (any tree: ``cd BASE && python
/path/to/startup_probe.py ...``): ``python tools/bsp/startup_probe.py 6x65x65x300x48:cupy:1:5:1
config/bsp/dgmosfet.yaml --launched-at $(date +%s.%N)``.
"""
import sys
import time

T0 = time.time()


def main(argv):
    import argparse

    ap = argparse.ArgumentParser()
    ap.add_argument("case")
    ap.add_argument("config", nargs="?")
    ap.add_argument("--launched-at", type=float)
    ap.add_argument("--no-prewarm", action="store_true")
    a = ap.parse_args(argv)
    at = a.launched_at or T0
    t = {"python": T0 - at}
    import solver.cli  # noqa: F401  (as python -m solver)
    from solver.bsp import bench

    t["cli"] = time.time() - at
    case = bench.Case.parse(a.case)
    from solver import backend

    prewarmed = False
    if hasattr(backend, "prewarm") and not a.no_prewarm:
        backend.prewarm(case.backend)
        prewarmed = True
    from solver.bsp import simulation
    from solver.bsp.model import load

    t["modules"] = time.time() - at
    cfg = load(a.config, case.overrides())
    t["config"] = time.time() - at
    real = simulation.get_backend

    def timed_backend(*args, **kw):
        t["backend_in"] = time.time() - at
        try:
            return real(*args, **kw)
        finally:
            t["backend_out"] = time.time() - at

    simulation.get_backend = timed_backend
    sim = simulation.Simulation(cfg, progress=False)
    t["init"] = time.time() - at
    calls = {"n": 0, "s": 0.0}
    try:
        from cupy.cuda import compiler

        orig = compiler._compile_module_with_cache

        def counted(*args, **kw):
            c0 = time.perf_counter()
            try:
                return orig(*args, **kw)
            finally:
                calls["n"] += 1
                calls["s"] += time.perf_counter() - c0

        compiler._compile_module_with_cache = counted
    except (ImportError, AttributeError):
        calls = None
    sim._timer_rows = []
    sim.startup()
    t["startup"] = time.time() - at
    heavy = ("scipy", "scipy.linalg", "scipy.sparse", "pandas", "h5py", "matplotlib", "jsonschema", "numba", "cupy")
    rec = {"case": str(case), "t": {k: round(v, 4) for k, v in t.items()},
           "phases": {k: round(v, 4) for k, v in sim.startup_timer.summary().get("total_s", {}).items()},
           "cupy_modules": calls, "heavy": [m for m in heavy if m in sys.modules], "prewarm": prewarmed}
    print(__import__("json").dumps(rec))


if __name__ == "__main__":
    main(sys.argv[1:])
