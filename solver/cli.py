"""Command line: ``python -m solver <command> ...``.

Every study registers its own commands from ``solver/<study>/cli.py`` through a function
``register(subparsers)``; each registered parser sets ``func`` to a callable taking the parsed
arguments and returning an exit code.
"""
from __future__ import annotations

import argparse
import importlib
import importlib.util
import sys

from solver.config import ConfigError
from solver.backend import BackendUnavailable

STUDY_CLIS = ("solver.bsp.cli", "solver.vecops.cli", "solver.collision.cli", "solver.rgf.cli")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m solver", description=__doc__.splitlines()[0])
    p.add_argument("--version", action="version", version=f"solver {__import__('solver').__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    info = sub.add_parser("info", help="print the machine tag, backends and provenance of this machine")
    info.set_defaults(func=_info)
    for mod in STUDY_CLIS:
        if importlib.util.find_spec(mod) is not None:
            importlib.import_module(mod).register(sub)
    return p


def _info(args) -> int:
    import json

    from solver import provenance
    from solver.backend import available_backends

    rec = provenance.collect()
    rec["backends"] = available_backends()
    print(json.dumps(rec, indent=2, default=str))
    return 0


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except (ConfigError, BackendUnavailable) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
