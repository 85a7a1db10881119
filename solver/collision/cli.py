"""``python -m solver collision <relax|maxwellian|bkw|rates|bench|convergence|figure>``: paper 004 experiments.

Every command writes its outputs atomically into ``--out`` plus ``<name>.run.json`` (provenance)."""
from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

import numpy as np

from solver.config import float_option, int_option, list_option

POSITIVE = float_option(exclusive_minimum=0)
BACKENDS = ["numpy", "numba", "cupy", "auto"]


def _backend_spec(text):
    """``name`` or ``name:threads`` of collision bench --backends."""
    name, _, thr = text.partition(":")
    if name not in BACKENDS or (thr and not (thr.isdigit() and int(thr) >= 1)):
        raise argparse.ArgumentTypeError(f"{text!r} given; allowed: {' | '.join(BACKENDS)}, optionally :THREADS >= 1")
    return text


def _choice(*allowed):
    def parse(text):
        if text not in allowed:
            raise argparse.ArgumentTypeError(f"{text!r} given; allowed: {' | '.join(allowed)}")
        return text
    return parse


_dtype = _choice("float64", "float32")
_kind = _choice("aniso", "bkw")


def _common(p, name):
    p.add_argument("--out", required=True, help="output folder")
    p.add_argument("--backend", default="numba", choices=BACKENDS)
    p.add_argument("--threads", type=int_option(1), default=None)
    p.add_argument("--dtype", default="float64", choices=["float64", "float32"])
    p.add_argument("--cache", default=None, help="folder of the HDF5 coefficient cache")
    p.add_argument("--name", default=name)


def register(sub, words=()):
    """The ``collision`` command and all its subcommands (``words``: see solver.cli;
    unused, this one module registers them all)."""
    p = sub.add_parser("collision", help="paper 004: deterministic hard-sphere collision integral")
    s = p.add_subparsers(dest="collision_cmd", metavar="SUB")
    r = s.add_parser("relax", help="bi-Maxwellian relaxation (Fig 1), conservation, entropy, CE rate")
    _common(r, "relax")
    r.add_argument("--N", type=int_option(2), default=20)
    r.add_argument("--h", type=POSITIVE, default=0.5)
    r.add_argument("--t-end", type=float_option(minimum=0), default=0.1)
    r.add_argument("--cfl", type=float_option(exclusive_minimum=0, maximum=1), default=0.5)
    r.add_argument("--scheme", default="euler", choices=["euler", "rk2"])
    r.add_argument("--snapshots", type=list_option(float_option(minimum=0), "times >= 0"),
                   default="0,0.005,0.01,0.02,0.04,0.1")
    r.set_defaults(func=cmd_relax)
    m = s.add_parser("maxwellian", help="gain and loss of a Maxwellian vs the analytic hard-sphere values")
    _common(m, "maxwellian")
    m.add_argument("--N", type=int_option(2), default=20)
    m.add_argument("--h", type=POSITIVE, default=0.5)
    m.add_argument("--T", type=list_option(POSITIVE, "temperatures > 0"), default="1.0,2.5")
    m.add_argument("--bulk", type=float_option(), default=0.1)
    m.set_defaults(func=cmd_maxwellian)
    b = s.add_parser("bkw", help="Maxwell molecules vs the BKW solution (fourth moment)")
    _common(b, "bkw")
    b.add_argument("--N", type=int_option(2), default=20)
    b.add_argument("--h", type=POSITIVE, default=0.6)
    b.add_argument("--t-end", type=float_option(minimum=0), default=15.0)
    b.add_argument("--scheme", default="rk2", choices=["euler", "rk2"])
    b.set_defaults(func=cmd_bkw)
    c = s.add_parser("bench", help="time of one collision integral vs backend, precision and mesh")
    _common(c, "bench")
    c.add_argument("--meshes", type=list_option(int_option(2), "integers >= 2"), default="16,20")
    c.add_argument("--backends", type=list_option(_backend_spec, "backends"), default="numba")
    c.add_argument("--dtypes", type=list_option(_dtype, "float64 | float32"), default="float64")
    c.add_argument("--repeat", type=int_option(1), default=2)
    c.add_argument("--sample", type=int_option(0), default=0,
                   help="numba single-core: time only every k-th cell and scale by the cell count (0 = all)")
    c.set_defaults(func=cmd_bench)
    q = s.add_parser("rates", help="mesh convergence of the instantaneous rates: near-equilibrium "
                     "T_x - T rate vs p/mu_1 (hard spheres) and BKW d<v^4>/dt (Maxwell molecules)")
    _common(q, "rates")
    q.add_argument("--meshes", type=list_option(int_option(2), "integers >= 2"), default="20,24,28")
    q.add_argument("--half-width", type=POSITIVE, default=5.0,
                   help="hard spheres: paper_grid domain u +- half-width, h = 2 half-width / N")
    q.add_argument("--T", type=POSITIVE, default=2.5, help="temperature of the anisotropic Maxwellian (n = 1)")
    q.add_argument("--bkw-half-width", type=POSITIVE, default=6.0, help="Maxwell molecules: centred domain")
    q.add_argument("--kinds", type=list_option(_kind, "aniso | bkw"), default="aniso,bkw")
    q.set_defaults(func=cmd_rates)
    v = s.add_parser("convergence", help="h^2 extrapolation tables (+ figure) from relax_rk2_N*, bkw_N*, "
                     "rates and maxwellian outputs of one folder")
    v.add_argument("--input", required=True)
    v.add_argument("--out", default=None, help="default: the input folder")
    v.add_argument("--figure", default=None)
    v.set_defaults(func=cmd_convergence)
    f = s.add_parser("figure", help="Fig 1 from a relax run's snapshots")
    f.add_argument("--input", required=True)
    f.add_argument("--output", required=True)
    f.set_defaults(func=cmd_figure)
    p.set_defaults(func=lambda a: (p.print_help(), 2)[1])


