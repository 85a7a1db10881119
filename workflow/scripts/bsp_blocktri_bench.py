"""Per-call times of the Newton-step pieces on the GPU: the Frechet kernel (array code vs the
one-launch kernel) and the linear system (cuda_iter's dense getrf vs cuda_blocktri's block Thomas),
on the Fermi-Dirac INITCOND state of a mesh.  usage: python3 workflow/scripts/bsp_blocktri_bench.py
CONFIG [CONFIG ...] --csv OUT.csv   (wall time per call incl. Python, synchronised, median of 5 x reps)"""
import argparse
import csv
import time

import cupy as cp
import numpy as np

from solver.backend import get_backend
from solver.bsp import poisson
from solver.bsp.kernels import cuda_blocktri, cuda_iter
from solver.bsp.model import Model, load


def timed(fn, reps):
    fn()
    cp.cuda.Device().synchronize()
    out = []
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(reps):
            fn()
        cp.cuda.Device().synchronize()
        out.append((time.perf_counter() - t0) / reps)
    return float(np.median(out))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("configs", nargs="+")
    ap.add_argument("--csv", required=True)
    a = ap.parse_args()
    be = get_backend("cupy")
    rows = []
    for path in a.configs:
        m = Model(load(path, ["numerics.kernels=auto"]))
        ma = Model(load(path, ["numerics.kernels=array"]))
        ic = poisson.initcond(m, be)
        drho = poisson.fermi_dirac_drho(m, cp, ic.eps)
        sysm = poisson.NewtonSystem(m, "neumann")
        bflat = sysm.boundary_values(m).ravel()
        F = poisson.frechet(m, be, ic.eps, ic.chi, ic.rho, drho)
        Fa = poisson.frechet(ma, be, ic.eps, ic.chi, ic.rho, drho)
        errF = float(cp.abs(F - Fa).max() / cp.abs(Fa).max())
        rhs = cp.asarray(np.random.default_rng(0).standard_normal((m.NX - 2, m.NZ - 2)))
        Ab, bb = cuda_blocktri.construct_linsys(m, be, sysm, F, rhs, bflat)
        xb = cuda_blocktri.solve_linsys(m, be, sysm, Ab, bb)
        Ad, bd = cuda_iter.construct_linsys(m, be, sysm, F, rhs, bflat)
        xd = cuda_iter.solve_linsys(m, be, sysm, Ad, bd)
        errx = float(cp.abs(xb - xd).max() / cp.abs(xd).max())
        reps = 20 if m.NZ <= 33 else 5
        t = {
            "frechet_array": timed(lambda: poisson.frechet(ma, be, ic.eps, ic.chi, ic.rho, drho), reps),
            "frechet_kernel": timed(lambda: cuda_blocktri.frechet(m, be, ic.eps, ic.chi, ic.rho, drho), reps),
            "construct_dense": timed(lambda: cuda_iter.construct_linsys(m, be, sysm, F, rhs, bflat), reps),
            "construct_block": timed(lambda: cuda_blocktri.construct_linsys(m, be, sysm, F, rhs, bflat), reps),
            "solve_dense_getrf": timed(lambda: cuda_iter.solve_linsys(m, be, sysm, Ad, bd), reps),
            "solve_block_thomas": timed(lambda: cuda_blocktri.solve_linsys_thomas(m, be, sysm, Ab, bb), reps),
        }
        for nw in (4, 8, 16, 32):
            if nw <= m.NZ:
                t[f"solve_cr_w{nw}"] = timed(lambda: cuda_blocktri.solve_linsys_cr(m, be, sysm, Ab, bb, nwarps=nw), reps)
        t["solve_default"] = timed(lambda: cuda_blocktri.solve_linsys(m, be, sysm, Ab, bb), reps)
        V0, N0 = ic.V, ic.N
        t["newton_rhs_array"] = timed(lambda: -m.cp * (N0[1:-1, 1:-1] - 0.5 * N0[1:-1, 1:-1])
                                      + sysm.cp_dz * cp.einsum("ijk,ik->ij", F, V0[1:-1, 1:-1]), reps)
        t["newton_rhs_kernel"] = timed(lambda: cuda_blocktri.newton_rhs(m, be, sysm, F, V0, N0, 0.5 * N0), reps)
        t["norms_array_plus_isfinite"] = timed(lambda: (bool(cp.all(cp.isfinite(xb))),
                                                        poisson._norms(cp, m, V0 * 1.01, V0, N0 * 1.01, N0)), reps)
        t["norms_kernel"] = timed(lambda: cuda_blocktri.newton_norms(m, be, V0 * 1.01, V0, N0 * 1.01, N0, xb), reps)
        xr = cuda_blocktri.solve_linsys_cr(m, be, sysm, Ab, bb)
        errcr = float(cp.abs(xr - xd).max() / cp.abs(xd).max())
        print(f"{path}: |x_cr - x_dense|/|x| = {errcr:.2e}")
        rows.append({"config": path, "NX": m.NX, "NZ": m.NZ, "item": "relerr_x_cr_vs_dense", "seconds_per_call": errcr})
        best = min((k for k in t if k.startswith("solve_cr_w")), key=t.get)
        rows.append({"config": path, "NX": m.NX, "NZ": m.NZ, "item": "best_cr_nwarps",
                     "seconds_per_call": int(best[len("solve_cr_w"):])})
        for k, v in t.items():
            rows.append({"config": path, "NX": m.NX, "NZ": m.NZ, "item": k, "seconds_per_call": v})
            print(f"{path} NX={m.NX} NZ={m.NZ} {k:20s} {v * 1e3:9.3f} ms")
        print(f"{path}: |F_kernel - F_array|/|F| = {errF:.2e}, |x_block - x_dense|/|x| = {errx:.2e}")
        rows.append({"config": path, "NX": m.NX, "NZ": m.NZ, "item": "relerr_F", "seconds_per_call": errF})
        rows.append({"config": path, "NX": m.NX, "NZ": m.NZ, "item": "relerr_x_block_vs_dense", "seconds_per_call": errx})
    best = [r for r in rows if r["item"] == "best_cr_nwarps"]
    if best:
        print(f"BEST_CR_NWARPS {best[0]['seconds_per_call']}")
    with open(a.csv, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)


if __name__ == "__main__":
    main()
