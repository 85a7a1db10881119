"""``python -m solver vecops ...``: the commands the workflow rules call (paper 003).

  config    print the resolved ``vecops`` section
  bench     one figure's sweep on one device kind -> tidy CSV (+ .run.json)
  ceilings  measured copy bandwidth (and FMA throughput on the GPU) -> CSV (+ .run.json)
  table1    Table 1 queried from the hardware -> CSV (+ .run.json)
  plot      Figs 9-14, roofline and table1.md from the CSVs of one results folder
"""
from __future__ import annotations

import json
import sys
import time
from pathlib import Path


def _common(p, device=True):
    p.add_argument("--config", help="workflow YAML whose `vecops:` section is used (default: schema defaults)")
    p.add_argument("--config-json", help="the `vecops` section as a JSON string (what the rules pass)")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="override a vecops value, e.g. --set timing.reps=100 (repeatable)")
    if device:
        p.add_argument("--device", choices=["gpu", "cpu"], required=True, help="GPU kernels (CuPy) or CPU columns")


def register(sub, words=()) -> None:
    """The ``vecops`` command and all its subcommands (``words``: see solver.cli;
    unused, this one module registers them all)."""
    v = sub.add_parser("vecops", help="paper 003: AXPY, DOT and CSR SpMV kernels (GPU and CPU)")
    vs = v.add_subparsers(dest="vecops_command", metavar="SUBCOMMAND")

    c = vs.add_parser("config", help="print the resolved vecops section")
    _common(c, device=False)
    c.set_defaults(func=_config)

    from solver.vecops.sweeps import FIGURES

    b = vs.add_parser("bench", help="run one figure's sweep and write its tidy CSV")
    b.add_argument("--figure", required=True, choices=FIGURES)
    _common(b)
    b.add_argument("--out", required=True, help="CSV path; the run record goes beside it as <stem>.run.json")
    b.set_defaults(func=_bench)

    ce = vs.add_parser("ceilings", help="measure the copy bandwidth (and GPU FMA throughput)")
    _common(ce)
    ce.add_argument("--out", required=True)
    ce.set_defaults(func=_ceilings)

    t = vs.add_parser("table1", help="Table 1: device specifications queried from the hardware")
    _common(t, device=False)
    t.add_argument("--gpu", action="store_true", help="include the GPU column (needs CuPy and a device)")
    t.add_argument("--out", required=True)
    t.set_defaults(func=_table1)

    pl = vs.add_parser("plot", help="Figs 9-14, roofline and table1.md from a results folder")
    _common(pl, device=False)
    pl.add_argument("--dir", required=True, help="folder holding the CSVs")
    pl.add_argument("--out-dir", help="where figures go (default: --dir)")
    pl.set_defaults(func=_plot)


def _cfg(args) -> dict:
    from solver.vecops.config import load

    return load(args.config, args.config_json, args.overrides)


def _record(path, cfg, backend=None, extra=None):
    from solver.io import write_json
    from solver.provenance import collect

    p = Path(path)
    write_json(p.with_name(p.name[: -len(p.suffix)] + ".run.json") if p.suffix else Path(f"{p}.run.json"),
               collect(cfg, backend, extra))


def _config(args) -> int:
    print(json.dumps(_cfg(args), indent=2))
    return 0


def _backend(kind, cfg):
    from solver.backend import get_backend
    from solver.vecops.sweeps import set_threading_layer

    set_threading_layer(cfg["cpu_threading_layer"])
    return get_backend("cupy") if kind == "gpu" else get_backend("numba", threads=cfg["cpu_threads"] or None)


def _numba_layer():
    try:
        import numba

        return numba.threading_layer()
    except Exception:
        return None


def _bench(args) -> int:
    from solver.io import write_csv
    from solver.vecops.sweeps import GPU_ONLY, cpu_sweep, gpu_sweep

    cfg = _cfg(args)
    if args.device == "cpu" and args.figure in GPU_ONLY:
        print(f"error: figure {args.figure} has no CPU column", file=sys.stderr)
        return 2
    backend = _backend(args.device, cfg)
    t0 = time.perf_counter()
    df = (gpu_sweep if args.device == "gpu" else cpu_sweep)(args.figure, cfg)
    wall = time.perf_counter() - t0
    write_csv(df, args.out)
    _record(args.out, cfg, backend, {"study": "vecops", "command": "bench", "figure": args.figure,
                                     "device_kind": args.device, "wall_s": wall, "points": len(df),
                                     "max_rel_err": float(df.rel_err.max()) if df.rel_err.notna().any() else None,
                                     "numba_threading_layer": _numba_layer()})
    cols = [c for c in ("impl", "n", "block", "matrix", "reps", "median_s", "gbytes_s", "rel_err") if c in df]
    print(df[cols].to_string(index=False, float_format=lambda x: f"{x:.4g}"), file=sys.stderr)
    print(f"{args.figure} on {args.device}: {len(df)} points in {wall:.1f} s -> {args.out}", file=sys.stderr)
    return 0


def _ceilings(args) -> int:
    from solver.io import write_csv
    from solver.vecops.hardware import cpu_ceilings, gpu_ceilings

    cfg = _cfg(args)
    backend = _backend(args.device, cfg)
    df = gpu_ceilings(cfg) if args.device == "gpu" else cpu_ceilings(cfg)
    write_csv(df, args.out)
    _record(args.out, cfg, backend, {"study": "vecops", "command": "ceilings", "device_kind": args.device,
                                     "numba_threading_layer": _numba_layer()})
    print(df[["quantity", "value", "unit"]].to_string(index=False), file=sys.stderr)
    return 0


def _table1(args) -> int:
    from solver.io import write_csv
    from solver.vecops.hardware import table1

    cfg = _cfg(args)
    cpu_b = _backend("cpu", cfg)
    backend = _backend("gpu", cfg) if args.gpu else cpu_b
    df = table1(args.gpu, threads=cpu_b.threads)
    write_csv(df, args.out)
    _record(args.out, cfg, backend, {"study": "vecops", "command": "table1"})
    return 0


def _plot(args) -> int:
    from solver.vecops.plots import make_all

    cfg = _cfg(args)
    out_dir = Path(args.out_dir or args.dir)
    files = make_all(args.dir, out_dir, cfg["precision"])
    _record(out_dir / "figures.json", cfg, None, {"study": "vecops", "command": "plot", "outputs": files})
    print("\n".join(files), file=sys.stderr)
    return 0
