"""Issue #13: why the standard step spreads by ~9 % from process to process (docs/performance.md §19).

Subcommands (tools/bsp/spread_probe.sh runs them on one GPU; the summary also runs on the VM):

``child --out FILE.json [--config C] [--mesh M] [--steps 200] [--warmup 5] [--dummy-mib X] [--step-sets 3]
[--set-steps 60] [--sets 3] [--kreps 20] [--krounds 2] [--backend cupy|numpy] [--set KEY=VALUE ...]``
    One process as ``bsp bench-case`` runs it (same config, the case's overrides, prewarm, startup,
    warm-up + timed steps), after an optional dummy buffer of X MiB taken from the CuPy pool first (it
    shifts every later pool address).  Per timed step: the solver's phase timers (CUDA events: step,
    step/BTE/..., step/DENS, step/ITER/...), the host wall time of ``sim.step()`` and the CPU the thread ran
    on; a host-speed probe (a Python loop, the host time of a small CuPy launch) before and after.  Then the
    step-level placement test (``step_sets``: whole steps on other device buffers in the same process).  The
    device arrays reachable from the simulation (state, ITER result, model.device_cache, the
    BTE graph's buffers when numerics.bte_graph is on) of >= 64 KiB: name, ptr, bytes.  Then a kernel
    pass: the BTE kernels (scat_gain, scat_loss, WENO_x, the fused bsp_wphi_rk + bsp_rho, a 135 MB copy)
    on ``--sets`` freshly allocated buffer sets holding the state's values (set k after a raw cudaMalloc
    of 2k-1 MiB, every set alive at once), timed by CUDA events behind a spin kernel, the sets
    interleaved in ``--krounds`` rounds (same process, same clocks: a placement effect shows as a
    set-to-set difference); the overlap kernel on the state's chi; the SM clock seen by a spin kernel
    (clock64 cycles / event time) before and after.
``summary DIR``
    Reads DIR/proc_*.json and DIR/smi.csv (nvidia-smi samples); writes DIR/procs.csv (one row per
    process) and prints the table and the correlations last.
``fake DIR [--n N]``
    Writes fake proc_*.json and smi.csv (a clock-driven spread) for rehearsing the summary.
"""
from __future__ import annotations

import argparse
import csv
import glob
import hashlib
import json
import math
import os
import statistics
import sys
import time
from datetime import datetime
from pathlib import Path

MIN_BYTES = 64 * 1024
BIG_BYTES = 16 * 2**20
MAIN_PHASES = ("step", "step/BTE", "step/DENS", "step/ITER")
# "weno_dx" names the x term's kernel as weno.x_into launches it: bsp_weno_dx_tile since the tile became the default
# (f500f1d; numerics.wenox_kernel), bsp_weno_dx (the walk) before; the name stays for the committed CSV columns
KERNELS = ("scat_gain", "scat_loss", "weno_dx", "wphi_rk", "copy", "overlap")
SPIN_CYCLES = 400_000  # ~0.2 ms at 1.98 GHz: hides the host's launch time of the timed call
CLOCK_CYCLES = 20_000_000  # ~10 ms: the clock probe
THROTTLE_BITS = {0x1: "idle", 0x2: "app_clk", 0x4: "sw_power", 0x8: "hw_slow", 0x20: "sw_thermal",
                 0x40: "hw_thermal", 0x80: "hw_power_brake", 0x100: "display"}


# ------------------------------------------------------------------------------------------- child
def _cpu() -> int:
    """The CPU this thread last ran on (/proc/thread-self/stat field 39), -1 where unknown."""
    try:
        s = open("/proc/thread-self/stat").read()
        return int(s[s.rindex(")") + 2:].split()[36])
    except (OSError, ValueError, IndexError):
        return -1


def collect_arrays(roots: dict, cp, min_bytes=MIN_BYTES, depth=4) -> list[dict]:
    """Device arrays (cupy.ndarray of >= min_bytes) reachable from ``roots`` through lists, tuples,
    dicts and the attributes of solver objects, each once (first name found), sorted by address."""
    found, seen = {}, set()

    def visit(obj, name, d):
        if isinstance(obj, cp.ndarray):
            if obj.nbytes >= min_bytes and obj.data.ptr not in found:
                found[obj.data.ptr] = {"name": name, "ptr": int(obj.data.ptr), "bytes": int(obj.nbytes),
                                       "shape": "x".join(map(str, obj.shape))}
            return
        if d <= 0 or id(obj) in seen or isinstance(obj, (str, bytes, int, float, type(None))):
            return
        seen.add(id(obj))
        if isinstance(obj, (list, tuple)):
            for i, v in enumerate(obj):
                visit(v, f"{name}[{i}]", d - 1)
        elif isinstance(obj, dict):
            for k, v in list(obj.items()):
                visit(v, f"{name}[{str(k)[:48]}]", d - 1)
        elif type(obj).__module__.startswith("solver") and hasattr(obj, "__dict__"):
            for k, v in list(vars(obj).items()):
                visit(v, f"{name}.{k}", d - 1)

    for name, obj in roots.items():
        visit(obj, name, depth)
    return sorted(found.values(), key=lambda a: a["ptr"])