def _backend(args):
    from solver.backend import get_backend

    return get_backend(args.backend, threads=args.threads)


def _finish(args, be, extra, cfg):
    from solver.io import write_json
    from solver.provenance import collect

    write_json(Path(args.out) / f"{args.name}.run.json", collect(cfg, be, extra))


def cmd_relax(args):
    import pandas as pd

    from solver.collision.operator import CollisionOperator
    from solver.collision.relax import bimaxwellian, chapman_enskog_rate, fit_decay, paper_grid, relax
    from solver.io import write_csv, write_hdf5

    be = _backend(args)
    g = paper_grid(args.N, args.h)
    op = CollisionOperator(g, "hard_spheres", be, args.dtype, cache_dir=args.cache)
    snaps = args.snapshots
    t0 = time.perf_counter()
    rows, sn = relax(op, bimaxwellian(g), t_end=args.t_end, cfl=args.cfl, scheme=args.scheme,
                     snapshots=snaps, log=lambda s: print(s, flush=True))
    wall = time.perf_counter() - t0
    df = pd.DataFrame(rows)
    out = Path(args.out)
    write_csv(df, out / f"{args.name}_history.csv")
    times = sorted(sn)
    write_hdf5(out / f"{args.name}_snapshots.h5",
               {"t": np.array(times), "f": np.stack([sn[t] for t in times]),
                "xi_x": g.axis(0), "xi_y": g.axis(1), "xi_z": g.axis(2)},
               attrs={"grid": g.describe()}, units={"t": "1", "f": "1"})
    last = rows[-1]
    lam, sel = fit_decay(df.t, df.Tx - df["T"])
    ce = chapman_enskog_rate(last["n"], last["T"])
    H = df.H.to_numpy()
    summary = {"grid": g.describe(), "steps": int(last["step"]), "wall_s": wall,
               "max_conservation_error": float(df.cons_err.max()),
               "entropy_nonincreasing": bool(np.all(np.diff(H) <= 1e-12 * np.abs(H[:-1]))),
               "max_entropy_increase": float(np.max(np.diff(H))), "min_f": float(df.fmin.min()),
               "decay_rate_fit": lam, "decay_fit_points": int(sel.sum()), "chapman_enskog_rate": ce,
               "decay_rate_rel_err": lam / ce - 1.0, "n": last["n"], "T": last["T"]}
    print(json.dumps(summary, indent=1))
    from solver.io import write_json

    write_json(out / f"{args.name}_summary.json", summary)
    _finish(args, be, {"summary": summary}, vars(args) | {"func": None})
    return 0


