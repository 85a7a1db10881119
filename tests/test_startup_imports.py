"""Start-up imports (issue #12, start-up <= 1 s): a command imports its own modules only.

``python -m solver run`` and ``bsp bench-case`` must not pay for the other subcommands' modules
(pandas, scipy.sparse, matplotlib), and the lazily built parsers must stay those of the full
parser: the same commands, the same help."""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

import yaml

from solver import cli
from solver.bsp import cli as bsp_cli

ROOT = Path(__file__).resolve().parents[1]
HEAVY = ("pandas", "scipy", "matplotlib", "h5py", "jsonschema", "numba", "cupy")


def _imported(code: str) -> list[str]:
    """The HEAVY packages imported after ``code`` in a fresh interpreter."""
    probe = f"{code}\nimport sys\nprint('imported:' + ','.join(m for m in {HEAVY!r} if m in sys.modules))"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    r = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env, cwd=ROOT, timeout=120)
    assert r.returncode == 0, r.stderr
    last = r.stdout.strip().splitlines()[-1]
    assert last.startswith("imported:"), r.stdout
    return [m for m in last.removeprefix("imported:").split(",") if m]


def _help(argv: list[str]) -> str:
    return (f"from solver.cli import main\ntry:\n    main({argv!r})\nexcept SystemExit:\n    pass")


def test_run_and_bench_case_parsers_import_nothing_heavy():
    for argv in (["run", "--help"], ["bsp", "bench-case", "--help"], ["bsp", "config", "--help"], ["info", "--help"]):
        assert _imported(_help(argv)) == [], argv


def test_bench_case_overrides_import_no_pandas():
    code = "from solver.bsp.bench import Case\nassert Case.parse('6x33x17x150x24:numpy:1:2:1').overrides()[:5] == " \
           "['mesh.N_sbn=6', 'mesh.NX=33', 'mesh.NZ=17', 'mesh.NW=150', 'mesh.NPHI=24']"
    assert "pandas" not in _imported(code)


def test_the_full_help_still_imports_every_subcommand():
    # the control of the test above: bsp --help lists krylov, whose module imports scipy.sparse
    assert "scipy" in _imported(_help(["bsp", "--help"]))


def test_simulation_imports_no_plotting_hdf5_or_other_backend():
    assert not {"matplotlib", "h5py", "numba", "cupy"} & set(_imported("import solver.bsp.simulation")), \
        "matplotlib, h5py, numba and CuPy belong inside the functions that use them"


def test_command_words():
    assert cli.command_words(["bsp", "bench-case", "6x9x9x8x8:numpy:1:1:0", "--set", "a=1", "b"]) == \
        ["bsp", "bench-case", "6x9x9x8x8:numpy:1:1:0"]
    assert cli.command_words(["--help", "run"]) == []
    assert cli.command_words([]) == []


def _commands(parser: argparse.ArgumentParser, path=()) -> dict:
    """{command path: its parser} for every (sub)command below ``parser``."""
    out = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                out[path + (name,)] = sub
                out.update(_commands(sub, path + (name,)))
    return out


def test_lazy_parsers_equal_the_full_parser():
    full = _commands(cli.build_parser())
    assert {p[0] for p in full} == {"info"} | set(cli.STUDY_CLIS)
    bsp = {p[1] for p in full if p[0] == "bsp" and len(p) == 2}
    assert bsp == {"config"} | {n for _, _, names in bsp_cli.BSP_CLIS for n in names}
    for path, parser in full.items():
        lazy = _commands(cli.build_parser(list(path) + ["--help"]))
        assert lazy[path].format_help() == parser.format_help(), path
        assert set(lazy) <= set(full)
    # a command line naming run builds no bsp subcommand beyond config
    assert {p for p in _commands(cli.build_parser(["run", "c.yaml", "--out", "x"])) if p[0] == "bsp"} == \
        {("bsp",), ("bsp", "config")}


def test_schema_loader_gives_safe_load_mapping():
    from solver import config

    paths = [ROOT / "solver/bsp/schema.yaml", *sorted((ROOT / "workflow/schemas").glob("*.yaml"))]
    assert len(paths) > 1
    for path in paths:
        assert config.load_schema(path) == yaml.safe_load(path.read_text()), path