def run_steps(sim, warm: int, n: int) -> dict:
    """warm + n steps; per timed step: every phase (s), host wall (s), CPU; t0/t1 = time.time() of the timed part."""
    for _ in range(warm):
        sim.step()
    phases, wall, cpus = [], [], []
    t0 = time.time()
    for _ in range(n):
        h = time.perf_counter()
        sim.step()
        wall.append(time.perf_counter() - h)
        cpus.append(_cpu())
        phases.append({k: float(v) for k, v in sim.timer.steps[-1].items()})
    return {"t0": t0, "t1": time.time(), "phases": phases, "wall": wall, "cpus": cpus,
            "newton": int(sim.state.newton_iterations)}


class BufferSet:
    """Fresh device buffers for one RK stage (s = 1) holding the simulation's current values."""

    def __init__(self, sim, cp):
        from solver.bsp import scattering

        st, m = sim.state, sim.model
        f = lambda a: cp.ascontiguousarray(cp.asarray(a, dtype=cp.float64)).copy()  # noqa: E731
        self.P0, self.P, self.out, self.tx = f(st.Phi), f(st.Phi), cp.empty_like(st.Phi), cp.empty_like(st.Phi)
        self.PhiHat, self.rho = f(st.PhiHat), f(st.rho)
        self.eps, self.deps, self.rho_eq = f(st.eps), f(st.deps_dx), f(sim.eq.rho_eq)
        self.W = f(scattering.overlap(m, sim.backend, st.chi))
        self.G, self.Lc = cp.empty_like(self.PhiHat), cp.empty_like(self.PhiHat)
        self.rho1, self.PhiHat1 = cp.empty_like(self.rho), cp.empty_like(self.PhiHat)
        self.dt = float(getattr(sim, "_last_dt", 0.0) or sim.next_dt())
        self.alpha = float(st.A_eps * m.A3)  # as weno.weno_phi forms it; passed as arguments (the ungraphed path)

    def arrays(self) -> dict:
        return {k: v for k, v in vars(self).items() if hasattr(v, "data")}

    def kernels(self, sim, cp) -> dict:
        from solver.bsp.kernels.cuda import rk, scattering, weno

        m, be, b = sim.model, sim.backend, self
        r = (b.rho_eq[0], b.rho_eq[-1], b.rho[0], b.rho[-1])
        return {"scat_gain": lambda: scattering.gain_into(m, be, b.PhiHat, b.eps, b.W, None, b.G),
                "scat_loss": lambda: scattering.loss_into(m, be, b.eps, b.W, None, b.Lc),
                "weno_dx": lambda: weno.x_into(m, be, b.P, r, b.tx),
                "wphi_rk": lambda: rk.stage_into(m, be, 1, b.P0, b.P, b.G, b.Lc, b.tx, b.deps, b.out, b.rho1,
                                                 b.PhiHat1, alpha=b.alpha, dt=b.dt),
                "copy": lambda: cp.copyto(b.out, b.P)}


def step_sets(sim, cp, nsets: int, rounds: int, n: int, warm: int = 5) -> dict:
    """Step-level placement test in this process (same clocks, same host): whole steps on other device buffers.

    numerics.bte_graph on: ``nsets`` StageGraphs (set 0 the run's own; set k a fresh one, its Phi ring, x term,
    G, Lc, ... newly allocated after a raw cudaMalloc of 2k-1 MiB; all alive), swapped into the model's cache
    in ``rounds`` interleaved rounds of ``warm`` + ``n`` steps (a swapped-in set copies the state in once).
    numerics.bte_graph off (the bench): the stages' Phi, x term, G, Lc come from the CuPy pool; epoch k holds
    4k more Phi-sized arrays first (the pool's free blocks taken: the stages then get other memory), one round.
    Returns per set the step / BTE / ITER medians (ms) and the state's Phi address after the set's steps."""
    cache = sim.model.device_cache
    key = next((k for k in cache if isinstance(k, tuple) and k and k[0] == "cuda.bte_graph"), None)
    out = {"mode": "graph" if key is not None else "pool", "step_ms": [], "bte_ms": [], "iter_ms": [],
           "phi_ptr": [], "tx_ptr": []}
    keep = []
    if key is not None:
        from solver.bsp.kernels.cuda import bte_graph

        sets = [cache[key]]
        for k in range(1, nsets):
            keep.append(cp.cuda.Memory((2 * k - 1) * 2**20))
            sets.append(bte_graph.StageGraph(key[1]))
        order = [k for _ in range(rounds) for k in range(nsets)]
    else:
        sets, order = list(range(nsets)), list(range(nsets))
    res = {k: [] for k in range(nsets)}
    for k in order:
        if key is not None:
            cache[key] = sets[k]
            out["tx_ptr"].append(int(sets[k].tx.data.ptr))
        else:
            shape = sim.state.Phi.shape
            keep += [cp.empty(shape, dtype=cp.float64) for _ in range(4 if k else 0)]
        r = run_steps(sim, warm, n)
        res[k] += r["phases"]
        out["phi_ptr"].append(int(sim.state.Phi.data.ptr))
    if key is not None:
        cache[key] = sets[0]
    for k in range(nsets):
        for col, ph in (("step_ms", "step"), ("bte_ms", "step/BTE"), ("iter_ms", "step/ITER")):
            out[col].append(1e3 * statistics.median([p.get(ph, 0.0) for p in res[k]]))
    out["order"] = order
    return out


