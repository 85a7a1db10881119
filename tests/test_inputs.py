"""Bad inputs across every subcommand (issue 17): each stops before any work with exit code 2 and
exactly one line on stderr (no traceback) naming the key or option, what was given and what is
allowed, and leaves nothing behind.  Most cases run in-process through solver.cli.main; a few
run as ``python -m solver`` subprocesses to check the real entry point."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from solver.cli import main

REPO = Path(__file__).resolve().parents[1]
TINY = "name: tiny\nmesh: {N_sbn: 2, NX: 9, NZ: 9, NW: 8, NPHI: 4}\ntime: {steps: 1}\noutput: {progress: false}\n"


# ------------------------------------------------------------------------------ folder set-ups
def _write(rel, data):
    def setup(tmp):
        p = tmp / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        (p.write_bytes if isinstance(data, bytes) else p.write_text)(data)
    return setup


def _both(*setups):
    def setup(tmp):
        for s in setups:
            s(tmp)
    return setup


TINY_CFG = _write("tiny.yaml", TINY)
CORRUPT_CKPT = _both(TINY_CFG, _write("out/checkpoint.h5", b"\x89HDF\r\n\x1a\n not really an HDF5 file"))
OTHER_RUN = _both(TINY_CFG, _write("out/run.json", '{"config_hash": "0123456789abcdef"}\n'))
GIT_ROOT = _write("out/.git/HEAD", "ref: refs/heads/main\n")

RUN = ["run", "{tmp}/tiny.yaml", "--out", "{tmp}/out"]
RELAX = ["collision", "relax", "--out", "{tmp}/out"]
SWEEP = ["rgf", "sweep", "--out", "{tmp}/out/sweep.csv", "--emin", "1", "--emax", "2", "--ne", "4"]

# (id, argv, set-up, words the line must hold: key or option, what was given, what is allowed)
CASES = [
    # --- YAML files (one line with file and line)
    ("yaml-malformed", ["run", "{tmp}/bad.yaml", "--out", "{tmp}/out"],
     _write("bad.yaml", "name: x\nmesh: {NX: 33\ntime: {steps: 1}\n"), ["bad.yaml", "line ", "not valid YAML"]),
    ("yaml-tabs", ["run", "{tmp}/bad.yaml", "--out", "{tmp}/out"],
     _write("bad.yaml", "mesh:\n\tNX: 33\n"), ["bad.yaml", "line 2", "tab"]),
    ("yaml-not-utf8", ["run", "{tmp}/bad.yaml", "--out", "{tmp}/out"],
     _write("bad.yaml", b"name: x\nlabel: caf\xe9\n"), ["bad.yaml", "line 2", "not UTF-8", "0xe9"]),
    ("yaml-missing", ["run", "{tmp}/none.yaml", "--out", "{tmp}/out"], None, ["none.yaml", "does not exist"]),
    ("yaml-list", ["run", "{tmp}/bad.yaml", "--out", "{tmp}/out"], _write("bad.yaml", "- 1\n- 2\n"),
     ["bad.yaml", "top level must be a mapping"]),
    ("config-yaml-malformed", ["bsp", "config", "{tmp}/bad.yaml"], _write("bad.yaml", "a: [1, 2\n"),
     ["bad.yaml", "line ", "not valid YAML"]),
    # --- schema values: type, finiteness, range
    ("t_end-nan", RUN + ["--set", "time.t_end_ps=.nan"], TINY_CFG, ["'time.t_end_ps'", "nan", "finite", ">= 0"]),
    ("t_end-inf", RUN + ["--set", "time.t_end_ps=.inf"], TINY_CFG, ["'time.t_end_ps'", "inf", "finite"]),
    ("t_end-negative", RUN + ["--set", "time.t_end_ps=-1"], TINY_CFG, ["'time.t_end_ps'", "-1", ">= 0"]),
    ("t_end-text", RUN + ["--set", "time.t_end_ps=soon"], TINY_CFG, ["'time.t_end_ps'", "'soon'", "number"]),
    ("NX-small", RUN + ["--set", "mesh.NX=4"], TINY_CFG, ["'mesh.NX'", "4", ">= 9"]),
    ("NX-float", RUN + ["--set", "mesh.NX=33.0"], TINY_CFG, ["'mesh.NX'", "33.0", "not an integer", "integer >= 9"]),
    ("NX-text", RUN + ["--set", "mesh.NX=abc"], TINY_CFG, ["'mesh.NX'", "'abc'", "integer"]),
    ("NW-nan", RUN + ["--set", "mesh.NW=.nan"], TINY_CFG, ["'mesh.NW'", "nan", "integer >= 6"]),
    ("NPHI-odd", RUN + ["--set", "mesh.NPHI=47"], TINY_CFG, ["'mesh.NPHI'", "47", "even integer"]),
    ("N_sbn-zero", RUN + ["--set", "mesh.N_sbn=0"], TINY_CFG, ["'mesh.N_sbn'", "0", ">= 1"]),
    ("w_max-inf", RUN + ["--set", "mesh.w_max_eV=.inf"], TINY_CFG, ["'mesh.w_max_eV'", "inf", "> 0"]),
    ("cfl-big", RUN + ["--set", "time.cfl=1.5"], TINY_CFG, ["'time.cfl'", "1.5", "(0, 1)"]),
    ("cfl-zero", RUN + ["--set", "time.cfl=0"], TINY_CFG, ["'time.cfl'", "0", "(0, 1)"]),
    ("first_dt-negative", RUN + ["--set", "time.first_dt_s=-1e-18"], TINY_CFG, ["'time.first_dt_s'", "-1e-18", "> 0"]),
    ("steps-negative", RUN + ["--set", "time.steps=-3"], TINY_CFG, ["'time.steps'", "-3", ">= 0"]),
    ("temperature-nan", RUN + ["--set", "device.temperature_K=.nan"], TINY_CFG,
     ["'device.temperature_K'", "nan", "> 0"]),
    ("L_channel-zero", RUN + ["--set", "device.L_channel_nm=0"], TINY_CFG, ["'device.L_channel_nm'", "0", "> 0"]),
    ("V_DS-inf", RUN + ["--set", "bias.V_DS=.inf"], TINY_CFG, ["'bias.V_DS'", "inf", "finite"]),
    ("V_G-nan", RUN + ["--set", "bias.V_G=.NaN"], TINY_CFG, ["'bias.V_G'", "nan", "finite"]),
    ("kane-negative", RUN + ["--set", "physics.kane_alpha_per_eV=-0.1"], TINY_CFG,
     ["'physics.kane_alpha_per_eV'", "-0.1", ">= 0"]),
    ("coupling-nan", RUN + ["--set", "physics.phonons=[{kind: g, coupling: .nan}]"], TINY_CFG,
     ["'physics.phonons.0.coupling'", "nan", "finite"]),
    ("backend-key", RUN + ["--set", "numerics.backend=foo"], TINY_CFG, ["'numerics.backend'", "'foo'", "numpy"]),
    ("threads-key", RUN + ["--set", "numerics.threads=0"], TINY_CFG, ["'numerics.threads'", "0", "null = all cores"]),
    ("tol-zero", RUN + ["--set", "numerics.tol_potential=0"], TINY_CFG, ["'numerics.tol_potential'", "0", "> 0"]),
    ("scalars_every-zero", RUN + ["--set", "output.scalars_every=0"], TINY_CFG, ["'output.scalars_every'", "0", ">= 1"]),
    ("every_ps-inf", RUN + ["--set", "output.every_ps=.inf"], TINY_CFG, ["'output.every_ps'", "inf", "finite"]),
    ("unknown-key", RUN + ["--set", "mesh.NQ=3"], TINY_CFG, ["'mesh'", "'NQ'", "allowed keys: NPHI, NW, NX, NZ, N_sbn"]),
    ("override-no-value", RUN + ["--set", "novalue"], TINY_CFG, ["'novalue'", "KEY=VALUE"]),
    ("override-bad-yaml", RUN + ["--set", "mesh.NX=[1"], TINY_CFG, ["'mesh.NX=[1'", "YAML scalar"]),
    ("gate-outside", RUN + ["--set", "device.gate_end_nm=30"], TINY_CFG, ["'device.gate_end_nm'", "30", "<= the device"]),
    ("NZ-subbands", RUN + ["--set", "mesh.NZ=9", "--set", "mesh.N_sbn=7"], TINY_CFG, ["'mesh.NZ'", "9", "N_sbn + 2"]),
    ("no-end", RUN + ["--set", "time.steps=null", "--set", "time.t_end_ps=null"], TINY_CFG,
     ["'time'", "t_end_ps or steps"]),
    ("memory", RUN + ["--set", "mesh.NX=4097", "--set", "mesh.NW=40000", "--set", "mesh.NPHI=4096"], TINY_CFG,
     ["'mesh'", "2x4097x9x40000x4096", "GiB", "host memory"]),
    # --- run options and the output folder
    ("threads-zero", RUN + ["--threads", "0"], TINY_CFG, ["--threads", "'0'", "integer >= 1"]),
    ("threads-text", RUN + ["--threads", "two"], TINY_CFG, ["--threads", "'two'", "integer >= 1"]),
    ("backend-option", RUN + ["--backend", "foo"], TINY_CFG, ["--backend", "'foo'", "numpy"]),
    ("unknown-option", RUN + ["--fast"], TINY_CFG, ["unrecognized arguments", "--fast"]),
    ("out-missing", ["run", "{tmp}/tiny.yaml"], TINY_CFG, ["--out", "required"]),
    ("out-is-file", ["run", "{tmp}/tiny.yaml", "--out", "{tmp}/tiny.yaml"], TINY_CFG, ["--out", "tiny.yaml", "is a file"]),
    ("out-under-file", ["run", "{tmp}/tiny.yaml", "--out", "{tmp}/tiny.yaml/out"], TINY_CFG,
     ["--out", "tiny.yaml/out", "is a file"]),
    ("out-unwritable", ["run", "{tmp}/tiny.yaml", "--out", "/proc/solver-test/out"], TINY_CFG,
     ["--out", "/proc/solver-test/out", "cannot write", "writable folder"]),
    ("out-git-root", RUN, _both(TINY_CFG, GIT_ROOT), ["--out", "git working tree", "results/runs"]),
    ("checkpoint-corrupt", RUN, CORRUPT_CKPT, ["checkpoint.h5", "corrupt", "--no-resume", "fresh --out"]),
    ("other-configuration", RUN, OTHER_RUN, ["--out", "another configuration", "0123456789abcdef", "--overwrite"]),
    ("config-nan", ["bsp", "config", "--set", "time.t_end_ps=.nan"], None, ["'time.t_end_ps'", "nan", "finite"]),
    ("config-linsys", ["bsp", "config", "--set", "numerics.linsys=foo"], None, ["'numerics.linsys'", "'foo'", "block_cr"]),
    # --- collision
    ("relax-N-negative", RELAX + ["--N", "-4"], None, ["--N", "'-4'", "integer >= 2"]),
    ("relax-N-one", RELAX + ["--N", "1"], None, ["--N", "'1'", "integer >= 2"]),
    ("relax-N-text", RELAX + ["--N", "x"], None, ["--N", "'x'", "integer"]),
    ("relax-backend", RELAX + ["--backend", "foo"], None, ["--backend", "'foo'", "numba"]),
    ("relax-h-nan", RELAX + ["--h", "nan"], None, ["--h", "'nan'", "finite number > 0"]),
    ("relax-h-zero", RELAX + ["--h", "0"], None, ["--h", "'0'", "> 0"]),
    ("relax-h-inf", RELAX + ["--h", "inf"], None, ["--h", "'inf'", "finite"]),
    ("relax-t-end", RELAX + ["--t-end", "-1"], None, ["--t-end", "'-1'", ">= 0"]),
    ("relax-cfl-zero", RELAX + ["--cfl", "0"], None, ["--cfl", "'0'", "> 0", "<= 1"]),
    ("relax-cfl-big", RELAX + ["--cfl", "2"], None, ["--cfl", "'2'", "<= 1"]),
    ("relax-threads", RELAX + ["--threads", "0"], None, ["--threads", "'0'", "integer >= 1"]),
    ("relax-snapshots", RELAX + ["--snapshots", "0,nan"], None, ["--snapshots", "'0,nan'", "times >= 0"]),
    ("relax-scheme", RELAX + ["--scheme", "rk9"], None, ["--scheme", "'rk9'", "euler"]),
    ("relax-dtype", RELAX + ["--dtype", "float16"], None, ["--dtype", "'float16'", "float64"]),
    ("relax-no-out", ["collision", "relax"], None, ["--out", "required"]),
    ("maxwellian-T", ["collision", "maxwellian", "--out", "{tmp}/out", "--T", "1,-2"], None,
     ["--T", "'1,-2'", "temperatures > 0"]),
    ("maxwellian-bulk", ["collision", "maxwellian", "--out", "{tmp}/out", "--bulk", "inf"], None,
     ["--bulk", "'inf'", "finite"]),
    ("bkw-t-end", ["collision", "bkw", "--out", "{tmp}/out", "--t-end", "nan"], None, ["--t-end", "'nan'", ">= 0"]),
    ("bench-meshes", ["collision", "bench", "--out", "{tmp}/out", "--meshes", "16,0"], None,
     ["--meshes", "'16,0'", "integers >= 2"]),
    ("bench-backends", ["collision", "bench", "--out", "{tmp}/out", "--backends", "numpy,foo"], None,
     ["--backends", "'numpy,foo'", "backends"]),
    ("bench-threads", ["collision", "bench", "--out", "{tmp}/out", "--backends", "numba:0"], None,
     ["--backends", "'numba:0'", "backends"]),
    ("bench-dtypes", ["collision", "bench", "--out", "{tmp}/out", "--dtypes", "float16"], None,
     ["--dtypes", "'float16'", "float64 | float32"]),
    ("bench-repeat", ["collision", "bench", "--out", "{tmp}/out", "--repeat", "0"], None,
     ["--repeat", "'0'", "integer >= 1"]),
    ("bench-sample", ["collision", "bench", "--out", "{tmp}/out", "--sample", "-1"], None,
     ["--sample", "'-1'", "integer >= 0"]),
    ("rates-kinds", ["collision", "rates", "--out", "{tmp}/out", "--kinds", "aniso,foo"], None,
     ["--kinds", "'aniso,foo'", "aniso | bkw"]),
    ("rates-half-width", ["collision", "rates", "--out", "{tmp}/out", "--half-width", "0"], None,
     ["--half-width", "'0'", "> 0"]),
    ("rates-T", ["collision", "rates", "--out", "{tmp}/out", "--T", "-1"], None, ["--T", "'-1'", "> 0"]),
    # --- rgf
    ("sweep-ny", SWEEP + ["--ny", "-1"], None, ["--ny", "'-1'", "integer >= 1"]),
    ("sweep-nz", SWEEP + ["--nz", "0"], None, ["--nz", "'0'", "integer >= 1"]),
    ("sweep-ne", ["rgf", "sweep", "--out", "{tmp}/out/s.csv", "--emin", "1", "--emax", "2", "--ne", "0"], None,
     ["--ne", "'0'", "integer >= 1"]),
    ("sweep-threads", SWEEP + ["--threads", "0"], None, ["unrecognized arguments", "--threads"]),
    ("sweep-emin", ["rgf", "sweep", "--out", "{tmp}/out/s.csv", "--emin", "nan", "--emax", "2", "--ne", "4"], None,
     ["--emin", "'nan'", "finite"]),
    ("sweep-emax", ["rgf", "sweep", "--out", "{tmp}/out/s.csv", "--emin", "1", "--emax", "inf", "--ne", "4"], None,
     ["--emax", "'inf'", "finite"]),
    ("sweep-emax-below", ["rgf", "sweep", "--out", "{tmp}/out/s.csv", "--emin", "2", "--emax", "1", "--ne", "4"],
     None, ["--emax", "1.0", "--emin 2.0"]),
    ("sweep-eta", SWEEP + ["--eta", "0"], None, ["--eta", "'0'", "> 0"]),
    ("sweep-chunk", SWEEP + ["--chunk", "2", "--n-chunks", "2"], None, ["--chunk", "2", "0 .. n_chunks-1 = 1"]),
    ("sweep-n-chunks", SWEEP + ["--n-chunks", "0"], None, ["--n-chunks", "'0'", "integer >= 1"]),
    ("sweep-ne-chunks", SWEEP + ["--n-chunks", "5"], None, ["--ne", "4", "--n-chunks 5"]),
    ("sweep-xuc", SWEEP + ["--xuc", "2,0"], None, ["--xuc", "'2,0'", "integers >= 1"]),
    ("sweep-batch", SWEEP + ["--batch", "-1"], None, ["--batch", "'-1'", "integer >= 0"]),
    ("sweep-set", SWEEP + ["--set", "foo"], None, ["--set", "'foo'", "jancu1998"]),
    ("sweep-backend", SWEEP + ["--backend", "foo"], None, ["--backend", "'foo'", "numpy"]),
    ("table1-threads", ["rgf", "table1", "--out", "{tmp}/out/t.csv", "--threads", "0"], None,
     ["--threads", "'0'", "integer >= 1"]),
    ("table1-rows", ["rgf", "table1", "--out", "{tmp}/out/t.csv", "--rows", "-5"], None, ["--rows", "'-5'", ">= 1"]),
    ("cost-sections", ["rgf", "cost", "--out", "{tmp}/out/c.csv", "--sections", "1x0"], None,
     ["--sections", "'1x0'", "NYxNZ"]),
    ("cases-cases", ["rgf", "cases", "--out", "{tmp}/out/c.csv", "--cases", "1,6"], None, ["--cases", "'1,6'", "1 .. 5"]),
    ("wire-sizes", ["rgf", "wire-gaps", "--out", "{tmp}/out/w.csv", "--sizes", "0"], None,
     ["--sizes", "'0'", "integers >= 1"]),
    ("scaling-workers", ["rgf", "scaling-run", "--workers", "0", "--chunks", "2", "--out", "{tmp}/out/s.csv",
                         "--chunk-dir", "{tmp}/out"], None, ["--workers", "'0'", "integer >= 1"]),
    # --- vecops
    ("vecops-reps", ["vecops", "config", "--set", "timing.reps=0"], None, ["'timing.reps'", "0", "integer >= 1"]),
    ("vecops-max-seconds", ["vecops", "config", "--set", "timing.max_seconds=.inf"], None,
     ["'timing.max_seconds'", "inf", "finite"]),
    ("vecops-json-nan", ["vecops", "config", "--config-json", '{"timing": {"max_seconds": NaN}}'], None,
     ["'timing.max_seconds'", "nan", "finite"]),
    ("vecops-json-bad", ["vecops", "config", "--config-json", "{bad"], None, ["--config-json", "not valid JSON"]),
    ("vecops-device", ["vecops", "bench", "--figure", "fig09", "--device", "tpu", "--out", "{tmp}/out/x.csv"], None,
     ["--device", "'tpu'", "gpu"]),
    ("vecops-seed", ["vecops", "config", "--set", "seed=-1"], None, ["'seed'", "-1", "non-negative integer"]),
    # --- BSP benchmark, profile and validation subcommands
    ("bench-case-malformed", ["bsp", "bench", "--case", "foo", "--out", "{tmp}/out"], None,
     ["'--case'", "'foo'", "MESH:BACKEND:THREADS:STEPS:WARMUP"]),
    ("bench-case-steps", ["bsp", "bench", "--case", "6x9x9x8x4:numpy:1:-2:0", "--out", "{tmp}/out"], None,
     ["'--case'", "-2", "STEPS >= 1"]),
    ("bench-case-backend", ["bsp", "bench", "--case", "6x9x9x8x4:torch:1:2:0", "--out", "{tmp}/out"], None,
     ["'--case'", "torch", "BACKEND one of"]),
    ("bench-timeout-nan", ["bsp", "bench", "--case", "6x9x9x8x4:numpy:1:2:0", "--timeout", "nan", "--out", "{tmp}/out"],
     None, ["--timeout", "'nan'", "finite number > 0"]),
    ("profile-reps", ["bsp", "kernel-profile", "--backend", "numba", "--reps", "-1", "--out", "{tmp}/out/kp.csv"], None,
     ["--reps", "'-1'", ">= 1"]),
    ("iter-kernels-nz", ["bsp", "iter-kernels", "--nz", "0,a", "--table1", "{tmp}/out/a.csv", "--table4",
                         "{tmp}/out/b.csv", "--run-json", "{tmp}/out/c.json"], None, ["--nz", "'0,a'", "integers >= 5"]),
    ("overlap-steps", ["bsp", "overlap", "--steps", "-1", "--csv", "{tmp}/out/a.csv", "--fig", "{tmp}/out/a.png"], None,
     ["--steps", "'-1'", ">= 2"]),
    ("krylov-tol", ["bsp", "krylov", "--out", "{tmp}/out", "--tol", "-1"], None, ["--tol", "'-1'", "> 0"]),
    ("compare-steps", ["bsp", "compare-backends", "--steps", "0"], None, ["--steps", "'0'", ">= 1"]),
    ("validate-missing", ["bsp", "validate", "{tmp}/nowhere"], None, ["run_dir", "nowhere", "profiles.csv",
                                                                      "config/coarse.yaml"]),
]

# run as `python -m solver` as well (the real entry point, its exit code and stderr)
SUBPROCESS = {"yaml-malformed", "config-nan", "relax-N-negative", "sweep-ne", "checkpoint-corrupt"}


def _tree(root: Path) -> dict:
    return {str(p.relative_to(root)): (p.read_bytes() if p.is_file() else None, p.stat().st_mode)
            for p in sorted(root.rglob("*"))}


def _argv(argv, tmp):
    return [a.replace("{tmp}", str(tmp)) for a in argv]


def _check(rc, out, err, words, tmp, before):
    lines = err.splitlines()
    assert rc == 2, err
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    assert "Traceback" not in err
    for w in words:
        assert w in lines[0], f"{w!r} not in {lines[0]!r}"
    assert out == "", out  # in particular no half-printed JSON from `bsp config`
    assert _tree(tmp) == before, "the command left something behind"


def test_battery_has_the_cases_of_the_issue():
    ids = {c[0] for c in CASES}
    assert len(ids) == len(CASES) >= 60
    assert {"yaml-malformed", "yaml-tabs", "yaml-not-utf8", "out-unwritable", "out-is-file", "checkpoint-corrupt",
            "t_end-nan", "t_end-inf", "config-nan", "relax-N-negative", "relax-backend", "relax-h-nan", "sweep-ny",
            "sweep-ne", "threads-zero", "memory"} <= ids


@pytest.mark.parametrize("argv,setup,words", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_input_is_one_line_and_exit_2(argv, setup, words, tmp_path, capsys):
    if setup:
        setup(tmp_path)
    before = _tree(tmp_path)
    rc = main(_argv(argv, tmp_path))
    cap = capsys.readouterr()
    _check(rc, cap.out, cap.err, words, tmp_path, before)


@pytest.mark.parametrize("case", [c for c in CASES if c[0] in SUBPROCESS], ids=lambda c: c[0])
def test_bad_input_from_the_command_line(case, tmp_path):
    _, argv, setup, words = case
    if setup:
        setup(tmp_path)
    before = _tree(tmp_path)
    env = dict(os.environ, PYTHONPATH=str(REPO))
    p = subprocess.run([sys.executable, "-m", "solver", *_argv(argv, tmp_path)], capture_output=True, text=True,
                       env=env, cwd=tmp_path)
    _check(p.returncode, p.stdout, p.stderr, words, tmp_path, before)
