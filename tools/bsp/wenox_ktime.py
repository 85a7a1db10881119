"""Device timing of the x kernel (phase WENO_x, one RK stage) on a synthetic stage of one mesh: numerics.bte_kernels
fast vs fast2 (bsp_weno_dx; docs/performance-bte-kernels.md §13; the A/B build fast2up of §13.4, the upwards walk,
became fast2's only form), or with ``--pair walk-tile`` fast2's walk (bsp_weno_dx) vs the tile kernel
(numerics.wenox_kernel tile: bsp_weno_dx_tile, §19).  Phi as in bte_s12_ktime.py (the start-up
shape s_w M times 0.5 + U(0, 1)), open contacts with the reference rule, rho = rho_eq (0.9 + 0.2 U).  The variants
are timed in alternating rounds of ``reps`` launches each; per round the launches are queued back to back behind
3 untimed ones (so the host's launch overhead is hidden) with a CUDA event before each and one after the last:
the time of launch i = elapsed(event i, event i + 1).
Prints CSV lines: mesh,variant,median_us,min_us,p10_us,p90_us,n,hash,repeat_equal,rel_vs_fast,rel_vs_array,eq_fast2
(hash: the sum of the output's 64-bit words mod 2^64, hex, on the device; repeat_equal: the output after the
timed launches equals the first one's; rel_vs_fast: max |x - x_first| / max |x_first| against the pair's first
variant (fast, or walk); rel_vs_array: the same against weno.weno_x's array code on the same GPU (numerics.kernels
array), i.e. the reference's operations; standard mesh only; eq_fast2: the values equal the pair's second variant's
(fast2, or tile), np.array_equal: -0 == +0; walk-tile: True on both rows = the same bits).
argv: mesh reps rounds [--pair fast-fast2 | walk-tile]   (python tools/bsp/wenox_ktime.py --help: this text)"""
import math
import sys

if __name__ == "__main__" and (len(sys.argv) < 4 or "--help" in sys.argv or "-h" in sys.argv):
    print(__doc__)  # before cupy's import: readable on a machine without a GPU
    sys.exit(0)

import cupy as cp  # noqa: E402
import numpy as np  # noqa: E402

from solver.backend import get_backend  # noqa: E402
from solver.bsp import weno  # noqa: E402
from solver.bsp.kernels.cuda import weno as cw  # noqa: E402
from solver.bsp.model import Model, load  # noqa: E402

mesh, reps, rounds = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
PAIR = sys.argv[sys.argv.index("--pair") + 1] if "--pair" in sys.argv else "fast-fast2"
VARIANTS = tuple(PAIR.split("-"))
assert VARIANTS in (("fast", "fast2"), ("walk", "tile")), PAIR
CONFIG = {"fast": ["numerics.bte_kernels=fast"], "fast2": ["numerics.bte_kernels=fast2", "numerics.wenox_kernel=walk"],
          "walk": ["numerics.bte_kernels=fast2", "numerics.wenox_kernel=walk"],
          "tile": ["numerics.bte_kernels=fast2", "numerics.wenox_kernel=tile"]}
ns, nx, nz, nw, nphi = (int(v) for v in mesh.split("x"))
base = [f"mesh.N_sbn={ns}", f"mesh.NX={nx}", f"mesh.NZ={nz}", f"mesh.NW={nw}", f"mesh.NPHI={nphi}",
        "numerics.backend=cupy"]
models = {v: Model(load(None, base + CONFIG[v])) for v in VARIANTS}
m = models[VARIANTS[0]]
be = get_backend("cupy")
cp.random.seed(1)
prof = cp.asarray((m.s_w * m.maxwellian)[None, :, None, :, None])
Phi = prof * (0.5 + cp.random.random(m.shape))
rho_eq = cp.asarray(1.0 + np.random.default_rng(2).random((2, 3, ns)))
rho = rho_eq * (0.9 + 0.2 * cp.random.random(rho_eq.shape))
r = (rho_eq[0], rho_eq[1], rho[0], rho[1])
out = {v: cp.empty_like(Phi) for v in VARIANTS}
for v in VARIANTS:
    name, defs = cw.x_kernel(models[v], weno._eps(models[v]), nx)
    assert ("BSP_WENO_FAST2" in defs) == (v != "fast"), (v, defs)
    assert name == ("bsp_weno_dx_tile" if v == "tile" else "bsp_weno_dx"), (v, name)
    print(f"# {v}: {name} {defs}", file=sys.stderr)



def launch(v):
    cw.x_into(models[v], be, Phi, r, out[v])


def words(a):
    return hex(int(a.view(cp.uint64).sum(dtype=cp.uint64)))


first = {}
for v in VARIANTS:
    for _ in range(3):
        launch(v)
    cp.cuda.Device().synchronize()
    first[v] = out[v].copy()
ts = {v: [] for v in VARIANTS}
for _ in range(rounds):
    for v in VARIANTS:
        for _ in range(3):
            launch(v)
        ev = [cp.cuda.Event() for _ in range(reps + 1)]
        for i in range(reps):
            ev[i].record()
            launch(v)
        ev[reps].record()
        ev[reps].synchronize()
        ts[v] += [cp.cuda.get_elapsed_time(ev[i], ev[i + 1]) * 1e3 for i in range(reps)]
ref_arr = None
if Phi.size <= 1 << 25:  # standard mesh; the fine mesh's array code would hold tens of GB of temporaries
    ref_arr = weno.weno_x(Model(load(None, base + ["numerics.kernels=array"])), be, Phi, *r)
ref = out[VARIANTS[0]]
for v in VARIANTS:
    t = np.asarray(ts[v])
    same = bool(cp.array_equal(out[v], first[v]))
    rf = float(cp.abs(out[v] - ref).max() / cp.abs(ref).max())
    ra = "-" if ref_arr is None else f"{float(cp.abs(out[v] - ref_arr).max() / cp.abs(ref_arr).max()):.3e}"
    assert math.isfinite(rf)
    print(f"{mesh},{v},{np.median(t):.2f},{t.min():.2f},{np.percentile(t, 10):.2f},{np.percentile(t, 90):.2f},"
          f"{t.size},{words(out[v])},{same},{rf:.3e},{ra},{bool(cp.array_equal(out[v], out[VARIANTS[1]]))}", flush=True)