def cmd_maxwellian(args):
    import pandas as pd

    from solver.collision.operator import CollisionOperator
    from solver.collision.relax import maxwellian_check, paper_grid
    from solver.io import write_csv

    be = _backend(args)
    g = paper_grid(args.N, args.h)
    op = CollisionOperator(g, "hard_spheres", be, args.dtype, cache_dir=args.cache)
    rows = []
    for T in args.T:
        r = maxwellian_check(op, n=1.0, u=(0.25, 0.25, 0.0), T=T, bulk=args.bulk)
        r.update(N=args.N, h=args.h, backend=be.name, dtype=args.dtype)
        rows.append(r)
        print(r, flush=True)
    write_csv(pd.DataFrame(rows), Path(args.out) / f"{args.name}.csv")
    _finish(args, be, {"rows": rows}, vars(args) | {"func": None})
    return 0


def cmd_bkw(args):
    import pandas as pd

    from solver.collision.operator import CollisionOperator, VelocityGrid
    from solver.collision.relax import bkw, bkw_m4, relax
    from solver.io import write_csv

    be = _backend(args)
    g = VelocityGrid.centred(args.N, args.h)
    op = CollisionOperator(g, "maxwell", be, args.dtype, cache_dir=args.cache)
    t0 = -6.0 * math.log(0.4)  # K = 3/5
    rows, _ = relax(op, bkw(g, t0), t_end=args.t_end, cfl=0.5, scheme=args.scheme)
    df = pd.DataFrame(rows)
    df["t_bkw"] = t0 + df.t
    df["m4_exact"] = [bkw_m4(t) for t in df.t_bkw]
    # discrete n and T differ from 1 and 2 by the quadrature error: compare m4 / (T/2)^2
    df["m4_scaled"] = df.m4 / (df["T"] / 2.0) ** 2
    df["rel_err"] = df.m4_scaled / df.m4_exact - 1.0
    write_csv(df, Path(args.out) / f"{args.name}.csv")
    summary = {"max_rel_err_m4": float(df.rel_err.abs().max()), "steps": len(df) - 1,
               "max_conservation_error": float(df.cons_err.max()), "grid": g.describe()}
    print(json.dumps(summary, indent=1))
    _finish(args, be, {"summary": summary}, vars(args) | {"func": None})
    return 0


def cmd_rates(args):
    """One operator evaluation per (kind, mesh): the discrete instantaneous rates whose continuum
    values are known exactly, to separate the O(h^2) bias from the physics (h^2 extrapolation)."""
    import pandas as pd

    from solver.collision.coeffs import load_or_build
    from solver.collision.operator import CollisionOperator, VelocityGrid
    from solver.collision.relax import anisotropy_rate, bkw_m4_rate, paper_grid
    from solver.io import write_csv

    be = _backend(args)
    kinds = args.kinds
    rows = []
    u = (0.25, 0.25, 0.0)
    for N in args.meshes:
        table = load_or_build(N, args.cache)
        for kind in kinds:
            t0 = time.perf_counter()
            if kind == "aniso":
                h = 2.0 * args.half_width / N
                op = CollisionOperator(paper_grid(N, h), "hard_spheres", be, args.dtype, table=table)
                r = anisotropy_rate(op, 1.0, args.T, u=u)
                row = {"kind": kind, "N": N, "h": h, "half_width": args.half_width, "T": r["T"],
                       "h2_over_T": h * h / r["T"], "rate": r["rate"], "exact": r["p_over_mu1"]}
            else:
                h = 2.0 * args.bkw_half_width / N
                op = CollisionOperator(VelocityGrid.centred(N, h), "maxwell", be, args.dtype, table=table)
                r = bkw_m4_rate(op, -6.0 * math.log(0.4))
                row = {"kind": kind, "N": N, "h": h, "half_width": args.bkw_half_width, "T": 2.0,
                       "h2_over_T": h * h / 2.0, "rate": r["dm4dt"], "exact": r["exact"]}
            be.synchronize()
            row.update(rel_err=row["rate"] / row["exact"] - 1.0, backend=be.name, dtype=args.dtype,
                       wall_s=time.perf_counter() - t0)
            print(row, flush=True)
            rows.append(row)
            write_csv(pd.DataFrame(rows), Path(args.out) / f"{args.name}.csv")  # survive a timeout
    _finish(args, be, {"rows": rows}, vars(args) | {"func": None})
    return 0


