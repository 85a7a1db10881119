"""``python -m solver rgf <subcommand>``: bulk, wire-gaps, sweep, plot-sweep, cases, plot-cases,
cost, plot-cost, table1, scaling, scaling-run, scaling-measured."""
from __future__ import annotations

import argparse

import numpy as np

from solver.config import float_option, int_option, list_option

FINITE = float_option()
POSITIVE_INTS = list_option(int_option(1), "integers >= 1")


def _tb_set(name):
    from solver.rgf.tb import load_params

    try:
        load_params(name)
    except KeyError as exc:
        raise argparse.ArgumentTypeError(f"{name!r} given; {str(exc).strip(chr(34))}") from None
    return name


def _section(text):
    """``NYxNZ`` of a wire cross-section, both >= 1."""
    ny, _, nz = text.partition("x")
    if not (ny.isdigit() and nz.isdigit() and int(ny) >= 1 and int(nz) >= 1):
        raise argparse.ArgumentTypeError(f"{text!r} given; allowed: NYxNZ with integers >= 1, e.g. 2x2")
    return int(ny), int(nz)


def register(sub, words=()):
    """The ``rgf`` command and all its subcommands (``words``: see solver.cli;
    unused, this one module registers them all)."""
    p = sub.add_parser("rgf", help="recursive Green's function transport in a Si nanowire (paper 002)")
    s = p.add_subparsers(dest="rgf_cmd", metavar="SUBCOMMAND")

    c = s.add_parser("bulk", help="bulk Si gaps (Jancu, Boykin, with/without spin-orbit) and a band plot")
    c.add_argument("--out", required=True); c.add_argument("--fig")
    c.set_defaults(func=lambda a: _bulk(a))

    c = s.add_parser("wire-gaps", help="gaps of passivated n x n wires")
    c.add_argument("--out", required=True); c.add_argument("--sizes", type=POSITIVE_INTS, default="2,3,4")
    c.add_argument("--set", type=_tb_set, default="boykin2004"); c.add_argument("--shift", type=FINITE, default=20.0)
    c.set_defaults(func=lambda a: _wire(a))

    c = s.add_parser("sweep", help="T(E) and LDOS(E) of one chunk of energies")
    c.add_argument("--out", required=True)
    c.add_argument("--ny", type=int_option(1), default=2); c.add_argument("--nz", type=int_option(1), default=2)
    c.add_argument("--xuc", type=POSITIVE_INTS, default="2", help="cubic cells along x; a comma list shares the leads")
    c.add_argument("--emin", type=FINITE, required=True); c.add_argument("--emax", type=FINITE, required=True)
    c.add_argument("--ne", type=int_option(1), required=True)
    c.add_argument("--chunk", type=int_option(0), default=0); c.add_argument("--n-chunks", type=int_option(1), default=1)
    c.add_argument("--set", type=_tb_set, default="jancu1998"); c.add_argument("--spin-orbit", action="store_true")
    c.add_argument("--eta", type=float_option(exclusive_minimum=0), default=1e-6)
    c.add_argument("--backend", default="numpy", choices=["numpy", "numba", "cupy", "auto"])
    c.add_argument("--batch", type=int_option(0), default=1, help="energies per batched RGF call (0 = auto)")
    c.set_defaults(func=lambda a: _sweep(a))

    c = s.add_parser("plot-sweep", help="Fig 8b/8c from sweep chunks")
    c.add_argument("--out", required=True); c.add_argument("--title", default=""); c.add_argument("inputs", nargs="+")
    c.add_argument("--cbm", type=float, help="mark the conduction-band minimum (eV)")
    c.set_defaults(func=lambda a: _plot_sweep(a))

    c = s.add_parser("cases", help="Table 3 / Fig 7: the four RGF steps for optimization cases")
    c.add_argument("--out", required=True)
    c.add_argument("--cases", type=list_option(_case, "cases 1 .. 5 (5: step 3 on the GPU)"), default="1,2,3,4")
    c.add_argument("--ny", type=int_option(1), default=2); c.add_argument("--nz", type=int_option(1), default=2)
    c.add_argument("--xuc", type=int_option(1), default=4); c.add_argument("--energy", type=FINITE, default=2.0)
    c.add_argument("--fig")
    c.set_defaults(func=lambda a: _cases(a))

    c = s.add_parser("cost", help="Fig 2: cost vs length and cross-section")
    c.add_argument("--out", required=True); c.add_argument("--lengths", type=POSITIVE_INTS, default="1,2,4")
    c.add_argument("--sections", type=list_option(_section, "NYxNZ"), default="1x1,1x2,2x2")
    c.add_argument("--base-length", type=int_option(1), default=2)
    c.add_argument("--base-section", type=_section, default="1x2"); c.add_argument("--energy", type=FINITE, default=2.0)
    c.add_argument("--fig")
    c.set_defaults(func=lambda a: _cost(a))

    c = s.add_parser("table1", help="Table 1: thread-utilization efficiency of the j-loop scheduling")
    c.add_argument("--out", required=True); c.add_argument("--rows", type=int_option(1), default=80)
    c.add_argument("--threads", type=int_option(1), default=32)
    c.set_defaults(func=lambda a: _table1(a))

    c = s.add_parser("scaling", help="Fig 8a from the sweep chunks' measured times")
    c.add_argument("--out", required=True); c.add_argument("--fig"); c.add_argument("inputs", nargs="+")
    c.set_defaults(func=lambda a: _scaling(a))
    c = s.add_parser("scaling-run", help="Fig 8a, measured: the sweep in C chunk processes, at most W at a time "
                     "(arguments after -- go to every `rgf sweep`)")
    c.add_argument("--workers", type=int_option(1), required=True)
    c.add_argument("--chunks", type=int_option(1), required=True)
    c.add_argument("--devices", choices=["cpu", "gpu"], default="cpu")
    c.add_argument("--gpu-ids", type=list_option(int_option(0), "GPU ids >= 0"), default=[],
                   help="comma list (default 0..W-1)")
    c.add_argument("--out", required=True); c.add_argument("--chunk-dir", required=True)
    c.add_argument("sweep_args", nargs="*", help="arguments of `rgf sweep` (after --)")
    c.set_defaults(func=lambda a: _scaling_run(a))
    c = s.add_parser("scaling-measured", help="Fig 8a from timed parallel runs (rgf scaling-run)")
    c.add_argument("--out", required=True); c.add_argument("--fig"); c.add_argument("--title", default="")
    c.add_argument("inputs", nargs="+")
    c.set_defaults(func=lambda a: _scaling_measured(a))
    p.set_defaults(func=lambda a: (p.print_help(), 2)[1])