def host_probe(cp, n=5) -> dict:
    """The host's speed in this process: a fixed pure-Python loop (ms, median of n) and the host time of one
    small CuPy launch (us, median over 5 x 200 launches of an elementwise add on 8 elements)."""
    loop = []
    for _ in range(n):
        t = time.perf_counter()
        x = 0
        for i in range(200_000):
            x += i & 7
        loop.append(1e3 * (time.perf_counter() - t))
    lat = []
    if cp is None:
        return {"py_loop_ms": statistics.median(loop), "launch_us": None, "cpu": _cpu()}
    a = cp.zeros(8)
    cp.add(a, 1.0, out=a)
    cp.cuda.Device().synchronize()
    for _ in range(5):
        t = time.perf_counter()
        for _ in range(200):
            cp.add(a, 1.0, out=a)
        lat.append(1e6 * (time.perf_counter() - t) / 200)
        cp.cuda.Device().synchronize()
    return {"py_loop_ms": statistics.median(loop), "launch_us": statistics.median(lat), "cpu": _cpu()}


def kernel_pass(sim, cp, nsets: int, reps: int, rounds: int) -> dict:
    import numpy as np

    from solver.bsp import scattering
    from solver.bsp.kernels.cuda import _build

    spin = _build.function("spin.cu", "spin")
    e0, e1 = cp.cuda.Event(), cp.cuda.Event()

    def timed(fn, cycles=SPIN_CYCLES):
        spin((1,), (1,), (np.int64(cycles),))
        e0.record()
        fn()
        e1.record()
        e1.synchronize()
        return cp.cuda.get_elapsed_time(e0, e1)  # ms

    def clock_mhz():
        ms = [timed(lambda: spin((1,), (1,), (np.int64(CLOCK_CYCLES),)), 1000) for _ in range(3)]
        return CLOCK_CYCLES / (statistics.median(ms) * 1e3)

    out = {"clock_mhz_before": clock_mhz()}
    sets, keep, layout = [], [], []
    for k in range(nsets):
        if k:
            keep.append(cp.cuda.Memory((2 * k - 1) * 2**20))  # raw cudaMalloc: shifts the next set
        b = BufferSet(sim, cp)
        sets.append((b, b.kernels(sim, cp)))
        layout.append({n: int(a.data.ptr) for n, a in b.arrays().items()})
    times = [{n: [] for n in sets[0][1]} for _ in sets]
    for _ in range(rounds):
        for k, (b, fns) in enumerate(sets):
            for n, fn in fns.items():
                fn()
                times[k][n] += [timed(fn) for _ in range(reps)]
    chi = sim.state.chi
    ov = [timed(lambda: scattering.overlap(sim.model, sim.backend, chi)) for _ in range(reps)]
    out.update(clock_mhz_after=clock_mhz(), set_layout=layout,
               set_us={n: [1e3 * statistics.median(times[k][n]) for k in range(nsets)] for n in times[0]},
               overlap_us=1e3 * statistics.median(ov), copy_bytes=2 * int(sets[0][0].P.nbytes))
    return out


