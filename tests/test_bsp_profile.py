"""solver.bsp.profile (the flop/byte model of the BTE kernels, hand-counted on a small mesh) and
solver.bsp.bench's steps bench (one process per case: steps.csv, steps_spread.csv, run.json)."""
import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from solver.backend import get_backend
from solver.bsp import bench, profile
from solver.bsp.model import Model, load

TINY = ["mesh.N_sbn=2", "mesh.NX=9", "mesh.NZ=17", "mesh.NW=12", "mesh.NPHI=8"]


@pytest.fixture(scope="module")
def tiny():
    return Model(load(None, TINY))


def test_counts_by_hand(tiny):
    """NX 9, N_sbn 2, NW 12, NPHI 8: nodes = 9*3*2*12*8 = 5184; 5 branches."""
    c = profile.counts(tiny, 5)
    # WENO: Phi read + term written, a1 / a3_factor (3*12*8 = 288), then x: 4 contact densities
    # (3*2 each = 24), w and phi: deps (9*3*2 = 54)
    assert c["WENO_x"] == (57 * 5184, 8 * (2 * 5184 + 288 + 24))
    assert c["WENO_w"] == (58 * 5184, 8 * (2 * 5184 + 288 + 54))
    assert c["WENO_phi"] == (118 * 5184, 8 * (2 * 5184 + 288 + 54))
    # scattering: PhiHat / G / Lc 9*3*2*12 = 648 values, eps 54, W 9*3*2*3*2 = 324, s_w 36, w 12;
    # inner (output, branch, p', l) = 5 branches * 9 * 2 * 2 * 12 = 2160, pairs 5 * 9 * 2 * 2 = 180
    assert c["scat_gain"] == (8 * 2160 + 3 * 180 + 648, 8 * (648 + 54 + 324 + 36 + 648))
    assert c["scat_loss"] == (5 * 2160 + 3 * 180, 8 * (54 + 324 + 12 + 648))


def test_count_bytes_match_the_arrays_the_kernels_read(tiny):
    """eps (NX, 3, N_sbn) and W (NX, 3, N_sbn, 3, N_sbn): the bytes of loss are theirs + w + Lc."""
    be = get_backend("numpy")
    d = profile.stage(tiny, be)
    lc = profile.phase_calls(tiny, be, d)["scat_loss"]()
    w = tiny.on(be, "w")
    assert profile.counts(tiny, 5)["scat_loss"][1] == d["eps"].nbytes + d["W"].nbytes + w.nbytes + lc.nbytes
    g = profile.phase_calls(tiny, be, d)["scat_gain"]()
    s_w = tiny.on(be, "s_w")
    assert profile.counts(tiny, 5)["scat_gain"][1] == (d["PhiHat"].nbytes + d["eps"].nbytes + d["W"].nbytes
                                                        + s_w.nbytes + g.nbytes)


def test_kernel_profile_numpy_reference_rows():
    pytest.importorskip("numba")
    df, ceil, rec = profile.kernel_profile(None, TINY, "numba", threads=(1,), reps=1, copy_mib=1, gemm_n=64)
    assert list(df.kernel[df.variant == "array"]) == list(profile.BTE_KERNELS)
    assert list(df.kernel[df.variant == "numba"]) == list(profile.BTE_KERNELS)
    assert (df.max_rel_diff_vs_array < 1e-12).all()
    assert (df.seconds_per_call > 0).all() and (df.speedup_vs_array[df.variant == "array"] == 1.0).all()
    np.testing.assert_allclose(df.GB_per_s, df.bytes_per_call / df.seconds_per_call / 1e9)
    assert list(ceil.unit) == ["GB/s", "GB/s", "GFLOP/s"] and (ceil.value > 0).all()
    assert df.mesh.iloc[0] == "2x9x17x12x8" and rec["config"]["backend"] == "numba"


# ------------------------------------------------------------------------------ steps bench
def test_case_parse_round_trip():
    c = bench.Case.parse("6x65x65x300x48:numba:8:10:2")
    assert (c.mesh, c.backend, c.threads, c.steps, c.warmup) == ("6x65x65x300x48", "numba", 8, 10, 2)
    assert str(c) == "6x65x65x300x48:numba:8:10:2"
    assert "mesh.NZ=65" in c.overrides() and "time.steps=12" in c.overrides()
    with pytest.raises(ValueError):
        bench.Case.parse("6x65x65x300x48:numba:8")


def test_summarize_medians_and_spread():
    case = bench.Case.parse("3x9x9x12x8:numpy:1:4:1")
    steps = [{"step": s, "step/BTE": s / 2, "step/DENS": 0.001, "step/ITER": s / 4, "newton": n}
             for s, n in ((0.010, 3), (0.030, 4), (0.020, 5), (0.040, 8))]
    row, spread = bench.summarize(case, {"startup_s": 1.5, "steps": steps}, "abc")
    assert row["step_ms"] == pytest.approx(25.0) and row["bte_ms"] == pytest.approx(12.5)
    assert row["iter_ms"] == pytest.approx(6.25) and row["dens_ms"] == pytest.approx(1.0)
    assert row["newton_per_step"] == 5.0 and row["startup_s"] == 1.5 and row["commit"] == "abc"
    assert spread["step_ms_min"] == pytest.approx(10.0) and spread["step_ms_max"] == pytest.approx(40.0)
    assert spread["step_ms_p10"] == pytest.approx(13.0) and spread["step_ms_p90"] == pytest.approx(37.0)
    failed, note = bench.summarize(case, None, "abc", "exit 1: boom")
    assert failed["step_ms"] is None and failed["startup_s"] is None and note["note"] == "exit 1: boom"


