"""Device tool of docs/performance-bte-kernels.md §15 (bsp_overlap staged), two subcommands:

  ktime MESH REPS   MESH = N_sbnxNXxNZ (e.g. 6x65x65).  bsp_overlap of a7e270b (old: the text kept in
                    tools/bsp/old_kernels/scattering_a7e270b.cu, built and launched as a7e270b's scattering.py did)
                    against this tree's (new: scattering.overlap's launcher) on normalised sine rows of chi with
                    random amplitudes.  First new == old bit for bit on the device and new vs NumPy (elementwise
                    relative); then REPS (+3 discarded) rounds, old and new interleaved (the order alternating per
                    round), CUDA events around each launch.  Mode ``flushed``: a 256 MB memset before each launch
                    (L2 cold, as ncu's cache flush; it also keeps the GPU busy while the host submits), ``warm``:
                    a ~40 us spin kernel before each launch instead (the events time the kernel, not the host's
                    launch).  Prints CSV lines: mesh,mode,variant,median_us,p10_us,p90_us,min_us,n,bitwise_old,rel_numpy.
                    REPS 0: each kernel once, no timing (for ncu).
  run old|new ARGS  ``python -m solver`` ARGS with the phase ``overlap`` of the cupy table set to the old
                    kernel's launcher (old) or to this tree's (new; wrapped the same way), so that two runs of one
                    tree differ only in the W kernel; prints the number of overlap calls on stderr at exit.
"""
import atexit
import math
import pathlib
import sys

import cupy as cp
import numpy as np

OLD = pathlib.Path(__file__).resolve().parent / "old_kernels" / "scattering_a7e270b.cu"
_old_mod = None


def old_overlap(model, backend, chi):
    """a7e270b's scattering.overlap launcher (one thread per (i, a, b), blocks of 128, --fmad=false, no defines)."""
    global _old_mod
    from solver.bsp.kernels import f64
    if _old_mod is None:
        _old_mod = cp.RawModule(code=OLD.read_text(), options=("--fmad=false",))
    c = f64(cp, chi)
    NX, NV, NS, NZ = c.shape
    W = cp.empty((NX, NV, NS, NV, NS), dtype=cp.float64)
    n = W.size
    _old_mod.get_function("bsp_overlap")((-(-n // 128),), (128,), (c, W, np.int32(NX), np.int32(NV * NS),
                                                                   np.int32(NZ), np.float64(model.dz)))
    return W.astype(chi.dtype, copy=False)


SPIN = r"""extern "C" __global__ void spin(long long cycles)
{ long long t0 = clock64(); while (clock64() - t0 < cycles) { } }"""


def ktime(mesh, reps):
    from solver.backend import get_backend
    from solver.bsp import scattering
    from solver.bsp.kernels.cuda import scattering as cs
    from solver.bsp.model import Model, load

    ns, nx, nz = (int(v) for v in mesh.split("x"))
    m = Model(load(None, [f"mesh.N_sbn={ns}", f"mesh.NX={nx}", f"mesh.NZ={nz}", "numerics.backend=cupy"]))
    be, NP = get_backend("cupy"), get_backend("numpy")
    rng = np.random.default_rng(1)
    chi_h = np.zeros((nx, 3, ns, nz))
    for p in range(ns):
        chi_h[:, :, p, :] = np.sin((p + 1) * math.pi * m.z)
    chi_h *= 1.0 + 0.3 * rng.random((nx, 3, ns, 1)) + 0.01 * rng.standard_normal((nx, 3, ns, nz))
    chi_h /= np.sqrt(m.dz * (chi_h**2).sum(-1, keepdims=True))
    chi = cp.asarray(chi_h)
    launch = {"old": lambda: old_overlap(m, be, chi), "new": lambda: cs.overlap(m, be, chi)}
    w_new, w_old = launch["new"](), launch["old"]()
    bit = bool(cp.array_equal(w_new, w_old))
    ref = scattering.overlap(m, NP, chi_h)
    rel = float(np.max(np.abs(cp.asnumpy(w_new) - ref) / np.abs(ref)))
    if reps <= 0:
        cp.cuda.Device().synchronize()
        return
    spin = cp.RawKernel(SPIN, "spin")
    cycles = np.int64(80_000)  # ~40 us at 1.98 GHz (the H200's peak SM clock), longer at lower clocks
    flush = cp.empty(256 * 1024 * 1024 // 8)
    ev = [cp.cuda.Event(), cp.cuda.Event()]
    for mode in ("flushed", "warm"):
        t = {"old": [], "new": []}
        for r in range(reps + 3):
            for v in (("old", "new") if r % 2 == 0 else ("new", "old")):
                if mode == "flushed":
                    flush.fill(r)
                else:
                    spin((1,), (1,), (cycles,))
                ev[0].record()
                launch[v]()
                ev[1].record()
                ev[1].synchronize()
                if r >= 3:
                    t[v].append(cp.cuda.get_elapsed_time(ev[0], ev[1]) * 1e3)
        for v in ("old", "new"):
            a = np.array(t[v])
            print(f"{mesh},{mode},{v},{np.median(a):.2f},{np.percentile(a, 10):.2f},{np.percentile(a, 90):.2f},"
                  f"{a.min():.2f},{len(a)},{bit},{rel:.2e}", flush=True)
    assert cp.array_equal(launch["new"](), w_new), "new W not repeatable"


def run(variant, args):
    from solver.bsp import kernels
    from solver.bsp.kernels.cuda import scattering as cs
    from solver.cli import main

    impl = old_overlap if variant == "old" else cs.overlap
    calls = [0]

    def overlap(model, backend, chi):
        calls[0] += 1
        return impl(model, backend, chi)

    kernels.REGISTRY.table("cupy")["overlap"] = overlap
    atexit.register(lambda: print(f"overlap_s15 run {variant}: {calls[0]} overlap calls", file=sys.stderr))
    return main(args)


if __name__ == "__main__":
    if sys.argv[1] == "ktime":
        ktime(sys.argv[2], int(sys.argv[3]))
    elif sys.argv[1] == "run" and sys.argv[2] in ("old", "new"):
        sys.exit(run(sys.argv[2], sys.argv[3:]))
    else:
        sys.exit(__doc__)
