"""Device timing of bsp_rho, bsp_scat_gain and bsp_scat_loss of a7e270b (old: the text kept in
tools/bsp/old_kernels/, built and launched as a7e270b's launchers did) against this tree's (new: through
rk._rho, scattering.gain_into / loss_into) on a synthetic stage of one mesh (docs/performance-bte-kernels.md
§14).  Old and new launches alternate, CUDA events around each launch; mode ``flushed``: a 256 MB memset
before each launch (outside the events: L2 cold, as ncu's cache flush), ``warm``: back to back.
Before timing: new == old bit for bit on the device (rho, G, Lc), and new within 1e-12 of the NumPy reference
(standard mesh only: NumPy's scat_gain / scat_loss on the host; rho against an fsum-exact sum).
Prints CSV lines: mesh,kernel,mode,variant,median_us,p10_us,p90_us,min_us,n,bitwise_old,rel_numpy.
argv: mesh reps (e.g. 6x65x65x300x48 100; reps 0: each kernel once, no timing (for ncu))"""
import math
import pathlib
import sys

import cupy as cp
import numpy as np

from solver.backend import get_backend
from solver.bsp import scattering
from solver.bsp.kernels.cuda import rk
from solver.bsp.kernels.cuda import scattering as cs
from solver.bsp.model import Model, load

OLD = pathlib.Path(__file__).resolve().parent / "old_kernels"
mesh, reps = sys.argv[1], int(sys.argv[2])
ns, nx, nz, nw, nphi = (int(v) for v in mesh.split("x"))
m = Model(load(None, [f"mesh.N_sbn={ns}", f"mesh.NX={nx}", f"mesh.NZ={nz}", f"mesh.NW={nw}", f"mesh.NPHI={nphi}",
                      "numerics.backend=cupy"]))
be = get_backend("cupy")
NP = get_backend("numpy")
x = m.x[:, None, None]
eps_h = 1.5 * np.arange(ns)[None, None, :] ** 2 + np.array([0.0, 0.0, -1.0])[None, :, None] + 2.0 * np.sin(math.pi * x)
chi = np.zeros((nx, 3, ns, nz))
for p in range(ns):
    chi[:, :, p, :] = np.sin((p + 1) * math.pi * m.z)
chi /= np.sqrt(m.dz * (chi**2).sum(-1, keepdims=True))
W_h = scattering.overlap(m, NP, chi)
rng = np.random.default_rng(1)
PH_h = (m.s_w * m.maxwellian)[None, :, None, :] * (0.5 + rng.random((nx, 3, ns, nw)))
PH, eps, W = cp.asarray(PH_h), cp.asarray(eps_h), cp.asarray(W_h)
nrow = nx * 3 * ns
lines = max(1, rk.TILE // nphi)
rho_mod = cp.RawModule(code=(OLD / "rk_a7e270b.cu").read_text(),
                       options=("--fmad=false", f"-DNPHI_={nphi}", f"-DLINES={lines}"))
out = {k: {v: cp.empty(s) for v in ("old", "new")} for k, s in
       (("rho", (nx, 3, ns)), ("gain", PH.shape), ("loss", PH.shape))}
tables = {w: cs._branch_table(m, None, w) for w in ("gain", "loss")}
s_w = cp.asarray(m.s_w, dtype=cp.float64)
w_d = cp.asarray(m.w, dtype=cp.float64)
nchunk = -(-nw // 64)
scat_mods = {}


def scat_old(kind):
    off, nu2, sig, wt, nb = tables[kind]
    key = nb * ns
    if key not in scat_mods:
        scat_mods[key] = cp.RawModule(code=(OLD / "scattering_a7e270b.cu").read_text(),
                                      options=("--fmad=false", f"-DMAXE={max(1, nb * ns)}", f"-DNS_={ns}"))
    mod = scat_mods[key]
    if kind == "gain":
        args = (PH, eps, W, s_w, off, nu2, sig, wt, out["gain"]["old"], np.int32(nw), np.int32(nchunk),
                np.float64(1.0 / m.dw))
    else:
        args = (eps, W, w_d, off, nu2, sig, wt, out["loss"]["old"], np.int32(nw), np.int32(nchunk),
                np.float64(2.0 * m.alpha))
    mod.get_function(f"bsp_scat_{kind}")((nrow * nchunk,), (64,), args)


LAUNCH = {
    ("rho", "old"): lambda: rho_mod.get_function("bsp_rho")((-(-nrow // 128),), (128,), (
        PH, out["rho"]["old"], np.int32(nrow), np.int32(nw), np.float64(m.dw))),
    ("rho", "new"): lambda: rk._rho(m, PH, out["rho"]["new"], nphi, lines),
    ("gain", "old"): lambda: scat_old("gain"),
    ("gain", "new"): lambda: cs.gain_into(m, be, PH, eps, W, None, out["gain"]["new"]),
    ("loss", "old"): lambda: scat_old("loss"),
    ("loss", "new"): lambda: cs.loss_into(m, be, eps, W, None, out["loss"]["new"]),
}
for f in LAUNCH.values():
    f()
cp.cuda.Device().synchronize()
check = {}
for k in ("rho", "gain", "loss"):
    a, b = cp.asnumpy(out[k]["new"]), cp.asnumpy(out[k]["old"])
    rel = "-"
    if nx <= 65 and reps > 0:
        if k == "rho":
            ref = np.array([math.fsum(r) for r in PH_h.reshape(-1, nw)]).reshape(a.shape) * m.dw
        elif k == "gain":
            ref = scattering.scat_gain(m, NP, PH_h, eps_h, W_h)
        else:
            ref = scattering.scat_loss(m, NP, eps_h, W_h)
        rel = f"{np.abs(a - ref).max() / np.abs(ref).max():.2e}"
    check[k] = (bool(np.array_equal(a, b)), rel)
flush = cp.empty(256 * 1024 * 1024 // 8)
ev = [cp.cuda.Event() for _ in range(2)]
for mode in ("flushed", "warm") if reps > 0 else ():
    t = {key: [] for key in LAUNCH}
    for r in range(reps + 3):
        for key, f in LAUNCH.items():
            if mode == "flushed":
                flush.fill(r)
            ev[0].record()
            f()
            ev[1].record()
            ev[1].synchronize()
            if r >= 3:
                t[key].append(cp.cuda.get_elapsed_time(ev[0], ev[1]) * 1e3)
    for (k, v), ts in t.items():
        a = np.array(ts)
        print(f"{mesh},{k},{mode},{v},{np.median(a):.2f},{np.percentile(a, 10):.2f},{np.percentile(a, 90):.2f},"
              f"{a.min():.2f},{len(a)},{check[k][0]},{check[k][1]}", flush=True)
# the outputs after the timing equal the first ones (run-to-run repeatable)
for k in ("rho", "gain", "loss"):
    a = cp.asnumpy(out[k]["new"])
    LAUNCH[(k, "new")]()
    assert np.array_equal(a, cp.asnumpy(out[k]["new"])), k