def child(a) -> int:
    t_launch = time.time()
    from solver.backend import prewarm

    cp = None
    if a.backend == "cupy":  # numpy: a host rehearsal of the steps' part (no arrays, no kernel pass)
        prewarm("cupy")
        import cupy as cp

    rec = {"label": a.label, "dummy_mib": a.dummy_mib, "pid": os.getpid(), "t_launch": t_launch,
           "affinity": sorted(os.sched_getaffinity(0)), "PYTHONHASHSEED": os.environ.get("PYTHONHASHSEED"),
           "ok": False}
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)

    def save():
        Path(a.out).write_text(json.dumps(rec, default=str))

    try:
        dummy = cp.empty(int(a.dummy_mib * 2**20) // 8, dtype=cp.float64) if cp and a.dummy_mib > 0 else None
        from solver.bsp.bench import Case
        from solver.bsp.model import load
        from solver.bsp.simulation import Simulation

        case = Case.parse(f"{a.mesh}:{a.backend}:1:{a.steps}:{a.warmup}")
        cfg = load(a.config, list(a.overrides) + case.overrides())
        rec["numerics"] = {k: cfg["numerics"].get(k) for k in ("bte_graph", "bte_kernels", "overlap", "iter_graph",
                                                                 "iter_overlap", "kernels")}
        sim = Simulation(cfg, progress=False)
        sim._timer_rows = []
        sim.startup()
        rec["startup_s"] = time.time() - t_launch
        rec["dummy_ptr"] = int(dummy.data.ptr) if dummy is not None else None
        rec["host_before"] = host_probe(cp)
        rec["main"] = run_steps(sim, a.warmup, a.steps)
        rec["host_after"] = host_probe(cp)
        rec["cpu_after"] = _cpu()
        if cp is not None:
            rec["arrays"] = collect_arrays({"state": sim.state, "iter": getattr(sim, "_iter", None), "eq": sim.eq,
                                            "cache": sim.model.device_cache, "sim": vars(sim)}, cp)
            pool = cp.get_default_memory_pool()
            rec["pool"] = {"used": int(pool.used_bytes()), "total": int(pool.total_bytes())}
        rec["device"] = sim.backend.device_info()
        rec["ok"] = True
        save()  # the steps are kept even if the kernel pass fails
        if cp is not None and a.step_sets > 0:
            rec["step_sets"] = step_sets(sim, cp, a.step_sets, 2, a.set_steps)
            save()
        if cp is not None and a.sets > 0:
            rec["kernels"] = kernel_pass(sim, cp, a.sets, a.kreps, a.krounds)
            save()
    except Exception as exc:  # noqa: BLE001 - recorded, the driver goes on with the next process
        rec["error"] = f"{type(exc).__name__}: {exc}"
        save()
        raise
    return 0


# ------------------------------------------------------------------------------------------- summary
def _med(v):
    v = [x for x in v if x is not None and not (isinstance(x, float) and math.isnan(x))]
    return statistics.median(v) if v else float("nan")


def _pct(v, q):
    v = sorted(v)
    if not v:
        return float("nan")
    i = (len(v) - 1) * q / 100.0
    lo, hi = int(math.floor(i)), int(math.ceil(i))
    return v[lo] + (v[hi] - v[lo]) * (i - lo)


def pearson(x, y) -> float:
    """Pearson r of the pairs where both are finite; nan with < 3 pairs or no variance."""
    p = [(a, b) for a, b in zip(x, y) if a is not None and b is not None and math.isfinite(a) and math.isfinite(b)]
    if len(p) < 3:
        return float("nan")
    mx, my = statistics.fmean(a for a, _ in p), statistics.fmean(b for _, b in p)
    sxy = sum((a - mx) * (b - my) for a, b in p)
    sxx = sum((a - mx) ** 2 for a, _ in p)
    syy = sum((b - my) ** 2 for _, b in p)
    return sxy / math.sqrt(sxx * syy) if sxx > 0 and syy > 0 else float("nan")


def spread(v) -> float:
    """(max - min) / median of the finite values, nan with fewer than two."""
    v = [x for x in v if x is not None and math.isfinite(x)]
    return (max(v) - min(v)) / statistics.median(v) if len(v) > 1 and statistics.median(v) else float("nan")


def read_smi(path) -> list[dict]:
    """nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,<reasons>
    --format=csv,noheader,nounits -lms 100 lines: [{t, sm, mem, power, temp, reasons}]."""
    rows = []
    if not os.path.exists(path):
        return rows
    for line in open(path):
        c = [x.strip() for x in line.split(",")]
        if len(c) < 6:
            continue
        try:
            t = datetime.strptime(c[0], "%Y/%m/%d %H:%M:%S.%f").timestamp()
        except ValueError:
            continue

        def num(s):
            try:
                return float(s)
            except ValueError:
                return float("nan")
        try:
            reasons = int(c[5], 16)
        except ValueError:
            reasons = None
        rows.append({"t": t, "sm": num(c[1]), "mem": num(c[2]), "power": num(c[3]), "temp": num(c[4]),
                     "reasons": reasons})
    return rows


def _window(smi, t0, t1, pad=0.15):
    w = [r for r in smi if t0 - pad <= r["t"] <= t1 + pad]
    if not w and smi:  # a short window between two samples: the nearest one
        w = [min(smi, key=lambda r: abs(r["t"] - 0.5 * (t0 + t1)))]
        if abs(w[0]["t"] - 0.5 * (t0 + t1)) > 1.0:
            w = []
    return w


def layout_id(arrays) -> str:
    """A short name of the big arrays' addresses (same id = the same virtual layout)."""
    big = tuple((a["name"], a["ptr"]) for a in arrays if a["bytes"] >= BIG_BYTES)
    return hashlib.sha1(repr(big).encode()).hexdigest()[:6] if big else "-"


def process_row(i, rec, smi) -> dict:
    row = {"proc": i, "label": rec.get("label"), "dummy_mib": rec.get("dummy_mib"), "ok": rec.get("ok"),
           "error": rec.get("error", ""), "startup_s": rec.get("startup_s")}
    main = rec.get("main")
    if main and main["phases"]:
        ph = main["phases"]
        ms = lambda k: [1e3 * p.get(k, 0.0) for p in ph]  # noqa: E731
        step = ms("step")
        half = len(step) // 2
        row.update(step_med=_med(step), step_p10=_pct(step, 10), step_p90=_pct(step, 90),
                   step_first_half=_med(step[:half]) if half else float("nan"), step_second_half=_med(step[half:]),
                   bte=_med(ms("step/BTE")), dens=_med(ms("step/DENS")), iter=_med(ms("step/ITER")),
                   wall_med=_med([1e3 * w for w in main["wall"]]),
                   host_gap=_med([1e3 * w - s for w, s in zip(main["wall"], step)]),
                   newton=main.get("newton"))
        for k in sorted({k for p in ph for k in p}):
            if k.count("/") == 2 and k.split("/")[1] in ("BTE", "ITER"):  # the phases under BTE and ITER
                row["ph_" + k[len("step/"):]] = _med(ms(k))
        cpus = [c for c in main["cpus"] if c >= 0]
        row["cpu"] = statistics.mode(cpus) if cpus else -1
        row["cpu_changes"] = sum(1 for a, b in zip(cpus, cpus[1:]) if a != b)
        w = _window(smi, main["t0"], main["t1"])
        row["smi_n"] = len(w)
        for key in ("sm", "mem", "power", "temp"):
            v = [r[key] for r in w if math.isfinite(r[key])]
            row[f"{key}_med"] = _med(v)
            row[f"{key}_min"] = min(v) if v else float("nan")
        row["power_max"] = max((r["power"] for r in w if math.isfinite(r["power"])), default=float("nan"))
        rs = [r["reasons"] for r in w if r["reasons"] is not None]
        mask = 0
        for r in rs:
            mask |= r
        row["reasons"] = "|".join(n for b, n in THROTTLE_BITS.items() if mask & b and b != 0x1) or "none"
        row["frac_power_cap"] = sum(1 for r in rs if r & 0x84) / len(rs) if rs else float("nan")
        row["frac_thermal"] = sum(1 for r in rs if r & 0x68) / len(rs) if rs else float("nan")
        row["t_mid"] = 0.5 * (main["t0"] + main["t1"])
    arrays = rec.get("arrays") or []
    big = [a for a in arrays if a["bytes"] >= BIG_BYTES]
    row["layout"] = layout_id(arrays)
    row["n_big"] = len(big)
    if big:
        base = big[0]["ptr"]
        row["big_mod4k"] = ";".join(str(a["ptr"] % 4096) for a in big)
        row["big_mod2m_kib"] = ";".join(str((a["ptr"] % 2**21) // 1024) for a in big)
        row["big_off_mib"] = ";".join(f"{(a['ptr'] - base) / 2**20:.0f}" for a in big)
        phi = [a for a in big if a["name"].endswith(".Phi") or ".phi[" in a["name"]]
        row["phi_mod2m_kib"] = (phi[0]["ptr"] % 2**21) // 1024 if phi else None
    hp = [rec[k] for k in ("host_before", "host_after") if rec.get(k)]
    if hp:
        row["py_loop_ms"] = _med([h["py_loop_ms"] for h in hp])
        row["launch_us"] = _med([h["launch_us"] for h in hp if h["launch_us"] is not None])
    ss = rec.get("step_sets")
    if ss and ss.get("step_ms"):
        row["sets_mode"] = ss["mode"]
        row["sets_step_ms"] = ";".join(f"{v:.3f}" for v in ss["step_ms"])
        row["sets_bte_ms"] = ";".join(f"{v:.3f}" for v in ss["bte_ms"])
        row["sets_step_spread"] = spread(ss["step_ms"])
        row["sets_bte_spread"] = spread(ss["bte_ms"])
        row["sets_phi_moved"] = len(set(ss["phi_ptr"])) > 1 or len(set(ss.get("tx_ptr", []))) > 1
    kern = rec.get("kernels")
    if kern:
        row["clk_spin_before"] = kern["clock_mhz_before"]
        row["clk_spin_after"] = kern["clock_mhz_after"]
        row["overlap_us"] = kern["overlap_us"]
        for n, v in kern["set_us"].items():
            row[f"k_{n}_us"] = v[0]
            row[f"k_{n}_set_spread"] = spread(v)
        if "copy" in kern["set_us"]:
            row["copy_gbs"] = kern["copy_bytes"] / (kern["set_us"]["copy"][0] * 1e3)
        # the BTE's device work per step (3 stages: gain, loss, x, fused + rho, overlap) from the kernel pass
        # against the BTE phase: what is left is the GPU idle inside the phase (host launches, gaps)
        us = sum(kern["set_us"][n][0] for n in ("scat_gain", "scat_loss", "weno_dx", "wphi_rk") if n in kern["set_us"])
        row["bte_dev_ms"] = 3e-3 * (us + kern["overlap_us"])
        if "bte" in row:
            row["bte_idle_ms"] = row["bte"] - row["bte_dev_ms"]
    return row


def summarize(d, compact: bool = False) -> tuple[list[dict], str]:
    d = Path(d)
    smi = read_smi(d / "smi.csv")
    files = sorted(glob.glob(str(d / "proc_*.json")), key=lambda p: int(Path(p).stem.split("_")[1]))
    rows = []
    for f in files:
        i = int(Path(f).stem.split("_")[1])
        try:
            rec = json.loads(Path(f).read_text())
        except (OSError, ValueError) as exc:
            rec = {"error": f"unreadable: {exc}"}
        rows.append(process_row(i, rec, smi))
    t = [r["t_mid"] for r in rows if "t_mid" in r]
    for r in rows:
        if "t_mid" in r:
            r["t_call_s"] = r["t_mid"] - min(t)  # when in the call the process's timed steps ran
    keys = []
    for r in rows:
        keys += [k for k in r if k not in keys]
    with open(d / "procs.csv", "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=keys)
        w.writeheader()
        for r in rows:
            w.writerow({k: (f"{v:.5g}" if isinstance(v, float) else v) for k, v in r.items()})
    return rows, table(rows, compact)


def _f(v, fmt):
    return fmt.format(v) if isinstance(v, (int, float)) and v is not None and math.isfinite(v) else "-"


def compact_rows(rows) -> list[str]:
    """One short line per process (the printed table; the full one is table_full.txt)."""
    L = ["proc label   dMiB step  [p10  -p90 ]  BTE   BTEdev ITER  | smiSM  W   T  spinMHz | pyloop launch cpu "
         "| sets step%"]
    for r in rows:
        if "step_med" not in r:
            L.append(f"{r['proc']:4d} {str(r['label']):8s} FAILED: {str(r.get('error', ''))[:90]}")
            continue
        L.append(f"{r['proc']:4d} {str(r['label']):8s}{_f(r['dummy_mib'], '{:4.0f}')} {_f(r['step_med'], '{:.3f}')} "
                 f"[{_f(r['step_p10'], '{:.3f}')}-{_f(r['step_p90'], '{:.3f}')}] {_f(r['bte'], '{:.3f}')} "
                 f"{_f(r.get('bte_dev_ms'), '{:.3f}')}  {_f(r['iter'], '{:.3f}')} | {_f(r.get('sm_med'), '{:4.0f}')} "
                 f"{_f(r.get('power_med'), '{:3.0f}')} {_f(r.get('temp_med'), '{:2.0f}')} "
                 f"{_f(r.get('clk_spin_before'), '{:4.0f}')}    | {_f(r.get('py_loop_ms'), '{:6.2f}')} "
                 f"{_f(r.get('launch_us'), '{:6.2f}')} {str(r.get('cpu', '-')):>3s} "
                 f"| {_f(100 * r['sets_step_spread'] if 'sets_step_spread' in r else None, '{:.1f}')}")
    return L


def table(rows, compact: bool = False) -> str:
    if compact:
        L = compact_rows(rows)
        return "\n".join(L + _correlations(rows, compact))
    L = ["per process (ms; kernels us, device time of one launch on set 0): step median [p10-p90], 1st/2nd half, "
         "BTE, BTE device (kernel pass x 3), ITER, host gap (wall - GPU step)",
         "proc label    dMiB step   [p10  -p90 ]  1st  /2nd    BTE   BTEdev  ITER  gap    wphi_rk weno_dx gain  loss  "
         "ovl   copyGB/s"]
    for r in rows:
        if "step_med" not in r:
            L.append(f"{r['proc']:4d} {str(r['label']):8s} FAILED: {str(r.get('error', ''))[:110]}")
            continue
        L.append(f"{r['proc']:4d} {str(r['label']):8s} {_f(r['dummy_mib'], '{:4.0f}')} "
                 f"{_f(r['step_med'], '{:.3f}')} [{_f(r['step_p10'], '{:.3f}')}-{_f(r['step_p90'], '{:.3f}')}] "
                 f"{_f(r['step_first_half'], '{:.3f}')}/{_f(r['step_second_half'], '{:.3f}')} "
                 f"{_f(r['bte'], '{:.3f}')} {_f(r.get('bte_dev_ms'), '{:.3f}')}  {_f(r['iter'], '{:.3f}')} "
                 f"{_f(r['host_gap'], '{:.3f}')}  {_f(r.get('k_wphi_rk_us'), '{:7.1f}')} "
                 f"{_f(r.get('k_weno_dx_us'), '{:7.1f}')} {_f(r.get('k_scat_gain_us'), '{:5.1f}')} "
                 f"{_f(r.get('k_scat_loss_us'), '{:5.1f}')} {_f(r.get('overlap_us'), '{:5.1f}')} "
                 f"{_f(r.get('copy_gbs'), '{:6.0f}')}")
    L.append("per process, state: nvidia-smi in the timed window (SM clock med/min MHz, power med/max W, temp C, "
             "reasons seen), spin-kernel SM clock before/after, host: python loop ms, launch us, cpu (changes), "
             "virtual layout id, Phi address mod 2 MiB (KiB)")
    L.append("proc label    smi_n SM med/min   W med/max  T  reasons        spinMHz    pyloop launch cpu(chg) layout phi%2M")
    for r in rows:
        if "step_med" not in r:
            continue
        L.append(f"{r['proc']:4d} {str(r['label']):8s} {r.get('smi_n', 0):5d} "
                 f"{_f(r.get('sm_med'), '{:4.0f}')}/{_f(r.get('sm_min'), '{:<4.0f}')}  "
                 f"{_f(r.get('power_med'), '{:3.0f}')}/{_f(r.get('power_max'), '{:<3.0f}')}  "
                 f"{_f(r.get('temp_med'), '{:2.0f}')} {str(r.get('reasons', '-'))[:14]:14s} "
                 f"{_f(r.get('clk_spin_before'), '{:4.0f}')}/{_f(r.get('clk_spin_after'), '{:<4.0f}')}  "
                 f"{_f(r.get('py_loop_ms'), '{:6.2f}')} {_f(r.get('launch_us'), '{:6.2f}')} "
                 f"{r.get('cpu', '-')}({r.get('cpu_changes', '-')}) {r.get('layout', '-')} {r.get('phi_mod2m_kib', '-')}")
    return "\n".join(L + _correlations(rows, compact))


def _correlations(rows, compact: bool) -> list[str]:
    L = []
    allok = [r for r in rows if "step_med" in r]
    ok = [r for r in allok if str(r["label"]) != "graph"]  # the bench's config (base, shiftN); graph apart
    if len(ok) < 3:
        ok = allok
    if len(ok) < 2:
        L.append("fewer than two processes with steps: no correlations")
        return L
    step = [r["step_med"] for r in ok]
    L.append(f"between processes: step {min(step):.3f}-{max(step):.3f} ms, spread {100 * spread(step):.1f} % "
             f"(n={len(ok)}); BTE {100 * spread([r['bte'] for r in ok]):.1f} %, ITER "
             f"{100 * spread([r['iter'] for r in ok]):.1f} %, BTE device {100 * spread([r.get('bte_dev_ms') for r in ok]):.1f} %")
    for label in sorted({str(r["label"]) for r in allok}):
        g = [r for r in allok if str(r["label"]) == label]
        L.append(f"  label {label}: n={len(g)} step median {_med([r['step_med'] for r in g]):.3f} ms, spread "
                 f"{_f(100 * spread([r['step_med'] for r in g]), '{:.1f}')} %; BTE {_med([r['bte'] for r in g]):.3f} ms, "
                 f"spread {_f(100 * spread([r['bte'] for r in g]), '{:.1f}')} %; ITER spread "
                 f"{_f(100 * spread([r['iter'] for r in g]), '{:.1f}')} %")
    feats = [("smi sm clock med", "sm_med"), ("smi sm clock min", "sm_min"), ("smi mem clock", "mem_med"),
             ("power med", "power_med"), ("temperature", "temp_med"), ("frac power cap", "frac_power_cap"),
             ("spin clock MHz", "clk_spin_before"), ("host gap ms", "host_gap"), ("wall ms", "wall_med"),
             ("BTE device ms", "bte_dev_ms"), ("BTE idle ms", "bte_idle_ms"), ("py loop ms", "py_loop_ms"),
             ("launch us", "launch_us"),
             ("time in call s", "t_call_s"), ("dummy MiB", "dummy_mib"), ("Phi ptr %2MiB", "phi_mod2m_kib"),
             ("wphi_rk us", "k_wphi_rk_us"), ("weno_dx us", "k_weno_dx_us"), ("copy GB/s", "copy_gbs"),
             ("cpu id", "cpu")]
    L.append(f"correlation of step_med with (Pearson r over the {len(ok)} processes of the bench's config; "
             "the feature's range):")
    for name, k in feats:
        x = [r.get(k) if isinstance(r.get(k), (int, float)) else None for r in ok]
        v = [u for u in x if u is not None and math.isfinite(u)]
        if len(v) >= 3:
            L.append(f"  {name:16s} r = {_f(pearson(step, x), '{:+.2f}'):>5s}   feature {min(v):.4g} .. {max(v):.4g}")
    phs = [k for k in ok[0] if k.startswith("ph_")]
    if phs:
        L.append("phases (solver timers, CUDA events; medians per step, ms): range over the processes, spread, r with step")
        for k in phs:
            x = [r.get(k) for r in ok]
            v = [u for u in x if u is not None and math.isfinite(u)]
            if v:
                L.append(f"  {k[3:]:22s} {min(v):7.3f} .. {max(v):7.3f}  ({max(v) - min(v):+.3f})  "
                         f"spread {_f(100 * spread(v), '{:5.1f}')} %  r = {_f(pearson(step, x), '{:+.2f}')}")
    st = [r for r in allok if "sets_step_ms" in r]
    if st:
        L.append("step-level placement test (same process, other device buffers: graph = fresh StageGraphs swapped in, "
                 "2 interleaved rounds; pool = 4k more Phi-sized arrays held): step / BTE medians per set (ms)")
        for r in ([] if compact else st):
            L.append(f"  proc {r['proc']:2d} {str(r['label']):7s} {r['sets_mode']:5s} step {r['sets_step_ms']}  "
                     f"(spread {_f(100 * r['sets_step_spread'], '{:.1f}')} %)  BTE {r['sets_bte_ms']}  "
                     f"(spread {_f(100 * r['sets_bte_spread'], '{:.1f}')} %)  moved {r['sets_phi_moved']}")
        for mode in ("graph", "pool"):
            g = [r for r in st if r["sets_mode"] == mode]
            if g:
                L.append(f"  {mode}: within a process step spread median {_f(100 * _med([r['sets_step_spread'] for r in g]), '{:.1f}')} %"
                         f" against {_f(100 * spread([r['step_med'] for r in allok if r.get('sets_mode') == mode]), '{:.1f}')} % "
                         f"between these processes' main runs")
    kn = [k for k in ok[0] if k.startswith("k_") and k.endswith("_set_spread")]
    if kn:
        L.append("in-process placement test (same kernel on fresh buffer sets, interleaved; median over processes "
                 "of (max-min)/median across sets) against the spread of the set-0 medians between processes:")
        for k in kn:
            n = k[2:-len("_set_spread")]
            within = _med([r.get(k) for r in ok])
            between = spread([r.get(f"k_{n}_us") for r in ok])
            L.append(f"  {n:9s} within {_f(100 * within, '{:5.1f}')} %   between {_f(100 * between, '{:5.1f}')} %")
    groups = {}
    for r in ok:
        groups.setdefault(r.get("layout"), []).append(r["step_med"])
    L.append(f"virtual layouts of the big arrays: {len(groups)} distinct; " + "; ".join(
        f"{k}: n={len(v)} spread {_f(100 * spread(v), '{:.1f}')} %" for k, v in groups.items()))
    return L


# ------------------------------------------------------------------------------------------- fake
def fake(d, n=8, seed=1) -> None:
    """Fake records: the step time follows the SM clock; a fixed layout; a placement-free kernel pass."""
    import random

    rnd = random.Random(seed)
    d = Path(d)
    d.mkdir(parents=True, exist_ok=True)
    smi_lines, t = [], 1.8e9
    for i in range(n):
        clk = rnd.choice([1980, 1900, 1830, 1755])
        scale = 1980 / clk
        t0 = t + 3.0
        steps = 40
        ph = [{"step": 3.0e-3 * scale * (1 + 0.01 * rnd.random()), "step/BTE": 2.0e-3 * scale,
               "step/DENS": 4e-6, "step/ITER": 0.95e-3 * scale, "step/BTE/RK": 1.2e-3 * scale,
               "step/ITER/eigen": 0.3e-3 * scale} for _ in range(steps)]
        main = {"t0": t0, "t1": t0 + 0.7, "phases": ph, "wall": [p["step"] + 2e-5 for p in ph],
                "cpus": [3] * steps, "newton": 9}
        arrays = [{"name": "state.Phi", "ptr": 0x7f0000000000, "bytes": 134784000, "shape": "65x3x6x300x48"},
                  {"name": "cache.tx", "ptr": 0x7f0008200000, "bytes": 134784000, "shape": "65x3x6x300x48"}]
        kern = {"clock_mhz_before": float(clk), "clock_mhz_after": float(clk), "overlap_us": 6.0,
                "copy_bytes": 2 * 134784000, "set_layout": [],
                "set_us": {"wphi_rk": [400.0 * scale] * 3, "weno_dx": [150.0 * scale] * 3, "scat_gain": [20.0] * 3,
                           "scat_loss": [15.0] * 3, "copy": [70.0] * 3}}
        rec = {"label": "base" if i % 3 else "shift3", "dummy_mib": 0 if i % 3 else 3, "ok": True, "startup_s": 2.0,
               "main": main, "arrays": arrays, "kernels": kern,
               "step_sets": {"mode": "pool", "step_ms": [3.0 * scale] * 3, "bte_ms": [2.0 * scale] * 3,
                             "iter_ms": [0.95 * scale] * 3, "phi_ptr": [1, 2, 3], "tx_ptr": []},
               "host_before": {"py_loop_ms": 8.0, "launch_us": 6.0, "cpu": 3},
               "host_after": {"py_loop_ms": 8.2, "launch_us": 6.2, "cpu": 3}}
        if i == n - 1:
            rec = {"label": "base", "dummy_mib": 0, "ok": False, "error": "RuntimeError: fake failure"}
        (d / f"proc_{i}.json").write_text(json.dumps(rec))
        for j in range(-5, 12):
            ts = datetime.fromtimestamp(t0 + 0.1 * j).strftime("%Y/%m/%d %H:%M:%S.%f")[:-3]
            smi_lines.append(f"{ts}, {clk}, 3201, {600 + 30 * (1980 - clk) / 75:.2f}, {40 + i}, 0x0000000000000004")
        t = t0 + 2.0
    (d / "smi.csv").write_text("\n".join(smi_lines) + "\n")


# ------------------------------------------------------------------------------------------- main
def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("child")
    c.add_argument("--out", required=True)
    c.add_argument("--label", default="base")
    c.add_argument("--config", default="config/bsp/dgmosfet.yaml")
    c.add_argument("--mesh", default="6x65x65x300x48")
    c.add_argument("--backend", default="cupy", choices=("cupy", "numpy"), help="numpy: a host rehearsal")
    c.add_argument("--steps", type=int, default=200)
    c.add_argument("--warmup", type=int, default=5)
    c.add_argument("--dummy-mib", type=float, default=0.0)
    c.add_argument("--sets", type=int, default=3, help="buffer sets of the kernel pass (0: no kernel pass)")
    c.add_argument("--step-sets", type=int, default=3, help="buffer sets of the step-level test (0: none)")
    c.add_argument("--set-steps", type=int, default=60, help="timed steps per set and round of the step-level test")
    c.add_argument("--kreps", type=int, default=20)
    c.add_argument("--krounds", type=int, default=2)
    c.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    s = sub.add_parser("summary")
    s.add_argument("dir")
    s.add_argument("--full", help="also write the full table (both per-process blocks, every step set) to this file")
    f = sub.add_parser("fake")
    f.add_argument("dir")
    f.add_argument("--n", type=int, default=8)
    a = ap.parse_args(argv)
    if a.cmd == "child":
        return child(a)
    if a.cmd == "fake":
        fake(a.dir, a.n)
        return 0
    rows, text = summarize(a.dir, compact=True)
    if a.full:
        Path(a.full).write_text(table(rows) + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