def cmd_bench(args):
    import pandas as pd

    from solver.backend import get_backend
    from solver.collision.coeffs import load_or_build
    from solver.collision.kernels import REGISTRY
    from solver.collision.operator import CollisionOperator
    from solver.collision.relax import bimaxwellian, paper_grid
    from solver.io import write_csv

    rows = []
    for N in args.meshes:
        tb = time.perf_counter()
        table = load_or_build(N, args.cache)
        t_table = time.perf_counter() - tb
        g = paper_grid(N, 10.0 / N)
        f = bimaxwellian(g)
        for spec in args.backends:
            name, _, thr = spec.partition(":")
            be = get_backend(name, threads=int(thr) if thr else None)
            for dt in args.dtypes:
                if name != "cupy" and dt == "float32" and N > 16:
                    continue
                op = CollisionOperator(g, "hard_spheres", be, dt, table=table)
                fx = be.asarray(f, dtype=dt)
                cells = None
                gain_cells = REGISTRY.lookup(be.name, "gain_cells")  # the numba fast path over a subset of cells
                if gain_cells is not None:
                    gain_cells(op, fx, np.arange(2))  # compile only
                    if args.sample and be.threads == 1:
                        cells = np.arange(0, N ** 3, args.sample)
                else:
                    op.gain(fx)  # compile / warm
                be.synchronize()
                ts = []
                for _ in range(args.repeat):
                    t0 = time.perf_counter()
                    if cells is not None:
                        gain_cells(op, fx, cells)
                    else:
                        op.gain(fx)
                    be.synchronize()
                    ts.append(time.perf_counter() - t0)
                t = min(ts) * (N ** 3 / len(cells) if cells is not None else 1)
                # terms of the gain sum actually evaluated: sum over m of box(m) * half-nnz(|m|)
                K = 2 * N - 1
                r = np.arange(-(N - 1), N)
                box = np.multiply.outer(np.multiply.outer(N - abs(r), N - abs(r)), N - abs(r)).reshape(-1)
                terms = float((box * np.diff(table.ptr)[op.sidx_m]).sum())
                row = {"N": N, "cells": N ** 3, "backend": name, "threads": be.threads, "dtype": dt,
                       "time_s": t, "sampled": cells is not None, "gain_terms": terms,
                       "terms_per_s": terms / t, "bytes_table": int(table.w.nbytes + table.n.nbytes),
                       "table_build_s": t_table, "device": be.device_info().get("device")}
                print(row, flush=True)
                rows.append(row)
                write_csv(pd.DataFrame(rows), Path(args.out) / f"{args.name}.csv")  # survive a timeout
    _finish(args, get_backend("numpy"), {"rows": rows}, vars(args) | {"func": None})
    return 0


def cmd_convergence(args):
    from solver.collision.convergence import convergence, figure

    from solver.backend import get_backend
    from solver.io import write_json
    from solver.provenance import collect

    df, fits = convergence(args.input, args.out)
    write_json(Path(args.out or args.input) / "convergence.run.json",
               collect(vars(args) | {"func": None}, get_backend("numpy"), {"fits": fits}))
    cols = [c for c in ("quantity", "N", "h", "h2_over_T", "value", "reference", "rel_err", "fit_resid_max")
            if c in df]
    print(df[cols].to_string(index=False, float_format=lambda x: f"{x:.5g}"))
    if args.figure:
        figure(args.out or args.input, args.figure)
    return 0


def cmd_figure(args):
    import h5py
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from solver.io import save_figure

    with h5py.File(args.input, "r") as fh:
        t, f = fh["t"][...], fh["f"][...]
        xs, ys, zs = fh["xi_x"][...], fh["xi_y"][...], fh["xi_z"][...]
    iy, iz, ix = (int(np.argmin(abs(ys - 0.25))), int(np.argmin(abs(zs))), int(np.argmin(abs(xs - 0.25))))
    fig, ax = plt.subplots(1, 2, figsize=(10, 4))
    for k, tk in enumerate(t):
        ax[0].plot(xs, f[k, :, iy, iz], marker=".", label=f"t = {tk:g}")
        ax[1].plot(ys, f[k, ix, :, iz], marker=".", label=f"t = {tk:g}")
    ax[0].set(xlabel=r"$\xi_x$", ylabel="f", title=rf"$\xi_y$={ys[iy]:g}, $\xi_z$={zs[iz]:g}")
    ax[1].set(xlabel=r"$\xi_y$", ylabel="f", title=rf"$\xi_x$={xs[ix]:g}, $\xi_z$={zs[iz]:g}")
    ax[1].legend(fontsize=8)
    fig.suptitle("Relaxation of the bi-Maxwellian (paper 004, Fig 1)")
    save_figure(fig, args.output)
    return 0
