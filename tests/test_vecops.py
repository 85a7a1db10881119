"""vecops (paper 003) on the CPU: references against NumPy/float64, matrix generator, harness, config, CLI."""
import json

import numpy as np
import pandas as pd
import pytest

from solver.config import ConfigError
from solver.vecops import cpu as C
from solver.vecops import numba_cpu as NB
from solver.vecops import matrices as Mx
from solver.vecops.bench import capped_reps, time_cpu
from solver.vecops.config import resolve

TINY = {
    "timing": {"reps": 5, "warmup": 1, "max_seconds": 0.01, "min_reps": 2, "cpu_reps": 5,
               "cpu_max_seconds": 0.01, "cpu_min_reps": 2},
    "axpy": {"sizes": [1000, 5000]},
    "dot": {"n_blocks_sweep": 4096, "block_sizes": [32, 64], "sizes": [1000, 7777]},
    "spmv_vector": {"rows": 128, "nnz_per_row": 8, "block_sizes": [4, 32]},
    "spmv_scalar": {"matrices": {"M001": [100, 10], "M002": [300, 30]}},
    "crossover": {"nnz": 1024, "nnz_per_row": [1, 4]},
    "ceilings": {"copy_n": 1000, "cpu_copy_n": 10000},
}


def test_defaults_are_the_papers():
    cfg = resolve({})
    assert cfg["precision"] == "float32"
    assert cfg["timing"]["reps"] == 10000
    assert cfg["axpy"]["sizes"] == [1000, 10000, 100000, 1000000, 10000000, 50000000]
    assert cfg["dot"]["n_blocks_sweep"] == 2**20 and cfg["dot"]["block_sizes"] == [32, 64, 128, 256, 512, 1024]
    assert (cfg["spmv_vector"]["rows"], cfg["spmv_vector"]["nnz_per_row"]) == (2**14, 128)
    m = cfg["spmv_scalar"]["matrices"]
    nnz = {k: r * c for k, (r, c) in m.items()}
    assert nnz == {"M001": 1000, "M002": 10000, "M003": 100000, "M004": 10**6, "M005": 10**7, "M006": 5 * 10**7}


@pytest.mark.parametrize("bad, key", [
    ({"precision": "float16"}, "precision"),
    ({"timing": {"reps": 0}}, "timing.reps"),
    ({"dot": {"block_sizes": [48]}}, "dot.block_sizes.0"),
    ({"axpy": {"sizez": [1]}}, "axpy"),
    ({"spmv_scalar": {"matrices": {"M9": [10, 20]}}}, "spmv_scalar.matrices.M9"),
])
def test_config_errors_name_the_key(bad, key):
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        resolve(bad)


def test_matrix_generator_is_deterministic_and_exact():
    A = Mx.fixed_row_csr(500, 37, seed=7, name="M")
    B = Mx.fixed_row_csr(500, 37, seed=7, name="M")
    Cm = Mx.fixed_row_csr(500, 37, seed=8, name="M")
    assert np.array_equal(A.indices, B.indices) and np.array_equal(A.data, B.data)
    assert not np.array_equal(A.indices, Cm.indices)
    assert A.nnz == 500 * 37 and A.indptr.dtype == np.int32 and A.indices.dtype == np.int32
    assert np.array_equal(np.diff(A.indptr), np.full(500, 37))
    cols = A.indices.reshape(500, 37)
    assert (np.diff(cols, axis=1) > 0).all()          # sorted and distinct within each row
    assert cols.min() >= 0 and cols.max() < 500
    assert cols.max() > 450 and cols.min() < 50       # spread over the columns
    assert A.data.dtype == np.float32 and 0.5 <= A.data.min() and A.data.max() < 1.5
    # full rows: every column exactly once
    D = Mx.fixed_row_csr(64, 64, seed=1)
    assert (D.indices.reshape(64, 64) == np.arange(64)).all()
    # bytes model: AA + JA + IA + x + r
    assert A.bytes_moved() == A.nnz * 8 + 501 * 4 + 500 * 4 + 500 * 4


def test_csr_example_of_the_paper():
    # the 4x4 example of the paper's CSR section (1-based there, 0-based here)
    AA = np.array([1, 2, 3, 4, 5, 6, 7, 8, 9], np.float32)
    JA = np.array([0, 1, 1, 2, 2, 3, 1, 2, 3], np.int32)
    IA = np.array([0, 2, 4, 6, 9], np.int32)
    A = Mx.CSR("paper", 4, 4, 0, AA, JA, IA)
    v = np.array([1, 2, 3, 4], np.float32)
    dense = np.array([[1, 2, 0, 0], [0, 3, 4, 0], [0, 0, 5, 6], [0, 7, 8, 9]], np.float32)
    r = np.empty(4, np.float32)
    assert np.array_equal(NB.spmv(A, v, r), dense @ v)
    assert np.array_equal(C.spmv_ref(A, v), dense @ v)
    assert np.allclose(C.spmv_exact(A, v), [5, 18, 39, 74])


