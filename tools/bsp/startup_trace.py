"""Issue #12, round 3: what CuPy imports lazily during a bench case, from where, and what the CuPy
modules of the start-up cost to compile.  One process, one JSON line on stdout:

    python tools/bsp/startup_trace.py spy CASE [CONFIG] [--steps N] [--keys FILE]
        runs Simulation start-up (and N steps) of CASE with
        - a sys.meta_path finder that records the call stack of the first import of cupyx,
          cupyx.* and scipy / scipy.sparse (``first_imports``: name, seconds since start, the timer
          phase, the innermost frames);
        - once ``cupyx.scipy.special`` is imported, every later ``import cupyx.scipy.special``
          (what cupy.ndarray.__array_ufunc__ runs on each NumPy ufunc applied to a CuPy array, in
          CuPy >= 13) counted by its calling site (``array_ufunc_sites``: phase | innermost
          solver frame | innermost frame -> count), read from the module's ``__spec__`` lookup
          that every import statement of a module already imported makes;
        - every CuPy module load (cupy.cuda.compiler._compile_module_with_cache: a compile, or a
          load from the disk cache) timed and split into this project's RawModules (_build) and
          CuPy's own kernels (``modules``), and the (source, kernel, options, defines) of every
          _build.function call written to FILE (--keys).
    python tools/bsp/startup_trace.py compile KEYS --threads T
        compiles the _build modules of KEYS (one kernel each) in T threads (1 = serially) and
        prints the wall time: with an empty CUPY_CACHE_DIR, whether NVRTC runs in parallel.
"""
from __future__ import annotations

import importlib.abc
import json
import sys
import time
import traceback
import types

T0 = time.time()
PHASE = {"timer": None, "where": "imports"}


def _phase() -> str:
    tm = PHASE["timer"]
    stack = "/".join(tm._stack) if tm is not None and tm._stack else ""
    return PHASE["where"] + (":" + stack if stack else "")


def _frames(limit=40):
    keep = []
    for f in traceback.extract_stack(limit=limit)[:-2]:
        if "importlib" in f.filename or f.filename.startswith("<frozen") or f.filename == __file__:
            continue
        keep.append(f"{f.filename.split('/solver/')[-1] if '/solver/' in f.filename else f.filename}:{f.lineno} {f.name}")
    return keep


FIRST: list = []
SITES: dict = {}
WATCH = ("cupyx", "cupyx.scipy", "cupyx.scipy.special", "cupyx.linalg", "cupyx.scipy.sparse", "scipy", "scipy.sparse",
         "scipy.linalg", "scipy._lib._array_api")


class Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name in WATCH or (name.startswith("cupyx.") and name.count(".") == 1):
            FIRST.append({"name": name, "t": round(time.time() - T0, 4), "phase": _phase(), "stack": _frames()[-14:]})
        if name == "cupyx.scipy.special":  # the real spec, its module turned into a SpyModule once executed
            import importlib.machinery

            spec = importlib.machinery.PathFinder.find_spec(name, path)
            if spec is not None and spec.loader is not None:
                spec.loader = SpyLoader(spec.loader)
            return spec
        return None


class SpyLoader(importlib.abc.Loader):
    def __init__(self, real):
        self.real = real

    def create_module(self, spec):
        return self.real.create_module(spec)

    def exec_module(self, module):
        self.real.exec_module(module)
        module.__class__ = SpyModule


class SpyModule(types.ModuleType):
    def __getattribute__(self, name):
        if name == "__spec__":
            fr = _frames(60)
            solver = [f for f in fr if f.startswith(("bsp/", "backend.py", "timing.py"))]
            key = f"{_phase()} | {solver[-1] if solver else '-'} | {fr[-1] if fr else '-'}"
            SITES[key] = SITES.get(key, 0) + 1
        return super().__getattribute__(name)