def _case_folder(folder, text, ok, cuda=None, slot=None):
    """A one-case bench folder as `bsp bench --case TEXT --out FOLDER` writes it (synthetic times)."""
    case = bench.Case.parse(text)
    steps = [{"step": 0.01 * (i + 1), "step/BTE": 0.004, "step/DENS": 0.001, "step/ITER": 0.003, "newton": 4}
             for i in range(3)]
    row, spread = bench.summarize(case, {"startup_s": 2.0, "steps": steps} if ok else None, "abc",
                                  "" if ok else "exit 3: fault")
    rec = {"hostname": "h", "threads": {"CUDA_VISIBLE_DEVICES": cuda}, "cases": [{**dataclasses.asdict(case), "ok": ok}]}
    if slot:
        rec["gpu_slot"] = slot
    bench.write_bench(folder, pd.DataFrame([row], columns=bench.STEPS_COLUMNS),
                      pd.DataFrame([spread], columns=bench.SPREAD_COLUMNS), rec)
    return str(folder)


def test_bench_merge_keeps_the_order_and_each_case_gpu(tmp_path):
    """rule bsp_bench: the one-case folders of rules bsp_bench_case[_gpu] merged in the config's
    order, each case's record naming the GPU it ran on; exit 1 only when every case failed."""
    dirs = [_case_folder(tmp_path / "a", "3x9x9x12x8:cupy:1:3:1", True, "2", {"mode": "exclusive", "gpus": "2"}),
            _case_folder(tmp_path / "b", "3x9x9x12x8:numba:2:3:1", False),
            _case_folder(tmp_path / "c", "6x9x9x12x8:cupy:1:3:1", True, "0", {"mode": "exclusive", "gpus": "0"})]
    root = Path(__file__).resolve().parents[1]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")]))
    r = subprocess.run([sys.executable, "-m", "solver", "bsp", "bench-merge", *dirs, "--out", str(tmp_path / "m")],
                       capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr
    s = pd.read_csv(tmp_path / "m" / "steps.csv")
    assert list(s.mesh) == ["3x9x9x12x8", "3x9x9x12x8", "6x9x9x12x8"] and list(s.backend) == ["cupy", "numba", "cupy"]
    assert s.step_ms[0] == pytest.approx(20.0) and pd.isna(s.step_ms[1])
    sp = pd.read_csv(tmp_path / "m" / "steps_spread.csv")
    assert sp.note[1] == "exit 3: fault"
    rec = json.loads((tmp_path / "m" / "run.json").read_text())
    assert [(c["backend"], c["CUDA_VISIBLE_DEVICES"], (c["gpu_slot"] or {}).get("gpus")) for c in rec["cases"]] == \
        [("cupy", "2", "2"), ("numba", None, None), ("cupy", "0", "0")]
    assert rec["config"]["cases"] == ["3x9x9x12x8:cupy:1:3:1", "3x9x9x12x8:numba:2:3:1", "6x9x9x12x8:cupy:1:3:1"]
    r = subprocess.run([sys.executable, "-m", "solver", "bsp", "bench-merge", dirs[1], "--out", str(tmp_path / "f")],
                       capture_output=True, text=True, env=env)
    assert r.returncode == 1


def test_bench_tiny_mesh_numpy(tmp_path):
    """Two cases in their own processes, one of them failing in its process (NZ too small for
    N_sbn: the config check of the case)."""
    cases = [bench.Case.parse("3x9x9x12x8:numpy:1:2:1"), bench.Case.parse("6x9x7x12x8:numpy:1:2:1")]
    steps, spread, records = bench.bench(None, ["output.checkpoint_every_steps=0"], cases, timeout=300, log=sys.stderr)
    bench.write_bench(tmp_path, steps, spread, {"cases": records})
    s = pd.read_csv(tmp_path / "steps.csv")
    assert list(s.columns) == ["mesh", "backend", "threads", "steps", "step_ms", "bte_ms", "dens_ms", "iter_ms",
                               "newton_per_step", "startup_s", "commit"]
    ok = s.iloc[0]
    assert ok["mesh"] == "3x9x9x12x8" and ok["backend"] == "numpy" and ok["threads"] == 1 and ok["steps"] == 2
    for col in ("step_ms", "bte_ms", "dens_ms", "iter_ms", "newton_per_step", "startup_s"):
        assert ok[col] > 0, col
    assert ok["step_ms"] >= ok["bte_ms"] + ok["iter_ms"] * 0.5  # the step holds BTE and ITER
    assert s.iloc[1][["step_ms", "startup_s"]].isna().all()
    sp = pd.read_csv(tmp_path / "steps_spread.csv")
    assert sp.step_ms_min[0] <= sp.step_ms_median[0] <= sp.step_ms_max[0]
    assert "mesh.NZ" in sp.note[1] and pd.isna(sp.note[0])
    rec = json.loads((tmp_path / "run.json").read_text())
    assert [c["ok"] for c in rec["cases"]] == [True, False]
    assert rec["cases"][0]["speculation"] is None  # numerics.bte_speculate: off on numpy (auto)
