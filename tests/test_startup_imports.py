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


def test_simulation_imports_nothing_heavy():
    # scipy: schrodinger loads its LAPACK wrappers at the first eigen_host, poisson scipy.sparse in the
    # reference linear solve; pandas, h5py, matplotlib where tables and files are written
    assert _imported("import solver.bsp.simulation") == [], \
        "SciPy, pandas, matplotlib, h5py, jsonschema, numba and CuPy belong inside the functions that use them"


FIRST_STEP = """
import sys
from solver.bsp import simulation
def first_step(self):
    print('first step:' + ','.join(m for m in {heavy!r} if m in sys.modules), flush=True)
    raise SystemExit(0)
simulation.Simulation.step = first_step
from solver.cli import main
main({argv!r})
"""


def _imported_at_first_step(argv: list[str], heavy) -> list[str]:
    """The modules of ``heavy`` imported when ``python -m solver ARGV`` reaches its first time step."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
               OMP_NUM_THREADS="1")
    r = subprocess.run([sys.executable, "-c", FIRST_STEP.format(heavy=tuple(heavy), argv=argv)], capture_output=True,
                       text=True, env=env, cwd=ROOT, timeout=300)
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith("first step:")]
    assert r.returncode == 0 and lines, r.stdout + r.stderr
    return [m for m in lines[-1].removeprefix("first step:").split(",") if m]


def test_bench_case_reaches_its_first_step_without_tables_files_or_plots():
    # what bench's startup_s times (the numpy path needs scipy.sparse for its SuperLU solves)
    heavy = ("pandas", "matplotlib", "h5py", "numba", "cupy", "scipy.sparse")
    assert _imported_at_first_step(["bsp", "bench-case", "3x9x9x12x8:numpy:1:1:0"], heavy) == ["scipy.sparse"]


def test_lapack_wrappers_are_scipys_without_scipy_linalg():
    code = ("import sys\nfrom solver.bsp import schrodinger\nf = schrodinger.lapack()\n"
            "assert 'scipy.linalg' not in sys.modules and 'scipy.linalg._flapack' not in sys.modules, sorted(sys.modules)\n"
            "import scipy.linalg.lapack as L\nassert f == (L.dstebz, L.dstein) and f[0] is L.dstebz and f[1] is L.dstein\n"
            "print('imported:')")
    assert _imported(code) == ["scipy"]  # (scipy imported by the check itself)
    # scipy.linalg already imported: the plain import, the same functions
    code = ("import scipy.linalg.lapack as L\nfrom solver.bsp import schrodinger\n"
            "assert schrodinger.lapack() == (L.dstebz, L.dstein)\nprint('imported:')")
    assert _imported(code) == ["scipy"]


FAKE_DRIVER = r"""
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
static void note(const char *s, int v) { FILE *f = fopen(getenv("FAKE_CUDA_LOG"), "a"); fprintf(f, "%s %d\n", s, v); fclose(f); }
int cuInit(unsigned flags) {
    /* returns only once the main thread has run Python meanwhile (it writes FAKE_CUDA_GO): the GIL is free */
    for (int i = 0; i < 2000; i++) { if (access(getenv("FAKE_CUDA_GO"), F_OK) == 0) { note("cuInit", flags); return 0; } usleep(5000); }
    note("cuInit timed out", flags); return 3;
}
int cuDeviceGet(int *dev, int ordinal) { *dev = 7; note("cuDeviceGet", ordinal); return 0; }
int cuDevicePrimaryCtxRetain(void **ctx, int dev) { *ctx = (void *)1; note("cuDevicePrimaryCtxRetain", dev); return 0; }
"""


def test_prewarm_creates_the_cuda_context_beside_python(tmp_path):
    """backend.prewarm: cuInit, cuDeviceGet(0) and the primary context of that device, in a thread that
    leaves the GIL to the main thread (a stand-in libcuda.so.1 whose cuInit returns only after the
    main thread has run); get_backend waits for it; other backends start nothing."""
    import shutil

    cc = shutil.which("gcc") or shutil.which("cc")
    assert cc, "needs a C compiler"
    src = tmp_path / "fake_cuda.c"
    src.write_text(FAKE_DRIVER)
    subprocess.run([cc, "-shared", "-fPIC", "-o", str(tmp_path / "libcuda.so.1"), str(src)], check=True)
    log, go = tmp_path / "log.txt", tmp_path / "go"
    (tmp_path / "site" / "cupy").mkdir(parents=True)  # prewarm starts only where CuPy is installed
    (tmp_path / "site" / "cupy" / "__init__.py").write_text("raise ImportError('stand-in: not to be imported')\n")
    code = (f"import sys, threading\nfrom solver import backend\nbackend.prewarm('numpy')\n"
            f"assert backend._prewarm is None and threading.active_count() == 1\n"
            f"backend.prewarm('cupy')\nbackend.prewarm('cupy')\nassert threading.active_count() == 2\n"
            f"open({str(go)!r}, 'w').close()\nbackend._wait_prewarm()\n"
            f"assert not backend._prewarm.is_alive()\nprint('imported:' + ','.join(m for m in ('cupy',) if m in sys.modules))")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), str(tmp_path / "site")]),
               LD_LIBRARY_PATH=str(tmp_path), FAKE_CUDA_LOG=str(log), FAKE_CUDA_GO=str(go))
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=ROOT, timeout=120)
    assert r.returncode == 0 and r.stdout.strip().splitlines()[-1] == "imported:", r.stdout + r.stderr
    assert log.read_text().splitlines() == ["cuInit 0", "cuDeviceGet 0", "cuDevicePrimaryCtxRetain 7"]
    # without CuPy installed: no thread, no driver call
    log.unlink()
    env["PYTHONPATH"] = str(ROOT)
    code = ("import threading\nfrom solver import backend\nbackend.prewarm('cupy')\nbackend.prewarm('auto')\n"
            "assert backend._prewarm is None and threading.active_count() == 1\nprint('imported:')")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=ROOT, timeout=120)
    assert r.returncode == 0 and r.stdout.strip().splitlines()[-1] == "imported:", r.stdout + r.stderr
    assert not log.exists()


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
