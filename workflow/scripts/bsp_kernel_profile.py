"""Per-kernel profile of the BTE phases (Table 4 of paper 000; Tables 5-6 of paper 001): time per
step, counted GFLOP/s and GB/s (fewest bytes) over the measured time, and their share of this
machine's measured ceilings (copy bandwidth; FP64 FMA on the GPU, FP64 GEMM on the CPU).  No
hardware counters: the flops and bytes are counted from the kernels' code (the counts of
workflow/scripts/bsp_kernels_bench.py and bsp_numba_bench.py, explained in
docs/performance-bte-kernels.md and docs/performance-numba-kernels.md).

    python workflow/scripts/bsp_kernel_profile.py --backend cupy|numba --config CFG [--set K=V ...]
        [--threads 1,all] [--reps 5] [--copy-mib 1024] --work DIR --out profile.csv

cupy: the CuPy array code and the CUDA fast paths (CUDA events); numba: the NumPy array code and
the numba fast paths at each thread count.  Writes --out (one row per kernel and variant),
<out>_ceilings.csv and <out>.run.json; prints the table last.
"""
from __future__ import annotations

import argparse
import importlib.util
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


def _script(name):
    spec = importlib.util.spec_from_file_location(name, HERE / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def gemm_ceiling(xp, n, reps=5, sync=lambda: None):
    """FP64 GEMM rate of xp.matmul on n x n (best of reps), 2 n^3 flop."""
    a = xp.ones((n, n)) * 0.5
    b = xp.ones((n, n)) * 0.25
    a @ b
    sync()
    best = np.inf
    for _ in range(reps):
        t = time.perf_counter()
        a @ b
        sync()
        best = min(best, time.perf_counter() - t)
    return {"ceiling": f"FP64 GEMM ({n} x {n} matmul)", "value": 2 * n**3 / best / 1e9, "unit": "GFLOP/s"}


def profile_cupy(a, mesh):
    kb = _script("bsp_kernels_bench")
    be = get_backend("cupy")
    cp = be.xp
    from solver.vecops.kernels import GpuKernels

    c = kb.copy_ceiling(cp, a.copy_mib)
    ceil = [{"ceiling": c["kind"], "value": c["GB_per_s"], "unit": "GB/s"}]
    k = GpuKernels(np.float64)
    sms = cp.cuda.runtime.getDeviceProperties(cp.cuda.Device().id)["multiProcessorCount"]
    grid, block, iters = sms * 32, 256, 4096
    out = cp.zeros(grid * block)
    med, _ = kb.timed(cp, lambda: k.fma(out, iters, grid, block), 5)
    ceil.append({"ceiling": "FP64 FMA chains (RawKernel)", "value": 16 * iters * grid * block / med / 1e9,
                 "unit": "GFLOP/s"})
    ceil.append(gemm_ceiling(cp, 8192, sync=cp.cuda.Device().synchronize))
    rows = []
    for r in kb.bench_mesh(be, a.config, a.reps, a.overrides, mesh):
        if r["phase"] == "rhs":
            continue
        for variant, t in (("array", r["array_s_per_call"]), ("cuda", r["fast_s_per_call"])):
            rows.append({"variant": variant, "threads": 1, "kernel": r["phase"], "seconds_per_call": t,
                         "flops_per_call": r["flops"], "bytes_per_call": r["fewest_bytes"],
                         "max_rel_diff_vs_array": 0.0 if variant == "array" else r["max_rel_diff"]})
    return pd.DataFrame(rows), pd.DataFrame(ceil), be, "FP64 FMA chains (RawKernel)"


def profile_numba(a, mesh):
    nb = _script("bsp_numba_bench")
    work = Path(a.work)
    argv = ["--config", str(a.config), "--threads", a.threads, "--reps", str(a.reps), "--copy-mib", str(a.copy_mib),
            "--out", str(work)]
    for s in a.overrides:
        argv += ["--set", s]
    nb.main(argv)
    ph = pd.read_csv(work / "numba_phases.csv")
    cd = pd.read_csv(work / "ceilings.csv")
    ceil = [{"ceiling": r.ceiling, "value": r.GB_per_s, "unit": "GB/s"} for r in cd.itertuples()]
    ceil.append(gemm_ceiling(np, 4096))
    rows = [{"variant": "array" if r.variant == "array" else "numba", "threads": int(r.threads), "kernel": r.phase,
             "seconds_per_call": r.seconds_per_call, "flops_per_call": r.flops_per_call,
             "bytes_per_call": r.min_bytes_per_call,
             "max_rel_diff_vs_array": 0.0 if r.variant == "array" else r.max_rel_diff_vs_array}
            for r in ph.itertuples()]
    return pd.DataFrame(rows), pd.DataFrame(ceil), get_backend("numba"), "FP64 GEMM (4096 x 4096 matmul)"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backend", choices=("cupy", "numba"), required=True)
    ap.add_argument("--config", default=str(REPO / "config/standard.yaml"))
    ap.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    ap.add_argument("--mesh", default=None, help="mesh label of the rows (default: the config's stem)")
    ap.add_argument("--threads", default="1,all", help="numba thread counts")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--copy-mib", type=int, default=1024)
    ap.add_argument("--work", required=True, help="folder for the underlying benchmark's files")
    ap.add_argument("--out", required=True)
    a = ap.parse_args(argv)
    mesh = a.mesh or Path(a.config).stem
    fn = profile_cupy if a.backend == "cupy" else profile_numba
    df, ceil, be, fp_name = fn(a, mesh)
    copy_gbs = float(ceil[ceil.unit == "GB/s"].value.max())
    fp_gflops = float(ceil.loc[ceil.ceiling == fp_name, "value"].iloc[0])
    df.insert(0, "mesh", mesh)
    df.insert(0, "machine", provenance.machine_tag())
    df["ms_per_step"] = 1e3 * 3 * df.seconds_per_call  # one call per RK stage, three stages
    arr = df[df.variant == "array"].set_index("kernel").seconds_per_call
    df["speedup_vs_array"] = df.kernel.map(arr) / df.seconds_per_call
    df["GFLOP_per_s"] = df.flops_per_call / df.seconds_per_call / 1e9
    df["GB_per_s"] = df.bytes_per_call / df.seconds_per_call / 1e9
    df["pct_of_copy_ceiling"] = 100 * df.GB_per_s / copy_gbs
    df["pct_of_fp64_ceiling"] = 100 * df.GFLOP_per_s / fp_gflops
    df["fp64_ceiling"] = fp_name
    out = Path(a.out)
    io.write_csv(df, out, float_format="%.6g")
    io.write_csv(ceil, out.with_name(out.stem + "_ceilings.csv"), float_format="%.6g")
    io.write_json(out.with_name(out.stem + ".run.json"), provenance.collect(
        {"backend": a.backend, "config": str(a.config), "overrides": a.overrides, "threads": a.threads,
         "reps": a.reps, "copy_mib": a.copy_mib}, be, {"copy_GB_per_s": copy_gbs, "fp64_GFLOP_per_s": fp_gflops}))
    print(ceil.to_string(index=False, float_format=lambda v: f"{v:.1f}"))
    cols = ["variant", "threads", "kernel", "ms_per_step", "speedup_vs_array", "GFLOP_per_s", "GB_per_s",
            "pct_of_copy_ceiling", "pct_of_fp64_ceiling", "max_rel_diff_vs_array"]
    print(df[cols].to_string(index=False, float_format=lambda v: f"{v:.4g}"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
