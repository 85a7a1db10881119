"""BTE kernels, numerics.bte_kernels exact vs fast, on one GPU (issue 13; docs/performance-bte-kernels.md,
"round 2" and "round 3").  One call, under 3 minutes on an H200:

1. the gpu tests of the BTE fast paths (``--no-tests`` skips them; at most 150 s): pytest_gpu.log;
2. the device-to-device copy ceiling (cupy.copyto of 1 GiB, median of 10): ceiling.csv;
3. per kernel and variant on the synthetic stage of the coarse mesh 6x33x33x150x24, the standard
   mesh 6x65x65x300x48 and (unless ``--no-fine``) the fine mesh 6x129x129x600x96: median and
   minimum of ``--reps`` (>= 20; coarse >= 100) calls between CUDA events after 3 warm-up calls, the fewest bytes
   of the call, GB/s and share of the copy ceiling, and max |fast - exact| / max |exact| of its
   outputs: kernels.csv.  Kernels: WENO_x, WENO_w, WENO_phi, scat_gain, scat_loss (the same code in
   both variants), RK (fast: the RK kernel; exact: the array code it replaces -- the loss product,
   G - ., the sum of the three terms, rk3_combine and DENS) and RK_wphi (fast: the fused w + phi +
   RK kernel; exact: WENO_w + WENO_phi + the RK array code), stage 0 (no Phi^0) and stage 1; for
   fast also WENO_phi by the strided kernel (the tile kernel's predecessor);
4. whole steps, exact vs fast (unless ``--no-bench``): ``python -m solver bsp bench --case
   6x65x65x300x48:cupy:1:10:3 --set numerics.bte_kernels=...``: bench_{exact,fast}/steps.csv.
Then the short table (per-step ms: 1 x WENO + scattering per stage, RK = stage 0 + 2 x stage 1;
variant "fused": WENO_x, scattering and RK_wphi, what bte.advance runs with the defaults).

``--cpu``: the same logic on the host, a small mesh, the CUDA sources compiled with g++ behind the
stand-in cupy of tests/conftest.py (timings meaningless; checks that the script and the kernels run).

usage (repository root):  python tools/bsp/bte_device.py --out OUT [--cpu] [--reps 20] [--no-fine] [--no-tests]
                          [--no-bench] [--sweep]
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from solver import io  # noqa: E402
from solver.bsp import bte, kernels, profile, scattering, weno  # noqa: E402
from solver.bsp.model import Model, load  # noqa: E402

COARSE, STANDARD, FINE, SMALL = "6x33x33x150x24", "6x65x65x300x48", "6x129x129x600x96", "3x9x13x16x8"
VARIANTS = ("exact", "fast")


def mesh_overrides(mesh):
    from solver.bsp.analysis import parse_mesh
    return [f"mesh.{k}={v}" for k, v in parse_mesh(mesh).items()]


class Device:
    """The array module, backend and timer of the run: CuPy on the GPU, or NumPy with the CUDA
    sources emulated on the host (--cpu)."""

    def __init__(self, cpu: bool):
        from solver.backend import get_backend
        self.cpu = cpu
        if cpu:
            sys.path.insert(0, str(REPO / "tests"))
            from conftest import _import_with, fake_cupy
            from solver.dispatch import Registry
            emu = _import_with(fake_cupy(Path(tempfile.mkdtemp(prefix="bte_device_"))), ("weno", "rk", "scattering"))
            table = {p: emu.TABLE[p] for p in ("WENO_x", "WENO_w", "WENO_phi", "scat_gain", "scat_loss", "RK",
                                               "RK_wphi")}
            self.weno, self.rk = emu.weno, emu.rk
            kernels.REGISTRY = Registry("bsp", {"numpy": lambda: table})
            self.be = get_backend("numpy")
            self.xp = np
        else:
            from solver.bsp.kernels.cuda import rk as crk, weno as cweno
            self.be = get_backend("cupy")
            self.xp = self.be.xp
            self.weno, self.rk = cweno, crk

    def time(self, fn, reps):
        """(median, min) seconds."""
        if self.cpu:
            return profile.timed(fn, reps, warm=3)
        return profile.timed_cuda(self.xp, fn, reps, warm=3)

    def copy_ceiling(self):
        """Bytes per second of a large device-to-device copy (read + write counted)."""
        xp = self.xp
        n = (2**30 if not self.cpu else 2**26) // 8
        src = xp.ones(n)
        dst = xp.empty_like(src)
        t = self.time(lambda: xp.copyto(dst, src), 10)[0]
        del src, dst
        return 16 * n / t


def fewest_bytes(m, phase, s=1):
    """Fewest bytes of one call (float64: every array read once, every output written once)."""
    NX, NS, NW, NPHI = m.NX, m.N_sbn, m.NW, m.NPHI
    nodes = NX * 3 * NS * NW * NPHI
    hat = NX * 3 * NS * NW
    if phase == "RK_wphi":
        # read Phi, the x term, Phi^0 (s > 0), G, Lc; write Phi^{s+1}, PhiHat, rho
        return 8 * ((3 + (s > 0)) * nodes + 3 * hat + NX * 3 * NS)
    if phase.startswith("RK"):
        # read Phi, three terms, Phi^0 (s > 0), G, Lc; write Phi^{s+1}, PhiHat, rho
        return 8 * ((5 + (s > 0)) * nodes + 3 * hat + NX * 3 * NS)
    return profile.counts(m, profile.n_branches(m))[phase][1]


def calls(dev, m, be, d, terms, G, Lc, Phi0, dt):
    """{name: (fn returning the outputs as a tuple, stage s)} through the reference entry points
    (which dispatch by the model's numerics.bte_kernels)."""
    base = {k: (lambda f=f: (f(),), 0) for k, f in profile.phase_calls(m, be, d).items()}
    fast = kernels.lookup(m, be, "RK")
    fused = kernels.lookup(m, be, "RK_wphi")

    def rk(s):
        if fast is not None:
            return lambda: fast(m, be, s, Phi0, d["Phi"], G, Lc, terms, dt)
        return lambda: bte.rk_update(m, be, s, Phi0, d["Phi"], G, Lc, terms, dt)  # the array code it replaces

    def rk_wphi(s):
        f = fused if fused is not None else bte.stage_update  # exact: WENO_w + WENO_phi + the RK array code
        return lambda: f(m, be, s, Phi0, d["Phi"], G, Lc, terms[0], d["deps"], d["A_eps"], dt)

    base["RK stage 0"] = (rk(0), 0)
    base["RK stage 1"] = (rk(1), 1)
    base["RK_wphi stage 0"] = (rk_wphi(0), 0)
    base["RK_wphi stage 1"] = (rk_wphi(1), 1)
    if fast is not None:
        def strided():
            saved = dev.weno.MAX_TILE
            dev.weno.MAX_TILE = 0  # the strided kernel (fast arithmetic)
            try:
                return (weno.weno_phi(m, be, d["Phi"], d["deps"], d["A_eps"]),)
            finally:
                dev.weno.MAX_TILE = saved
        base["WENO_phi strided"] = (strided, 0)
    return base


def kernel_rows(dev, mesh, reps, ceiling, log):
    xp, be = dev.xp, dev.be
    models = {v: Model(load(None, mesh_overrides(mesh) + ["numerics.kernels=auto", f"numerics.bte_kernels={v}"]))
              for v in VARIANTS}
    m = models["fast"]
    d = profile.stage(m, be)
    d["A"] = d["A_eps"]
    Phi0 = d["Phi"] * 1.01
    dt = 0.5 * m.dt_max(d["A_eps"])
    G = scattering.scat_gain(m, be, d["PhiHat"], d["eps"], d["W"])
    Lc = scattering.scat_loss(m, be, d["eps"], d["W"])
    terms = (weno.weno_x(m, be, d["Phi"], d["rho_eq"][0], d["rho_eq"][-1], d["rho"][0], d["rho"][-1]),
             weno.weno_w(m, be, d["Phi"], d["deps"]), weno.weno_phi(m, be, d["Phi"], d["deps"], d["A_eps"]))
    outs, rows = {}, []
    for v in VARIANTS:
        mv = models[v]
        for name, (fn, s) in calls(dev, mv, be, d, terms, G, Lc, Phi0, dt).items():
            outs[v, name] = fn()
            t, tmin = dev.time(fn, reps)
            phase = name.split(" ")[0]
            b = fewest_bytes(mv, phase, s)
            rows.append({"mesh": mesh, "kernel": name, "variant": v,
                         "implementation": kernels.implementations(mv, be).get(phase, ""),
                         "ms": 1e3 * t, "ms_min": 1e3 * tmin, "reps": reps, "fewest_MB": b / 1e6,
                         "GB_s": b / t / 1e9, "share_of_copy": b / t / ceiling})
            print(f"  {mesh} {name:16s} {v:5s} {1e3 * t:8.3f} ms (min {1e3 * tmin:.3f})  {b / t / 1e9:7.0f} GB/s",
                  file=log, flush=True)
    for r in rows:
        exact = "WENO_phi" if r["kernel"] == "WENO_phi strided" else r["kernel"]
        a, e = outs[r["variant"], r["kernel"]], outs["exact", exact]
        r["max_rel_diff_fast_vs_exact"] = max(profile.rel(xp, x, y) for x, y in zip(a, e))
    for s in ("0", "1"):  # the fused kernel against the separate fast kernels: bit for bit
        a, e = outs["fast", f"RK_wphi stage {s}"], outs["fast", f"RK stage {s}"]
        same = all(bool(xp.array_equal(x, y)) for x, y in zip(a, e))
        print(f"  {mesh} RK_wphi stage {s} == WENO_w + WENO_phi + RK (fast) bitwise: {same}", file=log, flush=True)
        for r in rows:
            if r["variant"] == "fast" and r["kernel"] == f"RK_wphi stage {s}":
                r["bitwise_equal_to_separate_fast"] = same
    del outs, terms, d
    return rows


def sweep_rows(dev, mesh, reps, log):
    """Launch shapes of the fast path on one mesh (median / min ms of ``reps`` calls): the fused
    kernel (stage 1) with (threads per block, shared memory budget -> energy rows per block, NVRTC
    register cap) and WENO_x with a register cap; registers and local (spill) bytes per thread as
    the compiled kernel reports them."""
    crk, cw, be = dev.rk, dev.weno, dev.be
    m = Model(load(None, mesh_overrides(mesh) + ["numerics.kernels=auto", "numerics.bte_kernels=fast"]))
    d = profile.stage(m, be)
    Phi0 = d["Phi"] * 1.01
    dt = 0.5 * m.dt_max(d["A_eps"])
    G = scattering.scat_gain(m, be, d["PhiHat"], d["eps"], d["W"])
    Lc = scattering.scat_loss(m, be, d["eps"], d["W"])
    tx = weno.weno_x(m, be, d["Phi"], d["rho_eq"][0], d["rho_eq"][-1], d["rho"][0], d["rho"][-1])
    rows = []
    saved = crk.BLOCK, crk.SHARED, cw.OPTIONS

    def regs(source, kernel, defines):
        try:
            fn = crk._build.function(source, kernel, cw.OPTIONS, defines)
            return fn.num_regs, fn.local_size_bytes
        except AttributeError:  # the host build of --cpu
            return None, None

    try:
        for block, shared, cap in ((256, 32, None), (256, 48, None), (256, 32, 64), (256, 32, 72), (256, 32, 80),
                                   (256, 32, 96), (512, 32, 64), (128, 16, 64)):
            crk.BLOCK, crk.SHARED = block, shared * 1024
            cw.OPTIONS = saved[2] + ((f"--maxrregcount={cap}",) if cap else ())
            t, tmin = dev.time(lambda: crk.stage_update(m, be, 1, Phi0, d["Phi"], G, Lc, tx, d["deps"], d["A_eps"],
                                                        dt), reps)
            nrows = crk.rows_per_block(m.NW, m.NPHI)
            r, local = regs(cw.SOURCE, "bsp_wphi_rk", {"BSP_WENO_FAST": 1, "NPHI_": m.NPHI, "LROWS": nrows})
            rows.append({"mesh": mesh, "kernel": "RK_wphi stage 1", "block": block, "shared_KB": shared,
                         "rows": nrows, "maxrregcount": cap, "regs": r, "local_B": local, "ms": 1e3 * t,
                         "ms_min": 1e3 * tmin})
        crk.BLOCK, crk.SHARED = saved[0], saved[1]
        for cap in (None, 64, 80):
            cw.OPTIONS = saved[2] + ((f"--maxrregcount={cap}",) if cap else ())
            t, tmin = dev.time(lambda: weno.weno_x(m, be, d["Phi"], d["rho_eq"][0], d["rho_eq"][-1], d["rho"][0],
                                                   d["rho"][-1]), reps)
            r, local = regs(cw.SOURCE, "bsp_weno_dx", {"BSP_WENO_FAST": 1})
            rows.append({"mesh": mesh, "kernel": "WENO_x", "block": cw.BLOCK, "maxrregcount": cap, "regs": r,
                         "local_B": local, "ms": 1e3 * t, "ms_min": 1e3 * tmin})
    finally:
        crk.BLOCK, crk.SHARED, cw.OPTIONS = saved
    for r in rows:
        print(f"  sweep {r}", file=log, flush=True)
    return rows


def bench(variant, mesh, out, cpu, log):
    backend = "numpy" if cpu else "cupy"
    steps, warm = (2, 1) if cpu else (10, 3)
    cmd = [sys.executable, "-m", "solver", "bsp", "bench", "--case", f"{mesh}:{backend}:1:{steps}:{warm}",
           "--set", f"numerics.bte_kernels={variant}", "--timeout", "150", "--out", str(out / f"bench_{variant}")]
    print("  " + " ".join(cmd[1:]), file=log, flush=True)
    r = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True)
    (out / f"bench_{variant}.log").write_text(r.stdout + r.stderr)
    f = out / f"bench_{variant}" / "steps.csv"
    return pd.read_csv(f).assign(variant=variant) if f.exists() else None