def _case(text):
    if text not in ("1", "2", "3", "4", "5"):
        raise argparse.ArgumentTypeError(f"{text!r} given; allowed: 1, 2, 3, 4, 5")
    return int(text)


def _bulk(a):
    from solver.rgf.bench import bulk_table
    print(bulk_table(a.out, a.fig).to_string(index=False))


def _wire(a):
    from solver.rgf.bench import wire_gap_table
    print(wire_gap_table(a.out, a.sizes, a.set, False, a.shift).to_string(index=False))


def _sweep(a):
    from solver.config import ConfigError
    from solver.rgf.bench import sweep
    if a.chunk >= a.n_chunks:
        raise ConfigError(f"--chunk {a.chunk}: allowed 0 .. n_chunks-1 = {a.n_chunks - 1}")
    if a.ne < a.n_chunks:
        raise ConfigError(f"--ne {a.ne}: fewer energies than --n-chunks {a.n_chunks}; allowed: --ne >= --n-chunks")
    if a.emax < a.emin:
        raise ConfigError(f"--emax {a.emax}: below --emin {a.emin}; allowed: --emax >= --emin")
    E = np.linspace(a.emin, a.emax, a.ne)
    df = sweep(a.out, a.ny, a.nz, a.xuc, E, a.set, a.spin_orbit, 20.0, a.eta, a.backend, a.chunk, a.n_chunks,
               config=vars(a) | {"func": None}, batch=a.batch)
    print(df.to_string(index=False))


def _plot_sweep(a):
    from solver.rgf.plots import fig8bc
    fig8bc(a.inputs, a.out, a.title, a.cbm)


def _cases(a):
    from solver.rgf.bench import cases_benchmark
    df = cases_benchmark(a.out, a.ny, a.nz, a.xuc, a.energy, a.cases, config=vars(a) | {"func": None})
    print(df.to_string(index=False))
    if a.fig:
        from solver.rgf.plots import fig7
        fig7(a.out, a.fig)


def _cost(a):
    from solver.rgf.bench import cost_scaling
    df = cost_scaling(a.out, a.lengths, a.sections, a.energy, a.base_section, a.base_length,
                      config=vars(a) | {"func": None})
    print(df.to_string(index=False))
    if a.fig:
        from solver.rgf.plots import fig2
        fig2(a.out, a.fig)


def _table1(a):
    from solver.rgf.bench import table1_csv
    print(table1_csv(a.out, a.rows, a.threads).to_string(index=False))


def _scaling(a):
    from solver.rgf.bench import strong_scaling
    df = strong_scaling(a.inputs, a.out)
    print(df.to_string(index=False))
    if a.fig:
        from solver.rgf.plots import fig8a
        fig8a(a.out, a.fig)


def _scaling_run(a):
    from solver.rgf.scaling import scaling_run
    scaling_run(a.workers, a.chunks, a.sweep_args, a.out, a.chunk_dir, a.devices, a.gpu_ids or None,
                log=lambda m: print(m, flush=True))
    return 0


def _scaling_measured(a):
    from solver.rgf.bench import measured_scaling
    df = measured_scaling(a.inputs, a.out)
    print(df.to_string(index=False))
    if a.fig:
        from solver.rgf.plots import fig8a_measured
        fig8a_measured(a.out, a.fig, a.title)
