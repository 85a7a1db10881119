"""solver.compare (machines side by side) on two synthetic machine folders with known ratios."""
import numpy as np
import pandas as pd
import pytest

from solver import compare as C


def _machine(root, tag, copy_gpu, fp64_gpu, copy_cpu, step_ms):
    v = root / tag / "vecops"
    v.mkdir(parents=True)
    pd.DataFrame({"device_kind": "gpu", "quantity": ["copy_bandwidth", "fma_peak_float32"], "value": [copy_gpu, 4 * fp64_gpu],
                  "unit": ["GB/s", "GFLOP/s"]}).to_csv(v / "ceilings.gpu.csv", index=False)
    pd.DataFrame({"device_kind": "cpu", "quantity": ["copy_bandwidth"], "value": [copy_cpu], "unit": ["GB/s"]}).to_csv(
        v / "ceilings.cpu.csv", index=False)
    k = root / tag / "bsp" / "kernels"
    k.mkdir(parents=True)
    pd.DataFrame({"ceiling": ["device copy (cupy.copyto)", "FP64 FMA chains (RawKernel)", "FP64 GEMM (8192 x 8192 matmul)"],
                  "value": [copy_gpu * 1.1, fp64_gpu, 2 * fp64_gpu], "unit": ["GB/s", "GFLOP/s", "GFLOP/s"]}).to_csv(
        k / "kernel_profile_ceilings.csv", index=False)
    b = root / tag / "bsp" / "bench"
    b.mkdir(parents=True)
    pd.DataFrame({"mesh": ["6x65x65x300x48", "6x65x65x300x48"], "backend": ["cupy", "numba"], "threads": [1, 16],
                  "steps": 20, "step_ms": step_ms}).to_csv(b / "steps.csv", index=False)


@pytest.fixture
def root(tmp_path):
    _machine(tmp_path, "gpu-a", 3000.0, 30000.0, 80.0, [20.0, 500.0])
    _machine(tmp_path, "gpu-b", 4500.0, 33000.0, 100.0, [16.0, 400.0])
    (tmp_path / "compare").mkdir()  # the comparison's own folder is no machine
    return tmp_path


def test_ceilings_prefer_vecops_copy_and_take_the_bsp_fp64(root):
    c = pd.DataFrame(C.ceilings(root, "gpu-b")).set_index("device_kind")
    assert c.loc["gpu", "copy_GB_per_s"] == 4500.0 and c.loc["gpu", "fp64_GFLOP_per_s"] == 33000.0
    assert c.loc["gpu", "fp32_GFLOP_per_s"] == 4 * 33000.0 and c.loc["cpu", "copy_GB_per_s"] == 100.0
    assert np.isnan(c.loc["cpu", "fp64_GFLOP_per_s"])  # no CPU GEMM ceiling measured


def test_study_table_ratios(root):
    assert C.machines(root) == ["gpu-a", "gpu-b"]
    t = C.study_table(root, "bsp", reference=["gpu-a"]).set_index(["case", "machine"])
    g = t.loc[("step 6x65x65x300x48 cupy_t1 (bench)", "gpu-b")]
    assert g["reference_machine"] == "gpu-a" and g["speedup_vs_reference"] == pytest.approx(20 / 16)
    assert g["copy_ratio_vs_reference"] == pytest.approx(1.5) and g["fp64_ratio_vs_reference"] == pytest.approx(1.1)
    c = t.loc[("step 6x65x65x300x48 numba_t16 (bench)", "gpu-b")]
    assert c["device_kind"] == "cpu" and c["speedup_vs_reference"] == pytest.approx(1.25)
    assert c["copy_ratio_vs_reference"] == pytest.approx(100 / 80)
    assert t.loc[("step 6x65x65x300x48 cupy_t1 (bench)", "gpu-a"), "speedup_vs_reference"] == 1.0


def test_reference_order_and_empty_studies(root):
    t = C.study_table(root, "bsp", reference=["gpu-b"])
    assert set(t["reference_machine"]) == {"gpu-b"}
    assert len(C.study_table(root, "rgf")) == 0
    fig = C.plot_study(C.study_table(root, "bsp"), "bsp")
    assert len(fig.axes[0].patches) == 2 * 2  # two shared cases x two machines


def test_reference_row_stays_whole_with_a_nan(root):
    """The reference machine's value of a case is NaN: its row is the reference as it is (speedup NaN),
    not its name with the next machine's value."""
    for tag, ms in (("gpu-a", np.nan), ("gpu-b", 2.0)):
        pd.DataFrame({"variant": ["cuda"], "kernel": ["WENO_x"], "threads": [1], "mesh": ["3x9x9x12x8"],
                      "ms_per_step": [ms]}).to_csv(root / tag / "bsp" / "kernels" / "kernel_profile.csv", index=False)
    t = C.study_table(root, "bsp", reference=["gpu-a"]).set_index(["case", "machine"])
    k = t.loc["kernel WENO_x cuda_t1 3x9x9x12x8"]
    assert list(k["reference_machine"]) == ["gpu-a", "gpu-a"] and k["speedup_vs_reference"].isna().all()
    assert t.loc[("step 6x65x65x300x48 cupy_t1 (bench)", "gpu-b"), "speedup_vs_reference"] == pytest.approx(20 / 16)
