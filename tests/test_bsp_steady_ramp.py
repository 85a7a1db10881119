"""The adaptive bias ramp of a continued run (Simulation._retry_ramp, RAMP_RETRIES; docs/iv.md §8):
a negative-density fault during the ramp restarts the run from its source with twice the ramp time.
The fault is a stand-in (the real one needs thousands of steps on 3x33x33x24x8): a negative density
raised while the ramp is shorter than NEED_PS and past its middle.  Known answers: the run recovers
with the ramp of the first attempt that does not fault, records the faults, and gives the very
scalars of a run started with that ramp (the restart leaves no state behind); without retries, or
past their limit, the fault stands."""
import json

import pandas as pd
import pytest

from solver.backend import get_backend
from solver.bsp import simulation
from solver.bsp.model import load
from solver.bsp.simulation import Simulation
from solver.config import RunFault

TINY = ["mesh.N_sbn=3", "mesh.NX=9", "mesh.NZ=9", "mesh.NW=12", "mesh.NPHI=8", "output.progress=false",
        "numerics.backend=numpy", "output.checkpoint_every_steps=0"]
RAMP = 0.002  # ps
NEED_PS = 4 * RAMP  # the stand-in faults every ramp shorter than this


def run(tmp_path, name, *extra):
    cfg = load(None, TINY + list(extra))
    sim = Simulation(cfg, get_backend("numpy"), tmp_path / name, progress=False)
    return sim, sim.run()


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    root = tmp_path_factory.mktemp("ramp")
    run(root, "src", "bias.V_G=0.5", "bias.V_DS=0.1", "time.steps=3", "time.t_end_ps=null",
        "continuation.save_final_state=true")
    return root / "src"


@pytest.fixture
def stand_in(monkeypatch):
    check = Simulation._check_density

    def fault_on_fast_ramps(self, st, stage, probe=None):
        check(self, st, stage, probe)
        t_ps = st.t * self.model.scales.t * 1e12
        if self.source is not None and self.source["ramp_ps"] < NEED_PS * (1 - 1e-9) and t_ps > self.source["ramp_ps"] / 2:
            raise self._fault(stage, "DENS", "negative density (stand-in) at x node 4")

    monkeypatch.setattr(Simulation, "_check_density", fault_on_fast_ramps)


def cont(source, ramp):
    return ["bias.V_G=0.3", "bias.V_DS=0.1", "time.t_end_ps=0.02", "time.steps=null", "output.checkpoint_every_steps=2",
            "output.every_steps=3",
            f"continuation.init_from={source}", f"continuation.ramp_ps={ramp}"]


def test_fault_during_the_ramp_retries_with_a_slower_ramp(source, stand_in, tmp_path):
    sim, rec = run(tmp_path, "adaptive", *cont(source, RAMP))
    c = rec["summary"]["continuation"]
    assert c["ramp_ps"] == pytest.approx(NEED_PS) and c["ramp_ps_config"] == RAMP
    assert len(c["ramp_faults"]) == 2 and c["ramp_faults"][0].startswith("ramp 0.002 ps: step ")
    assert "negative density (stand-in)" in c["ramp_faults"][1]
    assert rec["config"]["continuation"]["ramp_ps"] == RAMP  # the configuration (and its hash) is unchanged
    assert json.loads((tmp_path / "adaptive" / "run.json").read_text())["summary"]["continuation"] == c
    assert rec["summary"]["t_end_s"] * 1e12 == pytest.approx(0.02)
    # the restart leaves nothing of the failed attempts behind: the scalars of a run started with that ramp
    _, direct = run(tmp_path, "direct", *cont(source, NEED_PS))
    a = pd.read_csv(tmp_path / "adaptive" / "scalars.csv")
    b = pd.read_csv(tmp_path / "direct" / "scalars.csv")
    pd.testing.assert_frame_equal(a, b, check_exact=True)
    snaps = [sorted(p.name for p in (tmp_path / r / "snapshots").glob("*.h5")) for r in ("adaptive", "direct")]
    assert snaps[0] == snaps[1] and len(snaps[0]) > 2  # the snapshots of a run started with that ramp
    assert not (tmp_path / "adaptive" / "checkpoint.h5").exists()
    assert "ramp_faults" not in direct["summary"]["continuation"]


def test_without_retries_the_fault_stands(source, stand_in, tmp_path, monkeypatch):
    monkeypatch.setattr(simulation, "RAMP_RETRIES", 0)  # the behaviour before the adaptive ramp
    with pytest.raises(RunFault, match="negative density"):
        run(tmp_path, "old", *cont(source, RAMP))
    monkeypatch.setattr(simulation, "RAMP_RETRIES", 1)  # one doubling is not enough for the stand-in
    with pytest.raises(RunFault, match="negative density"):
        run(tmp_path, "one", *cont(source, RAMP))


def test_no_retry_for_a_ramp_over_half_the_run(source, stand_in, tmp_path):
    """The doubled ramp must fit in half the time limit: 0.016 ps > 0.024 / 2 stops at 0.008 ps."""
    global NEED_PS
    with pytest.raises(RunFault, match="negative density"):
        old = NEED_PS
        NEED_PS = 8 * RAMP  # faults with 0.002, 0.004 and 0.008 ps; 0.016 ps would pass but is not tried
        try:
            run(tmp_path, "long", *[x if not x.startswith("time.t_end_ps") else "time.t_end_ps=0.024"
                                    for x in cont(source, RAMP)])
        finally:
            NEED_PS = old
