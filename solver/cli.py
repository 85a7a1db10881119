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

from solver.backend import BackendUnavailable
from solver.config import ConfigError, RunFault

STUDY_CLIS = ("solver.bsp.cli", "solver.vecops.cli", "solver.collision.cli", "solver.rgf.cli")


class Parser(argparse.ArgumentParser):
    """argparse with its errors as :class:`ConfigError` (one line, exit code 2 through :func:`main`)
    instead of a usage block; the subcommand parsers are of the same class."""

    def error(self, message):
        raise ConfigError(f"{self.prog}: {message}")


def build_parser() -> argparse.ArgumentParser:
    p = Parser(prog="python -m solver", description=__doc__.splitlines()[0])
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
    """Run one command.  A bad input (ConfigError, BackendUnavailable) is one line on stderr and exit
    code 2, a numerical fault during a run (RunFault) one line and exit code 3: no traceback."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
        if not getattr(args, "func", None):
            parser.print_help()
            return 2
        return int(args.func(args) or 0)
    except (ConfigError, BackendUnavailable) as exc:
        print(f"error: {_one_line(exc)}", file=sys.stderr)
        return 2
    except RunFault as exc:
        print(f"fault: {_one_line(exc)}", file=sys.stderr)
        return 3


def _one_line(exc) -> str:
    return " ".join(str(exc).split())


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
