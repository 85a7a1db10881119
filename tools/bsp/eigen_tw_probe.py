"""numerics.eigen = twisted against newton on the device (docs/performance-iter-eigen.md): per mesh a
counting run (solver.bsp.profile.counting_run: start-up + STEPS steps, the arguments of the last
launched eigen call kept: a real ITER potential and its warm-start levels), then the kernels
eigenvalues_nr + ipim_a (newton) and eigenvalues_tw + ipim_t (twisted) on them: device time per call
(profile.SpinTimer, median of REPS), Sturm evaluations, the differences, bitwise repeat.

  python tools/bsp/eigen_tw_probe.py --out DIR            (writes DIR/eigen_tw_probe.csv, DIR/args_NZ.npz)
  python tools/bsp/eigen_tw_probe.py --load DIR --reps 2  (the saved arguments only: for ncu)
"""
from __future__ import annotations

import argparse
import csv
import os
import sys

import numpy as np


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=None)
    ap.add_argument("--load", default=None)
    ap.add_argument("--nz", default="65,129")
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--reps", type=int, default=100)
    ap.add_argument("--newton-steps", type=int, default=0, help="also: per-step Newton counts, newton vs twisted")
    a = ap.parse_args()
    from solver.backend import get_backend
    from solver.bsp.kernels.cuda import eigen as eig

    be = get_backend("cupy")
    rows = []
    for NZ in map(int, a.nz.split(",")):
        try:
            rows.append(probe(a, be, eig, NZ))
        except Exception as exc:  # noqa: BLE001 - report and go on with the next mesh
            print(f"NZ={NZ}: probe failed: {exc!r}", flush=True)
    if a.newton_steps and not a.load:
        for NZ in map(int, a.nz.split(",")):
            try:
                newton_counts(be, NZ, a.newton_steps, a.out)
            except Exception as exc:  # noqa: BLE001
                print(f"NZ={NZ}: newton counts failed: {exc!r}", flush=True)
    if a.out and rows:
        with open(os.path.join(a.out, "eigen_tw_probe.csv"), "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(rows[0]))
            w.writeheader()
            w.writerows(rows)
    return 0


def probe(a, be, eig, NZ):
    """The kernels on the last launched eigen call's arguments of the mesh 6x65xNZx300x48: one row."""
    from solver.bsp.model import Model, load
    from solver.bsp.profile import SpinTimer

    cp = be.xp
    mesh = ["mesh.N_sbn=6", "mesh.NX=65", f"mesh.NZ={NZ}", "mesh.NW=300", "mesh.NPHI=48"]
    if a.load:
        z = np.load(os.path.join(a.load, f"args_{NZ}.npz"))
        m = Model(load("config/bsp/dgmosfet.yaml", mesh))
        V, levels = cp.asarray(z["V"]), cp.asarray(z["levels"])
    else:
        args, m = last_eigen_args(mesh, a.steps, be)
        V = cp.ascontiguousarray(args[2])
        levels = args[3] if len(args) > 3 and args[3] is not None else None
        if levels is None:  # the last launched call was cold: warm-start from V's own levels
            levels, _ = eig.eigenvalues_nr(m, V)
        levels = cp.ascontiguousarray(levels)
        if a.out:
            np.savez(os.path.join(a.out, f"args_{NZ}.npz"), V=cp.asnumpy(V), levels=cp.asnumpy(levels))
    en, Dn, itn = eig.eigenvalues_nr(m, V, levels, iterations=True)
    et, Dt, itt = eig.eigenvalues_tw(m, V, levels, iterations=True)
    ca, ct = eig.ipim(m, en, Dn, "a"), eig.ipim_t(m, et, Dt)
    ct_n = eig.ipim_t(m, en, Dn)  # from the same eigenvalues
    rel_e = float(cp.abs(et - en).max() / cp.abs(en).max())
    rel_c = float(cp.abs(ct_n - ca).max() / cp.abs(ca).max())
    rel_c_tw = float(cp.abs(ct - ca).max() / cp.abs(ca).max())
    rep = all(bool(cp.array_equal(eig.eigenvalues_tw(m, V, levels)[0], et)) and
              bool(cp.array_equal(eig.ipim_t(m, et, Dt), ct)) for _ in range(3))
    rep = rep and bool(cp.array_equal(eig.ipim_t(m, et, Dt, shared=True), ct))
    er, Dr, itr = eig.eigenvalues_tw(m, V, levels, iterations=True, rcp=True)
    cr = eig.ipim_t(m, en, Dn, rcp=True, carry=True)
    cand = {"carry_bitwise": bool(cp.array_equal(eig.ipim_t(m, et, Dt, carry=True), ct)),
            "rcp_eps_rel": f"{float(cp.abs(er - en).max() / cp.abs(en).max()):.2e}",
            "rcp_its_max": int(itr.max()),
            "rcp_chi_rel": f"{float(cp.abs(cr - ca).max() / cp.abs(ca).max()):.2e}"}
    tm = SpinTimer(cp)
    t = {"eigenvalues_nr": tm(lambda: eig.eigenvalues_nr(m, V, levels), a.reps)[0],
         "ipim_a": tm(lambda: eig.ipim(m, en, Dn, "a"), a.reps)[0],
         "eigenvalues_tw": tm(lambda: eig.eigenvalues_tw(m, V, levels), a.reps)[0],
         "ipim_t": tm(lambda: eig.ipim_t(m, et, Dt), a.reps)[0],
         # candidates: other blocks, ipim_t's matrix from shared memory
         "eigenvalues_tw_b32": tm(lambda: eig.eigenvalues_tw(m, V, levels, block=32), a.reps)[0],
         "ipim_t_b64": tm(lambda: eig.ipim_t(m, et, Dt, block=64), a.reps)[0],
         "ipim_t_shared": tm(lambda: eig.ipim_t(m, et, Dt, shared=True), a.reps)[0],
         "ipim_b": tm(lambda: eig.ipim(m, en, Dn, "b"), a.reps)[0],
         # the candidates of eigen_tw.cu (off by default): TW_RCP, TW_CARRY
         "eigenvalues_tw_rcp": tm(lambda: eig.eigenvalues_tw(m, V, levels, rcp=True), a.reps)[0],
         "ipim_t_carry": tm(lambda: eig.ipim_t(m, et, Dt, carry=True), a.reps)[0],
         "ipim_t_rcp_carry": tm(lambda: eig.ipim_t(m, et, Dt, rcp=True, carry=True), a.reps)[0]}
    cp.cuda.Device().synchronize()
    row = {"NZ": NZ, **{f"{k}_us": round(v * 1e6, 2) for k, v in t.items()},
           "newton_pair_us": round((t["eigenvalues_nr"] + t["ipim_a"]) * 1e6, 2),
           "twisted_pair_us": round((t["eigenvalues_tw"] + t["ipim_t"]) * 1e6, 2),
           "its_nr_mean": round(float(itn.mean()), 3), "its_nr_max": int(itn.max()),
           "its_tw_mean": round(float(itt.mean()), 3), "its_tw_max": int(itt.max()),
           "eps_rel_max": f"{rel_e:.2e}", "chi_rel_same_eps": f"{rel_c:.2e}", "chi_rel": f"{rel_c_tw:.2e}",
           "Dg_bitwise": bool(cp.array_equal(Dt, Dn)), "tw_repeat_bitwise": rep, **cand}
    print(row, flush=True)
    return row


def last_eigen_args(mesh, steps, be):
    """(the arguments of the last launched eigen call, model) of start-up + ``steps`` steps of the
    mesh on cupy with the default config (the table's eigen wrapped; the ITER graph's own eigen
    solves do not pass through it).  Unlike profile.counting_run, every phase keeps its fast path
    (its NZ > 127 branch hands the host SuperLU device arrays: fails at NZ = 129)."""
    from solver.bsp.model import load
    from solver.bsp.profile import _copy, fast_table
    from solver.bsp.simulation import Simulation

    cp = be.xp
    table = fast_table("cupy")
    cfg = load("config/bsp/dgmosfet.yaml", list(mesh) + [f"time.steps={steps}", "time.t_end_ps=null",
                                                          "numerics.backend=cupy", "output.progress=false",
                                                          "output.checkpoint_every_steps=0"])
    sim = Simulation(cfg, backend=be, progress=False)
    saved, last = table["eigen"], {}

    def spy(*args):
        last["args"] = _copy(cp, args)
        return saved(*args)

    try:
        sim._timer_rows = []
        table["eigen"] = spy  # from start-up on (its calls are cold: no levels)
        sim.startup()
        for _ in range(steps):
            sim.step()
        cp.cuda.Device().synchronize()
    finally:
        table["eigen"] = saved
    return last["args"], sim.model


def newton_counts(be, NZ, steps, out):
    """``steps`` steps of the mesh 6x65xNZx300x48 with numerics.eigen newton and twisted: the Newton
    iterations of every step (equal?) and the final states' largest relative difference."""
    from solver.bsp.model import load
    from solver.bsp.simulation import Simulation

    res = {}
    for v in ("newton", "twisted"):
        cfg = load("config/bsp/dgmosfet.yaml", ["mesh.N_sbn=6", "mesh.NX=65", f"mesh.NZ={NZ}", "mesh.NW=300",
                                                "mesh.NPHI=48", f"numerics.eigen={v}", f"time.steps={steps}",
                                                "time.t_end_ps=null", "numerics.backend=cupy",
                                                "output.progress=false", "output.checkpoint_every_steps=0"])
        sim = Simulation(cfg, backend=be, progress=False)
        sim._timer_rows = []
        sim.startup()
        counts = []
        for _ in range(steps):
            sim.step()
            counts.append(int(sim.state.newton_iterations))
        st = sim.state
        res[v] = (counts, {k: be.to_numpy(getattr(st, k)) for k in ("Phi", "V", "eps", "rho")})
    (cn, sn), (ct, stw) = res["newton"], res["twisted"]
    rel = {k: float(np.abs(stw[k] - sn[k]).max() / max(np.abs(sn[k]).max(), 1e-300)) for k in sn}
    line = (f"NZ={NZ} {steps} steps: Newton per step equal {cn == ct}; newton {cn}; twisted {ct}; "
            + ", ".join(f"{k} {v:.2e}" for k, v in rel.items()))
    print(line, flush=True)
    if out:
        with open(os.path.join(out, "newton_counts.txt"), "a") as f:
            f.write(line + "\n")


if __name__ == "__main__":
    sys.exit(main())
