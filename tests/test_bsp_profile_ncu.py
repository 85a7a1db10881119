"""Parsing of Nsight Compute's CSV (ncu-profile: Table 4 of 000, Tables 5-6 of 001 with hardware
counters) on a fixture with known numbers; no GPU and no ncu needed."""
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from solver.bsp import profile as P

REPO = Path(__file__).resolve().parents[1]
FIXTURE = REPO / "tests" / "data" / "ncu_details_fixture.csv"


@pytest.fixture(scope="module")
def launches():
    return P.parse_ncu_csv(FIXTURE.read_text())


def test_parse_units_separators_and_names(launches):
    """Five launches; every unit converted to the base unit (us, ms, Mbyte, Kbyte), thousands
    separators removed, 'n/a' -> NaN, kernel names cut before the template/argument list."""
    assert list(launches["id"]) == [0, 1, 2, 3, 4]
    assert list(launches["base"]) == ["bsp_weno_dx", "bsp_weno_dx", "bsp_scat_loss", "cr_update", "cupy_copy__float64_float64"]
    assert list(launches["duration_ns"]) == [100e3, 300e3, 500e3, 50e3, 25e3]
    assert list(launches["dram_bytes"]) == [200e6, 400e6, 1e6, 1e6, 50e6]
    assert launches.loc[0, "dadd"] == 1e6 and launches.loc[1, "dfma"] == 4.5e6
    assert np.isnan(launches.loc[3, "mem_throughput_pct"])


def test_kernel_table_known_rates(launches):
    k, ph = P.ncu_tables(launches, steps=1, copy_gbs=3000.0)
    assert list(k["kernel"]) == ["bsp_scat_loss", "bsp_weno_dx", "cr_update", "cupy_copy__float64_float64"]
    w = k.set_index("kernel").loc["bsp_weno_dx"]
    assert w["phase"] == "BTE" and w["launches_per_step"] == 2 and w["ms_per_step"] == pytest.approx(0.4)
    assert w["GFLOP_per_s"] == pytest.approx(45.0)        # (1e6 + 2e6 + 2 * 3e6 + 2 * 4.5e6) flop / 400 us
    assert w["dram_GB_per_s"] == pytest.approx(1500.0)    # 600 MB / 400 us
    assert w["pct_of_copy_bandwidth"] == pytest.approx(50.0)
    assert w["l2_hit_pct"] == pytest.approx(25.0) and w["global_load_efficiency_pct"] == pytest.approx(75.0)
    assert w["mem_throughput_pct"] == pytest.approx(50.0) and w["sm_throughput_pct"] == pytest.approx(70.0)
    assert w["paper001_kernel"] == "cuda_WENO_X" and w["paper001_v100_time_ms"] == 43.9
    assert w["paper000_k40c_kernel"] == "GPU_approx_partf_X" and w["paper000_k40c_GFLOP_per_s"] == 389
    s = k.set_index("kernel").loc["bsp_scat_loss"]
    assert s["GFLOP_per_s"] == pytest.approx(40.0) and s["dram_GB_per_s"] == pytest.approx(2.0)
    assert s["paper001_v100_sm_pct"] == 92.6 and s["paper000_k40c_ms_per_step"] == 32.8
    assert np.isnan(k.set_index("kernel").loc["cr_update", "mem_throughput_pct"])
    assert k.set_index("kernel").loc["cupy_copy__float64_float64", "phase"] == "other"
    p = ph.set_index("phase")
    assert set(p.index) == {"BTE", "ITER", "other"}
    assert p.loc["BTE", "ms_per_step"] == pytest.approx(0.9)
    assert p.loc["BTE", "sm_throughput_pct"] == pytest.approx(73e6 / 9e5)  # weighted by kernel time
    assert p.loc["BTE", "GFLOP_per_s"] == pytest.approx(38e6 / 9e5)
    assert p.loc["BTE", "paper001_v100_sm_pct"] == 68.6 and p.loc["ITER", "paper001_rtx3090_mem_pct"] == 22.1


def test_two_profiled_steps_halve_the_per_step_numbers(launches):
    k1, _ = P.ncu_tables(launches, steps=1)
    k2, _ = P.ncu_tables(launches, steps=2)
    assert np.allclose(k2["ms_per_step"], k1["ms_per_step"] / 2) and np.allclose(k2["GFLOP_per_s"], k1["GFLOP_per_s"])
    assert k1["pct_of_copy_bandwidth"].isna().all()  # no ceiling given


def test_no_header_is_an_error():
    with pytest.raises(ValueError, match="no ncu CSV header"):
        P.parse_ncu_csv("==PROF== ERROR: profiling is not supported on this device\n")


def test_command_profiles_one_step_of_the_target():
    cmd = P.ncu_command(["cfg.yaml", "--set", "mesh.NX=33", "--steps", "2"], ncu="/opt/ncu")
    assert cmd[0] == "/opt/ncu" and cmd[cmd.index("--profile-from-start") + 1] == "off"
    assert cmd[cmd.index("--metrics") + 1].split(",") == list(P.NCU_METRICS.values())
    assert cmd[-8:] == ["solver", "bsp", "ncu-step", "cfg.yaml", "--set", "mesh.NX=33", "--steps", "2"]


def test_cli_from_csv_writes_the_tables(tmp_path):
    ceil = tmp_path / "ceilings.csv"
    pd.DataFrame({"ceiling": ["device copy", "FP64"], "value": [3000.0, 30000.0], "unit": ["GB/s", "GFLOP/s"]}).to_csv(ceil, index=False)
    out = tmp_path / "ncu.csv"
    r = subprocess.run([sys.executable, "-m", "solver", "bsp", "ncu-profile", "--from-csv", str(FIXTURE), "--ceilings", str(ceil),
                        "--out", str(out)], cwd=REPO, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    k = pd.read_csv(out).set_index("kernel")
    assert k.loc["bsp_weno_dx", "pct_of_copy_bandwidth"] == pytest.approx(50.0)
    assert (tmp_path / "ncu_phases.csv").is_file() and (tmp_path / "ncu.run.json").is_file()


def _cuda_kernel_names():
    """Every __global__ function of solver/bsp/kernels/cuda/*.cu (comments removed first)."""
    import re

    names = set()
    for cu in (REPO / "solver" / "bsp" / "kernels" / "cuda").glob("*.cu"):
        text = re.sub(r"/\*.*?\*/|//[^\n]*", "", cu.read_text(), flags=re.S)
        names |= set(re.findall(r"__global__\s+void\s+(?:__launch_bounds__\s*\([^)]*\)\s*)?(\w+)\s*\(", text))
    return names


def test_every_cuda_kernel_has_a_phase():
    """ncu files a kernel missing from NCU_KERNELS under 'other': every kernel of the .cu files is a key."""
    names = _cuda_kernel_names()
    assert {"bsp_wphi_rk", "gj_inverse", "cr_eliminate", "bsp_weno_dx", "spin"} <= names and len(names) >= 20
    assert sorted(names - set(P.NCU_KERNELS)) == []
    assert P.NCU_KERNELS["bsp_wphi_rk"][0] == "BTE" and P.NCU_KERNELS["gj_inverse"][:2] == ("ITER", "solve_linsys")
