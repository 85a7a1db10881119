"""Command line: ``python -m solver <command> ...``.

Every study registers its own commands from ``solver/<study>/cli.py`` through a function
``register(subparsers, words)``; each registered parser sets ``func`` to a callable taking the
parsed arguments and returning an exit code.  ``words`` are the command line's leading words (see
:func:`command_words`): a study may register only the command they name, so that a command
imports its own modules and no other's (start-up time); with no words it registers everything.
"""
from __future__ import annotations

import argparse
import importlib
import importlib.util
import sys

from solver.backend import BackendUnavailable
from solver.config import ConfigError, Interrupted, RunFault
from solver.gpuslot import gpu_option

# command -> the module that registers it (the order of the modules is the order of --help)
STUDY_CLIS = {"run": "solver.bsp.cli", "bsp": "solver.bsp.cli", "vecops": "solver.vecops.cli",
              "collision": "solver.collision.cli", "rgf": "solver.rgf.cli"}


class Parser(argparse.ArgumentParser):
    """argparse with its errors as :class:`ConfigError` (one line, exit code 2 through :func:`main`)
    instead of a usage block; the subcommand parsers are of the same class."""

    def error(self, message):
        raise ConfigError(f"{self.prog}: {message}")


def command_words(argv) -> list[str]:
    """The leading words of a command line, up to its first option: ``bsp bench-case CASE --set
    X=1`` -> ``["bsp", "bench-case", "CASE"]``; ``--help`` -> ``[]``; a leading ``--gpu SPEC``
    (the top-level option) is skipped."""
    argv = list(argv)
    if argv[:1] == ["--gpu"]:
        argv = argv[2:]
    elif argv and argv[0].startswith("--gpu="):
        argv = argv[1:]
    words = []
    for a in argv:
        if a.startswith("-"):
            break
        words.append(a)
    return words


def build_parser(argv=None) -> argparse.ArgumentParser:
    """The parser of every command, or (``argv`` given) the parser for ``argv``: where ``argv``
    names a known command, only that command's study module is imported and registered."""
    words = [] if argv is None else command_words(argv)
    p = Parser(prog="python -m solver", description=__doc__.splitlines()[0])
    p.add_argument("--version", action="version", version=f"solver {__import__('solver').__version__}")
    p.add_argument("--gpu", dest="top_gpu", type=gpu_option, metavar="auto|exclusive[:K]|own|slice|N",
                   help="GPU of a host with several, for any command (before it): N; 'auto' = shared, the GPU "
                        "with the fewest 'auto' runs; 'exclusive' = a GPU with no other run (waits for one; "
                        "'exclusive:K': K of them); 'own' = marked as exclusive but without waiting for the "
                        "'auto' runs already on it; 'slice' = exclusive, and the process pinned to that GPU's "
                        "share of the CPUs; a scheduler's CUDA_VISIBLE_DEVICES wins (solver/gpuslot.py)")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    info = sub.add_parser("info", help="print the machine tag, backends and provenance of this machine")
    info.set_defaults(func=_info)
    if words and words[0] == "info":
        return p
    modules = [STUDY_CLIS[words[0]]] if words and words[0] in STUDY_CLIS else list(dict.fromkeys(STUDY_CLIS.values()))
    for mod in modules:
        if importlib.util.find_spec(mod) is not None:
            importlib.import_module(mod).register(sub, words)
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
    code 2, a numerical fault during a run (RunFault) one line and exit code 3, a run stopped by SIGINT
    or SIGTERM (Interrupted: checkpointed at the step's end) one line and exit code 128 + the signal
    (130, 143): no traceback."""
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser(argv)
    try:
        args = parser.parse_args(argv)
        if not getattr(args, "func", None):  # no command: the help of them all
            build_parser().print_help()
            return 2
        if getattr(args, "top_gpu", None) is not None:
            from solver.gpuslot import select

            select(args.top_gpu)  # before the command starts CUDA: CUDA_VISIBLE_DEVICES
        return int(args.func(args) or 0)
    except (ConfigError, BackendUnavailable) as exc:
        print(f"error: {_one_line(exc)}", file=sys.stderr)
        return 2
    except RunFault as exc:
        print(f"fault: {_one_line(exc)}", file=sys.stderr)
        return 3
    except Interrupted as exc:  # SIGINT / SIGTERM, taken at a step's end with a checkpoint written
        print(f"stopped: {_one_line(exc)}", file=sys.stderr)
        return 128 + exc.signum


def _one_line(exc) -> str:
    return " ".join(str(exc).split())


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
