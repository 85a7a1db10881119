"""Table 1 and Table 4 of paper 001 on this GPU: the IPIM kernels A and B per time step for
NZ = 33 .. 129 (NX = 65, N_sbn = 6), and the per-step time of every ITER CUDA kernel on the
standard mesh 6 x 65 x 65 x 300 x 48.

    python workflow/scripts/bsp_iter_kernels.py [--config CFG] [--set K=V ...] [--nz 33,49,65,97,129]
        [--nx 65] [--nsbn 6] [--nw 300] [--nphi 48] [--steps 5] [--reps 100]
        --table1 table1_ipim_001.csv --table4 table4_iter_kernels_001.csv

Method.  For each mesh a real run on the cupy backend (numerics.kernels auto): start-up, then
--steps time steps during which every ITER fast path (solve_eigen, frechet, construct_linsys,
solve_linsys, newton_rhs, newton_norms) is wrapped to count its calls and to keep a copy of the
arguments of its last call (a realistic mid-run state).  Each kernel is then timed on those
arguments: CUDA events around the launch(es) of one call, queued behind a ~1 ms spin kernel so
that the host's launch overhead is hidden (the events bracket device time only; for the
multi-launch cyclic-reduction solve that includes the gaps between its launches); median of
--reps calls.  Per step = per call x calls per step.  NW and NPHI do not enter the ITER kernels
(the eigenproblems and the Newton system live on the NX x NZ mesh); they only change the BTE state
that sets how many Newton iterations POTENTIAL takes, so the counting runs use the papers' NW/NPHI.
NZ = 129 exceeds the block solve's NZ <= 127: that run solves its Newton systems with the
reference (host SuperLU), which only affects the counts to rounding.

Writes --table1, --table4 and <table4 stem>.run.json (solver.io, atomic); prints both tables last.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(REPO))

from solver import io, provenance  # noqa: E402
from solver.backend import get_backend  # noqa: E402

# Paper 001, Table 1 (V100): per-step seconds of the IPIM kernels (NX 65, NW 300, NPHI 48)
PAPER_T1 = {33: (0.000266, 0.000272), 49: (0.000366, 0.000520), 65: (0.000503, 0.000557),
            97: (0.000960, 0.001060), 129: (0.001520, 0.001470)}
# Paper 001, Table 4: per-step microseconds (RTX 3090, V100) of the iter kernels, 6x65x65x300x48
PAPER_T4 = {"cuda_eigenvalues_NR": (245.1, 205.4), "cuda_tridiag_Thomas": (774.8, 576.0),
            "cuda_compute_frechet": (3994.6, 322.2), "cuda_constrlinsys": (1055.2, 692.1),
            "cuda_matvec_product": (6499.4, 5194.5), "cuda_update_x": (1376.8, 1496.7)}
HOOKS = ("solve_eigen", "frechet", "construct_linsys", "solve_linsys", "newton_rhs", "newton_norms")

_SPIN_SRC = r"""
extern "C" __global__ void spin(long long cycles) {
    long long t0 = clock64();
    while (clock64() - t0 < cycles) { }
}
"""


def _copy(cp, a):
    if isinstance(a, cp.ndarray):
        return a.copy()
    if isinstance(a, tuple):
        return tuple(_copy(cp, x) for x in a)
    if isinstance(a, list):
        return [_copy(cp, x) for x in a]
    return a


class Timer:
    """Device time of one call of fn: CUDA events around it, behind a spin kernel."""

    def __init__(self, cp, spin_cycles=2_000_000):
        self.cp = cp
        self.spin = cp.RawKernel(_SPIN_SRC, "spin")
        self.cycles = np.int64(spin_cycles)
        e0, e1 = cp.cuda.Event(), cp.cuda.Event()
        self.spin((1,), (1,), (self.cycles,))
        e0.record()
        self.spin((1,), (1,), (self.cycles,))
        e1.record()
        e1.synchronize()
        self.spin_s = cp.cuda.get_elapsed_time(e0, e1) / 1e3

    def __call__(self, fn, reps):
        cp = self.cp
        fn()  # compile / warm caches
        cp.cuda.Device().synchronize()
        ev, host = [], []
        for _ in range(reps):
            e0, e1 = cp.cuda.Event(), cp.cuda.Event()
            self.spin((1,), (1,), (self.cycles,))
            e0.record()
            t = time.perf_counter()
            fn()
            host.append(time.perf_counter() - t)
            e1.record()
            ev.append((e0, e1))
            e1.synchronize()
        dev = [cp.cuda.get_elapsed_time(a, b) / 1e3 for a, b in ev]
        return statistics.median(dev), statistics.median(host), max(host) < self.spin_s


def counting_run(cfg_path, overrides, steps, be):
    """Start-up, then `steps` steps with the ITER fast paths counted; (calls per step, last args,
    model, linsys path)."""
    from solver.bsp import kernels
    from solver.bsp.model import load
    from solver.bsp.simulation import Simulation

    cp = be.xp
    mod = kernels.module_for("cupy")
    cfg = load(cfg_path, list(overrides) + [f"time.steps={steps}", "time.t_end_ps=null", "numerics.backend=cupy",
                                            "numerics.kernels=auto", "output.progress=false",
                                            "output.checkpoint_every_steps=0"])
    sim = Simulation(cfg, backend=be, progress=False)
    NZ = sim.model.NZ
    saved = {h: getattr(mod, h) for h in HOOKS if hasattr(mod, h)}
    path = "block cyclic reduction (CUDA)"
    try:
        if NZ > 127:  # the block solve holds NZ <= 127: reference construct + solve (host SuperLU)
            delattr(mod, "construct_linsys")
            delattr(mod, "solve_linsys")
            path = "reference (host SuperLU): NZ > 127"
        sim._timer_rows = []  # as Simulation.run
        sim.startup()
        counts = {h: 0 for h in HOOKS}
        last = {}

        def wrap(h, f):
            def g(*args):
                counts[h] += 1
                last[h] = _copy(cp, args)
                return f(*args)
            return g

        for h in HOOKS:
            if hasattr(mod, h):
                setattr(mod, h, wrap(h, getattr(mod, h)))
        newton = 0
        for _ in range(steps):
            sim.step()
            newton += sim.state.newton_iterations
        counts["newton_iterations"] = newton
        cp.cuda.Device().synchronize()
    finally:
        for h, f in saved.items():
            setattr(mod, h, f)
    return {h: c / steps for h, c in counts.items()}, last, sim.model, path


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", default=str(REPO / "config/bsp/dgmosfet.yaml"))
    ap.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    ap.add_argument("--nz", default="33,49,65,97,129")
    ap.add_argument("--nx", type=int, default=65)
    ap.add_argument("--nsbn", type=int, default=6)
    ap.add_argument("--nw", type=int, default=300)
    ap.add_argument("--nphi", type=int, default=48)
    ap.add_argument("--standard-nz", type=int, default=65, help="NZ of the Table 4 mesh (one of --nz)")
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--reps", type=int, default=100)
    ap.add_argument("--table1", required=True)
    ap.add_argument("--table4", required=True)
    a = ap.parse_args(argv)

    be = get_backend("cupy")
    cp = be.xp
    from solver.bsp import blocktri
    from solver.bsp.kernels import cuda_blocktri, cuda_iter

    tm = Timer(cp)
    rows1, rows4 = [], []
    nzs = [int(v) for v in a.nz.split(",")]
    for NZ in nzs:
        mesh = [f"mesh.N_sbn={a.nsbn}", f"mesh.NX={a.nx}", f"mesh.NZ={NZ}", f"mesh.NW={a.nw}", f"mesh.NPHI={a.nphi}"]
        t0 = time.perf_counter()
        calls, last, m, path = counting_run(a.config, mesh + a.overrides, a.steps, be)
        print(f"NZ={NZ}: counting run {time.perf_counter() - t0:.1f} s, calls/step {calls}", file=sys.stderr)
        _, _, V = last["solve_eigen"]
        V = cp.ascontiguousarray(V)
        eps, Dg = cuda_iter.eigenvalues(m, V)
        chi = {v: cuda_iter.ipim(m, eps, Dg, variant=v) for v in "ab"}
        e0, c0 = cuda_iter.solve_eigen_fused(m, be, V)
        bitwise = bool(cp.array_equal(eps, e0) and cp.array_equal(chi["a"], c0) and cp.array_equal(chi["b"], c0))
        t = {"eigenvalues": tm(lambda: cuda_iter.eigenvalues(m, V), a.reps),
             "ipim_a": tm(lambda: cuda_iter.ipim(m, eps, Dg, variant="a"), a.reps),
             "ipim_b": tm(lambda: cuda_iter.ipim(m, eps, Dg, variant="b"), a.reps),
             "tri_eigen_fused": tm(lambda: cuda_iter.solve_eigen_fused(m, be, V), a.reps)}
        ne = calls["solve_eigen"]
        pa, pb = PAPER_T1.get(NZ, (np.nan, np.nan))
        rows1.append({"NX": a.nx, "NZ": NZ, "N_sbn": a.nsbn, "NW": a.nw, "NPHI": a.nphi, "steps_counted": a.steps,
                      "eigen_calls_per_step": ne, "newton_iterations_per_step": calls["newton_iterations"],
                      "ipim_a_s_per_call": t["ipim_a"][0], "ipim_b_s_per_call": t["ipim_b"][0],
                      "ipim_a_s_per_step": t["ipim_a"][0] * ne, "ipim_b_s_per_step": t["ipim_b"][0] * ne,
                      "paper_v100_a_s_per_step": pa, "paper_v100_b_s_per_step": pb,
                      "eigenvalues_s_per_call": t["eigenvalues"][0],
                      "tri_eigen_fused_s_per_call": t["tri_eigen_fused"][0],
                      "bitwise_equal_a_b_fused": bitwise, "launch_overhead_hidden": all(v[2] for v in t.values()),
                      "newton_solve": path})
        if NZ != a.standard_nz:
            continue
        # Table 4: every ITER kernel on its captured arguments
        t4 = dict(t)
        mod_calls = {"eigenvalues": ne, "ipim_a": ne, "ipim_b": ne, "tri_eigen_fused": ne}
        for h in ("frechet", "construct_linsys", "solve_linsys", "newton_rhs", "newton_norms"):
            if h not in last:
                continue
            args = last[h]
            fn = getattr(cuda_blocktri, h)
            t4[h] = tm(lambda fn=fn, args=args: fn(*args), a.reps)
            mod_calls[h] = calls[h]
        nlev = len(blocktri.cr_levels(a.nx))
        chosen = cuda_iter.IPIM
        spec = [
            ("eigenvalues", "eigenvalues", "cuda_eigenvalues_NR", 1, ""),
            ("ipim_a", "ipim kernel A (global memory)", "cuda_tridiag_Thomas", 1, ""),
            ("ipim_b", "ipim kernel B (shared memory)", "cuda_tridiag_Thomas", 1, ""),
            ("tri_eigen_fused", "tri_eigen (fused eigenvalues + ipim, before the split)", "", 1, "not used"),
            ("frechet", "frechet", "cuda_compute_frechet", 1, ""),
            ("construct_linsys", "construct_linsys", "cuda_constrlinsys", 1, ""),
            ("solve_linsys", "solve_linsys (block cyclic reduction)", "cuda_matvec_product + cuda_update_x",
             2 * nlev + 2, "paper: an iterative solver's matvec + update kernels; ours: a direct solve"),
            ("newton_rhs", "newton_rhs", "", 1, "paper: no such kernel listed"),
            ("newton_norms", "newton_norms", "", 1, "paper: no such kernel listed; includes its one device-to-host read"),
        ]
        for key, name, pname, launches, note in spec:
            if key not in t4:
                continue
            if pname == "cuda_matvec_product + cuda_update_x":
                p3090 = PAPER_T4["cuda_matvec_product"][0] + PAPER_T4["cuda_update_x"][0]
                pv100 = PAPER_T4["cuda_matvec_product"][1] + PAPER_T4["cuda_update_x"][1]
            else:
                p3090, pv100 = PAPER_T4.get(pname, (np.nan, np.nan))
            per_call = t4[key][0]
            used = key not in ("ipim_a", "ipim_b", "tri_eigen_fused") or key == f"ipim_{chosen}"
            rows4.append({"mesh": f"{a.nsbn}x{a.nx}x{NZ}x{a.nw}x{a.nphi}", "kernel": name, "used_by_default": used,
                          "launches_per_call": launches,
                          "calls_per_step": mod_calls[key], "us_per_call": 1e6 * per_call,
                          "us_per_step": 1e6 * per_call * mod_calls[key], "paper_kernel": pname,
                          "paper_rtx3090_us_per_step": p3090, "paper_v100_us_per_step": pv100,
                          "host_us_per_call": 1e6 * t4[key][1], "launch_overhead_hidden": t4[key][2], "note": note})
    t1 = pd.DataFrame(rows1)
    t4 = pd.DataFrame(rows4)
    machine = provenance.machine_tag(be)
    t1.insert(0, "machine", machine)
    t4.insert(0, "machine", machine)
    o1, o4 = Path(a.table1), Path(a.table4)
    io.write_csv(t1, o1, float_format="%.6g")
    io.write_csv(t4, o4, float_format="%.6g")
    io.write_json(o4.with_name("iter_kernels_001.run.json"), provenance.collect(
        {"config": str(a.config), "overrides": a.overrides, "nz": nzs, "nx": a.nx, "n_sbn": a.nsbn, "nw": a.nw,
         "nphi": a.nphi, "steps": a.steps, "reps": a.reps, "ipim_default": cuda_iter.IPIM,
         "ipim_block": cuda_iter.IPIM_BLOCK}, be,
        {"spin_s": tm.spin_s, "timing": "CUDA events around one call queued behind a spin kernel; median of reps",
         "outputs": [str(o1), str(o4)]}))
    pd.set_option("display.width", 250)
    print(f"spin kernel {tm.spin_s * 1e3:.2f} ms (hides the host launch time)")
    print("\nTable 1 of 001: IPIM kernels A and B, seconds per time step")
    print(t1[["NZ", "eigen_calls_per_step", "ipim_a_s_per_call", "ipim_b_s_per_call", "ipim_a_s_per_step",
              "ipim_b_s_per_step", "paper_v100_a_s_per_step", "paper_v100_b_s_per_step", "eigenvalues_s_per_call",
              "tri_eigen_fused_s_per_call", "bitwise_equal_a_b_fused"]].to_string(index=False,
                                                                                  float_format=lambda v: f"{v:.4g}"))
    print("\nTable 4 of 001: ITER kernels, microseconds per time step")
    print(t4[["kernel", "launches_per_call", "calls_per_step", "us_per_call", "us_per_step", "paper_kernel",
              "paper_rtx3090_us_per_step", "paper_v100_us_per_step"]].to_string(index=False,
                                                                                 float_format=lambda v: f"{v:.4g}"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
