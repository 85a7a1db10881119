"""tools/bsp/spread_probe.py (issue #13, the process-to-process spread of the step): its host-side parts.
The device child needs CuPy; here: the argument parsing, the array walk on a stand-in cupy, the nvidia-smi
reader, the statistics and the summary on fake records with known answers."""
import importlib.util
import json
import math
import types
from pathlib import Path

import pytest

spec = importlib.util.spec_from_file_location("spread_probe", Path(__file__).parents[1] / "tools/bsp/spread_probe.py")
sp = importlib.util.module_from_spec(spec)
spec.loader.exec_module(sp)


def test_pearson_and_spread_known_answers():
    assert sp.pearson([1, 2, 3, 4], [2, 4, 6, 8]) == pytest.approx(1.0)
    assert sp.pearson([1, 2, 3, 4], [8, 6, 4, 2]) == pytest.approx(-1.0)
    assert sp.pearson([1, 2, 3], [1, 3, 2]) == pytest.approx(0.5)
    assert math.isnan(sp.pearson([1, 2], [1, 2]))  # fewer than 3 pairs
    assert math.isnan(sp.pearson([1, 2, 3], [5, 5, 5]))  # no variance
    assert sp.pearson([1, 2, None, 3, float("nan")], [1, 2, 7, 3, 9]) == pytest.approx(1.0)  # pairs with a gap dropped
    assert sp.spread([3.08, 3.28, 3.35]) == pytest.approx((3.35 - 3.08) / 3.28)  # §19's 8.2 %
    assert math.isnan(sp.spread([3.0]))
    assert sp._pct([1.0, 2.0, 3.0, 4.0, 5.0], 10) == pytest.approx(1.4)  # numpy's linear percentile


def test_read_smi_parses_samples_and_reasons(tmp_path):
    p = tmp_path / "smi.csv"
    p.write_text("2026/11/27 20:49:42.123, 1980, 3201, 612.34, 41, 0x0000000000000004\n"
                 "2026/11/27 20:49:42.223, 1755, 3201, [N/A], 42, 0x0000000000000000\n"
                 "garbage line\n")
    rows = sp.read_smi(p)
    assert len(rows) == 2
    assert rows[1]["t"] - rows[0]["t"] == pytest.approx(0.1, abs=1e-5)
    assert (rows[0]["sm"], rows[0]["power"], rows[0]["reasons"]) == (1980.0, 612.34, 4)
    assert math.isnan(rows[1]["power"]) and rows[1]["reasons"] == 0


def test_collect_arrays_walks_solver_objects_once():
    class Arr:
        def __init__(self, ptr, nbytes, shape):
            self.data = types.SimpleNamespace(ptr=ptr)
            self.nbytes, self.shape = nbytes, shape

    cp = types.SimpleNamespace(ndarray=Arr)
    Obj = type("Obj", (), {"__module__": "solver.bsp.fake"})
    Foreign = type("Foreign", (), {"__module__": "elsewhere"})
    big, small = Arr(0x2000000, 2**20, (512, 256)), Arr(0x1000, 8, (1,))
    o = Obj()
    o.Phi, o.tiny, o.again, o.me = big, small, big, o  # the same array twice, a cycle
    f = Foreign()
    f.hidden = Arr(0x9000000, 2**20, (1,))  # not a solver object: not walked
    ring = [Arr(0x4000000, 2**21, (2, 3)), Arr(0x3000000, 2**21, (2, 3))]
    arrays = sp.collect_arrays({"state": o, "cache": {("cuda.bte_graph", (2, 3)): ring}, "f": f}, cp)
    assert [a["ptr"] for a in arrays] == [0x2000000, 0x3000000, 0x4000000]  # sorted by address, once each
    assert arrays[0]["name"] == "state.Phi" and arrays[0]["shape"] == "512x256"
    assert arrays[1]["name"] == "cache[('cuda.bte_graph', (2, 3))][1]"