def per_step(df):
    """ms per step of each kernel: WENO and scattering once per stage, RK = stage 0 + 2 x stage 1;
    variant fused (from the fast rows): WENO_x, scattering and RK_wphi."""
    rows = []
    for (mesh, v), g in df.groupby(["mesh", "variant"], sort=False):
        ms = dict(zip(g["kernel"], g["ms"]))
        diff = dict(zip(g["kernel"], g["max_rel_diff_fast_vs_exact"]))
        share = dict(zip(g["kernel"], g["share_of_copy"]))

        def add(variant, kernels_, rk):
            for k in kernels_:
                rows.append({"mesh": mesh, "variant": variant, "kernel": k, "ms_per_step": 3 * ms[k],
                             "share_of_copy": share[k], "max_rel_diff": diff[k]})
            rows.append({"mesh": mesh, "variant": variant, "kernel": f"{rk} (+DENS)",
                         "ms_per_step": ms[f"{rk} stage 0"] + 2 * ms[f"{rk} stage 1"],
                         "share_of_copy": share[f"{rk} stage 1"],
                         "max_rel_diff": max(diff[f"{rk} stage 0"], diff[f"{rk} stage 1"])})
            n = len(kernels_) + 1
            rows.append({"mesh": mesh, "variant": variant, "kernel": "sum",
                         "ms_per_step": sum(r["ms_per_step"] for r in rows[-n:]), "share_of_copy": None,
                         "max_rel_diff": None})

        add(v, ("WENO_x", "WENO_w", "WENO_phi", "scat_gain", "scat_loss"), "RK")
        if v == "fast":
            add("fused", ("WENO_x", "scat_gain", "scat_loss"), "RK_wphi")
    return pd.DataFrame(rows)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--cpu", action="store_true", help="host rehearsal: small mesh, CUDA sources emulated with g++")
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--no-fine", action="store_true", help="skip the fine mesh 6x129x129x600x96")
    ap.add_argument("--no-tests", action="store_true", help="skip the gpu tests")
    ap.add_argument("--no-bench", action="store_true", help="skip the whole-step bench, exact vs fast")
    ap.add_argument("--sweep", action="store_true", help="also time launch shapes (sweep.csv; standard and fine mesh)")
    a = ap.parse_args(argv)
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    log = sys.stderr
    t0 = time.perf_counter()
    if not a.cpu and not a.no_tests:
        print("== gpu tests of the BTE fast paths", file=log, flush=True)
        tests = ["tests/test_bsp_kernels_cuda_weno.py", "tests/test_bsp_kernels_cuda_rk.py",
                 "tests/test_bsp_kernels.py::test_gpu_run_bitwise_reproducible_and_close_to_numpy",
                 "tests/test_bsp_kernels.py::test_gpu_run_auto_vs_array",
                 "tests/test_bsp_kernels.py::test_cuda_table_is_the_block_versions",
                 "tests/test_bsp_bte.py::test_overlap_of_x_term_with_iter_changes_nothing"]
        r = subprocess.run(["timeout", "150", sys.executable, "-m", "pytest", "-m", "gpu", "-q", "-rs", *tests],
                           cwd=REPO, capture_output=True, text=True)
        (out / "pytest_gpu.log").write_text(r.stdout + r.stderr)
        print("\n".join((r.stdout + r.stderr).strip().splitlines()[-3:]), file=log, flush=True)
    dev = Device(a.cpu)
    ceiling = dev.copy_ceiling()
    io.write_csv(pd.DataFrame([{"ceiling": "device copy (copyto, 1 GiB, median of 10)" if not a.cpu else "host copy",
                                "GB_s": ceiling / 1e9}]), out / "ceiling.csv")
    print(f"== copy ceiling {ceiling / 1e9:.0f} GB/s ({time.perf_counter() - t0:.0f} s)", file=log, flush=True)
    meshes = [SMALL] if a.cpu else [COARSE, STANDARD] + ([] if a.no_fine else [FINE])
    rows = []
    for mesh in meshes:
        print(f"== kernels, {mesh} ({time.perf_counter() - t0:.0f} s)", file=log, flush=True)
        reps = 3 if a.cpu else (max(a.reps, 100) if mesh == COARSE else max(a.reps, 20))  # coarse: launch noise
        rows += kernel_rows(dev, mesh, reps, ceiling, log)
        io.write_csv(pd.DataFrame(rows), out / "kernels.csv", float_format="%.6g")
        if not a.cpu:
            dev.xp.get_default_memory_pool().free_all_blocks()
    if a.sweep:
        print(f"== launch shapes ({time.perf_counter() - t0:.0f} s)", file=log, flush=True)
        sw = []
        for mesh in ([SMALL] if a.cpu else [STANDARD] + ([] if a.no_fine else [FINE])):
            sw += sweep_rows(dev, mesh, 3 if a.cpu else max(a.reps, 20), log)
        io.write_csv(pd.DataFrame(sw), out / "sweep.csv", float_format="%.6g")
    df = pd.DataFrame(rows)
    steps = per_step(df)
    io.write_csv(steps, out / "kernels_per_step.csv", float_format="%.6g")
    print(f"== whole steps, exact vs fast ({time.perf_counter() - t0:.0f} s)", file=log, flush=True)
    benches = [] if a.no_bench else [b for b in (bench(v, SMALL if a.cpu else STANDARD, out, a.cpu, log)
                                             for v in VARIANTS) if b is not None]
    if benches:
        io.write_csv(pd.concat(benches), out / "bench_steps.csv", float_format="%.6g")
    io.write_json(out / "run.json", {"argv": sys.argv, "seconds": time.perf_counter() - t0,
                                     "ceiling_GB_s": ceiling / 1e9, "device": dev.be.device_info()})
    print(f"\n== done in {time.perf_counter() - t0:.0f} s; ms per step (3 stages), "
          f"copy ceiling {ceiling / 1e9:.0f} GB/s")
    wide = steps.pivot_table(index=["mesh", "kernel"], columns="variant", values="ms_per_step", sort=False)
    for v in ("fast", "fused"):
        wide[f"share_{v}"] = steps[steps.variant == v].set_index(["mesh", "kernel"])["share_of_copy"]
        wide[f"rel_diff_{v}"] = steps[steps.variant == v].set_index(["mesh", "kernel"])["max_rel_diff"]
    print(wide.to_string(float_format=lambda v: f"{v:.3g}"))
    if benches:
        cols = ["variant", "mesh", "step_ms", "bte_ms", "dens_ms", "iter_ms", "newton_per_step"]
        print(pd.concat(benches)[cols].to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    print(json.dumps({"out": str(out)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