def spy(argv) -> None:
    import argparse

    ap = argparse.ArgumentParser()
    ap.add_argument("case")
    ap.add_argument("config", nargs="?")
    ap.add_argument("--steps", type=int, default=0)
    ap.add_argument("--keys")
    a = ap.parse_args(argv)
    sys.meta_path.insert(0, Finder())
    from solver import backend
    from solver.bsp import bench, simulation
    from solver.bsp.model import load

    case = bench.Case.parse(a.case)
    backend.prewarm(case.backend)
    cfg = load(a.config, case.overrides())
    PHASE["where"] = "init"
    sim = simulation.Simulation(cfg, progress=False)
    mods = []
    keys = []
    try:
        from cupy.cuda import compiler

        from solver.bsp.kernels.cuda import _build
    except ImportError:  # (numpy case: the import spy alone)
        compiler = _build = None
    orig = compiler._compile_module_with_cache if compiler else None

    def counted(*args, **kw):
        import re
        import threading

        c0 = time.perf_counter()
        t_at = time.time() - T0
        try:
            return orig(*args, **kw)
        finally:
            dt = time.perf_counter() - c0
            raw = any("_build.py" in f for f in _frames(30))
            src = args[0] if args and isinstance(args[0], str) else kw.get("source", "")
            names = re.findall(r"__global__\s+void\s+(\w+)", src)[:3]
            mods.append({"phase": _phase(), "raw": raw, "s": round(dt, 4), "at": round(t_at, 4),
                         "thread": threading.current_thread().name, "kernels": names,
                         "site": next((f for f in reversed(_frames(40)) if f.startswith("bsp/")), "-")})

    ofunc = _build.function if _build else None

    def function(name, kernel, options=(), defines=None):
        k = [name, kernel, list(options), sorted((defines or {}).items())]
        if not any(k == e[:4] for e in keys):
            keys.append(k + [PHASE["where"]])
        return ofunc(name, kernel, options, defines)

    if compiler is not None:
        compiler._compile_module_with_cache = counted
        _build.function = function
    PHASE["timer"] = sim.startup_timer
    PHASE["where"] = "startup"
    sim._timer_rows = []
    t_in = time.time() - T0
    sim.startup()
    t_startup = time.time() - T0
    PHASE["where"] = "step"
    PHASE["timer"] = sim.timer
    n_start = len(mods)
    for _ in range(a.steps):
        sim.step()
    if a.keys:
        with open(a.keys, "w") as f:
            json.dump(keys, f)

    def split(ms):
        return {k: {"n": sum(1 for m in ms if m["raw"] == r), "s": round(sum(m["s"] for m in ms if m["raw"] == r), 4)}
                for k, r in (("raw", True), ("cupy", False))}

    rec = {"case": a.case, "t_init": round(t_in, 4), "t_startup": round(t_startup, 4),
           "startup_phases": {k: round(v, 4) for k, v in sim.startup_timer.summary()["total_s"].items()},
           "first_imports": FIRST, "array_ufunc_sites": SITES,
           "modules": {"startup": split(mods[:n_start]), "steps": split(mods[n_start:]),
                       "startup_list": mods[:n_start]},
           "n_keys": len(keys)}
    print(json.dumps(rec))


def compile_keys(argv) -> None:
    import argparse
    from concurrent.futures import ThreadPoolExecutor

    ap = argparse.ArgumentParser()
    ap.add_argument("keys")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--where", help="only the keys first used there (startup | step)")
    a = ap.parse_args(argv)
    import cupy as cp

    from solver.bsp.kernels.cuda import _build

    cp.cuda.runtime.getDeviceCount()
    cp.zeros(1).sum()  # the context and one CuPy kernel, outside the timing
    keys = json.load(open(a.keys))
    mods = {}
    for name, kernel, options, defines, where in keys:
        if a.where and where != a.where:
            continue
        mods.setdefault((name, tuple(options), tuple(map(tuple, defines))), (name, kernel, options, dict(defines)))
    jobs = list(mods.values())
    t0 = time.perf_counter()
    if a.threads <= 1:
        for j in jobs:
            _build.function(*j)
    else:
        with ThreadPoolExecutor(a.threads) as ex:
            list(ex.map(lambda j: _build.function(*j), jobs))
    wall = time.perf_counter() - t0
    print(json.dumps({"threads": a.threads, "where": a.where, "modules": len(jobs), "wall_s": round(wall, 4)}))


def bench(argv) -> None:
    """``bench [--bg-cupyx] ARGV...``: solver.cli.main(ARGV), where --bg-cupyx makes backend.prewarm's
    thread also import cupy and cupyx.scipy.special after the context (the what-if of a background
    import)."""
    if argv and argv[0] == "--bg-cupyx":
        argv = argv[1:]
        from solver import backend

        real = backend._create_cuda_context

        def ctx_and_imports():
            real()
            import cupy  # noqa: F401
            import cupyx.scipy.special  # noqa: F401

        backend._create_cuda_context = ctx_and_imports
    from solver.cli import main

    raise SystemExit(main(argv))


if __name__ == "__main__":
    {"spy": spy, "compile": compile_keys, "bench": bench}[sys.argv[1]](sys.argv[2:])