def test_summary_of_fake_records(tmp_path):
    assert sp.main(["fake", str(tmp_path), "--n", "8"]) == 0
    rows, text = sp.summarize(tmp_path)
    assert len(rows) == 8 and (tmp_path / "procs.csv").exists()
    ok = [r for r in rows if "step_med" in r]
    assert len(ok) == 7 and "FAILED: RuntimeError: fake failure" in text  # the failed process is listed, not fatal
    for r in ok:  # the fake's step scales as 1980 / clock; its window (0.7 s +- 0.15 s) holds 10 of the 100-ms samples
        assert r["step_med"] == pytest.approx(3.0 * 1980 / r["sm_med"], rel=0.011)
        assert r["smi_n"] == 10 and r["reasons"] == "sw_power" and r["frac_power_cap"] == 1.0
        assert r["bte_dev_ms"] == pytest.approx(3e-3 * (sum(r[f"k_{n}_us"] for n in
                                                            ("scat_gain", "scat_loss", "weno_dx", "wphi_rk")) + 6.0))
        assert r["host_gap"] == pytest.approx(0.02)
        assert r["big_off_mib"] == "0;130"
    assert sp.pearson([r["step_med"] for r in ok], [r["sm_med"] for r in ok]) < -0.99
    assert "smi sm clock med r = -1.00" in text
    assert "virtual layouts of the big arrays: 1 distinct" in text


def test_child_arguments(tmp_path):
    with pytest.raises(SystemExit):
        sp.main(["child"])  # --out is required
    (tmp_path / "proc_0.json").write_text(json.dumps({"label": "base", "ok": False, "error": "rc 124, no record"}))
    rows, text = sp.summarize(tmp_path)  # no smi.csv, one failed process: a table all the same
    assert rows[0]["error"] == "rc 124, no record" and "fewer than two processes" in text


def test_step_sets_pool_mode_on_stand_ins():
    """bte_graph off: epoch k holds 4k more Phi-sized arrays; per set the medians of its own steps (ms)."""
    class Arr:
        n = 0

        def __init__(self, shape):
            Arr.n += 1
            self.data = types.SimpleNamespace(ptr=0x1000 * Arr.n)
            self.shape = shape

    held = []
    cp = types.SimpleNamespace(float64="f8", empty=lambda shape, dtype: held.append(Arr(shape)) or held[-1])

    class Sim:
        def __init__(self):
            self.model = types.SimpleNamespace(device_cache={("cuda.weno", "x"): 1})
            self.state = types.SimpleNamespace(Phi=Arr((2, 3)), newton_iterations=3)
            self.timer = types.SimpleNamespace(steps=[])

        def step(self):  # the step takes 3 ms + 0.1 ms per held array; the state's Phi moves each step
            t = 3e-3 + 1e-4 * len(held)
            self.timer.steps.append({"step": t, "step/BTE": t - 1e-3, "step/ITER": 1e-3})
            self.state.Phi = Arr((2, 3))

    out = sp.step_sets(Sim(), cp, nsets=3, rounds=2, n=4, warm=1)
    assert out["mode"] == "pool" and out["order"] == [0, 1, 2] and len(held) == 8
    assert out["step_ms"] == pytest.approx([3.0, 3.4, 3.8])
    assert out["bte_ms"] == pytest.approx([2.0, 2.4, 2.8]) and out["iter_ms"] == pytest.approx([1.0] * 3)
    assert len(set(out["phi_ptr"])) == 3


def test_summary_command_prints_the_short_table(tmp_path, capsys):
    sp.fake(tmp_path, n=26)
    assert sp.main(["summary", str(tmp_path), "--full", str(tmp_path / "table_full.txt")]) == 0
    text = capsys.readouterr().out
    assert len(text) < 8000  # fits the device call's 12,000-character tail with room for the log before it
    assert text.count("\n") > 40 and "FAILED: RuntimeError: fake failure" in text
    assert "proc  0 shift3" in (tmp_path / "table_full.txt").read_text()  # the per-process step sets: full table only
    assert "proc  0 shift3" not in text