@pytest.mark.parametrize("dtype, tol", [("float32", 1e-6), ("float64", 1e-14)])
def test_cpu_kernels_match_float64(dtype, tol):
    n = 100_003
    x, y = Mx.random_vectors(n, 3, dtype)
    r = np.empty_like(x)
    assert C.rel_err(NB.axpy(2.5, x, y, r), C.axpy_exact(2.5, x, y)) < tol
    assert C.rel_err(C.axpy_ref(2.5, x, y), C.axpy_exact(2.5, x, y)) < tol
    exact = C.dot_exact(x, y)
    assert C.rel_err(NB.dot(x, y), exact) < tol
    assert C.rel_err(C.dot_ref(x, y), exact) < 1e-5 if dtype == "float32" else tol
    A = Mx.fixed_row_csr(2000, 50, seed=5, dtype=dtype)
    (v,) = Mx.random_vectors(2000, 5, dtype, count=1)
    out = np.empty(2000, dtype)
    ex = C.spmv_exact(A, v)
    assert C.rel_err(NB.spmv(A, v, out), ex) < 10 * tol
    assert C.rel_err(C.spmv_ref(A, v), ex) < 10 * tol


def test_dot_known_answer():
    n = 1 << 16
    x = np.ones(n, np.float32)
    y = np.arange(n, dtype=np.float32) % 7
    assert NB.dot(x, y) == pytest.approx(float(y.astype(np.float64).sum()), rel=0, abs=0)


def test_timing_harness_positive_finite():
    calls = []
    t = time_cpu(lambda: calls.append(sum(range(200))), reps=7, warmup=2, max_seconds=10, min_reps=2)
    assert t["reps"] == 7 and len(calls) == 9
    for k in ("mean_s", "median_s", "min_s", "max_s"):
        assert np.isfinite(t[k]) and t[k] > 0
    assert t["min_s"] <= t["median_s"] <= t["max_s"]
    assert capped_reps(10000, 50, 1.0, 1e-3) == 1000
    assert capped_reps(10000, 50, 1.0, 1e-6) == 10000
    assert capped_reps(10000, 50, 1.0, 1.0) == 50


@pytest.mark.parametrize("fig", ["fig09", "fig12", "fig14"])
def test_cpu_sweeps_tidy(fig):
    from solver.vecops.sweeps import COLUMNS, cpu_sweep

    df = cpu_sweep(fig, resolve(TINY))
    assert list(df.columns) == COLUMNS
    assert set(df.impl) == ({"numpy", "numba"} if fig != "fig14" else {"scipy", "numba"})
    assert (df.median_s > 0).all() and df.median_s.notna().all()
    assert (df.rel_err < 1e-5).all()
    assert (df.gbytes_s > 0).all()
    if fig == "fig09":
        assert sorted(df.n.unique()) == [1000, 5000]
        assert (df.bytes == 12 * df.n).all() and (df.flops == 2 * df.n).all()


def test_cli_bench_ceilings_table1_plot(tmp_path):
    from solver.cli import main

    js = json.dumps(TINY)
    for fig, name in (("fig09", "fig09_axpy"), ("fig13", "fig13_spmv_vector")):
        out = tmp_path / f"{name}.cpu.csv"
        assert main(["vecops", "bench", "--figure", fig, "--device", "cpu", "--config-json", js, "--out", str(out)]) == 0
        rec = json.loads((tmp_path / f"{name}.cpu.run.json").read_text())
        assert rec["figure"] == fig and rec["config"]["timing"]["reps"] == 5 and rec["max_rel_err"] < 1e-5
    assert main(["vecops", "ceilings", "--device", "cpu", "--config-json", js, "--out", str(tmp_path / "ceilings.cpu.csv")]) == 0
    ce = pd.read_csv(tmp_path / "ceilings.cpu.csv")
    assert (ce.value > 0).all() and ce.check.all()
    assert main(["vecops", "table1", "--config-json", js, "--out", str(tmp_path / "table1.csv")]) == 0
    t1 = pd.read_csv(tmp_path / "table1.csv")
    assert "Cache line size" in set(t1["item"])
    assert main(["vecops", "plot", "--config-json", js, "--dir", str(tmp_path)]) == 0
    for f in ("fig09_axpy.png", "fig13_spmv_vector.png", "roofline.png", "table1.md"):
        assert (tmp_path / f).stat().st_size > 0
    assert main(["vecops", "bench", "--figure", "crossover", "--device", "cpu", "--config-json", js,
                 "--out", str(tmp_path / "x.csv")]) == 2
    assert main(["vecops", "bench", "--figure", "fig09", "--device", "cpu", "--config-json", '{"precision": "half"}',
                 "--out", str(tmp_path / "y.csv")]) == 2


def test_backend_tables():
    import importlib.util

    from solver.backend import BackendUnavailable
    from solver.vecops import REGISTRY, backend_table

    assert backend_table("numba") is REGISTRY.table("numba")
    assert sorted(backend_table("numba")) == ["axpy", "copy", "dot", "spmv"]
    assert REGISTRY.describe(REGISTRY.lookup("numba", "dot")) == "solver.vecops.numba_cpu.dot"
    if importlib.util.find_spec("cupy") is None:
        with pytest.raises(BackendUnavailable, match="'cupy'"):
            backend_table("cupy")
