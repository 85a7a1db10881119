"""The contact-line monitor (solver/bsp/output.py, docs/iv.md §10): the most negative Phi on the
two contact nodes relative to the largest there, per scalars row, and run.json's summary of it."""
import json

import numpy as np

from solver.bsp import output


def test_contact_lines_reads_only_the_two_contact_nodes():
    Phi = np.ones((5, 3, 2, 4, 6))
    Phi[2, 1, 0, 3, 1] = -7.0  # interior: not a contact line
    Phi[4, 2, 1, 0, 3] = -0.25  # drain contact
    Phi[0, 0, 0, 1, 0] = 4.0  # source contact, the largest
    c = output.contact_lines(np, Phi)
    assert c.tolist() == [-0.25, 4.0]
    assert output.contact_phi_min(c) == -0.0625


def test_contact_summary_finds_the_worst_row_and_flags_it():
    rows = [{"step": s, "time_s": s * 1e-16, "contact_phi_min": v}
            for s, v in [(0, 1e-20), (10, -2e-6), (20, -4e-3), (30, -5e-4)]]
    s = output.contact_summary(rows)
    assert s["phi_min_rel"] == -4e-3 and s["step"] == 20 and s["final"] == -5e-4 and s["warning"] is True
    assert abs(s["t_ps"] - 2e-3) < 1e-15
    assert output.contact_summary(rows[:2])["warning"] is False
    assert output.contact_summary([{"step": 0, "time_s": 0.0}]) is None


def test_run_records_the_monitor(tmp_path):
    from solver.bsp.model import load
    from solver.bsp.simulation import Simulation

    cfg = load(None, ["mesh.N_sbn=2", "mesh.NX=9", "mesh.NZ=9", "mesh.NW=8", "mesh.NPHI=8", "time.steps=6",
                      "time.t_end_ps=null", "numerics.backend=numpy"])
    sim = Simulation(cfg, out_dir=tmp_path, progress=False)
    sim.run()
    rec = json.loads((tmp_path / "run.json").read_text())["summary"]["contact_lines"]
    import pandas as pd

    sc = pd.read_csv(tmp_path / "scalars.csv")
    assert len(sc) == 7 and abs(sc["contact_phi_min"].min() - rec["phi_min_rel"]) <= 1e-11 * abs(rec["phi_min_rel"])
    # by hand from the final state: the contact nodes of Phi
    Phi = np.asarray(sim.state.Phi)
    want = min(Phi[0].min(), Phi[-1].min()) / max(Phi[0].max(), Phi[-1].max())
    assert abs(sc["contact_phi_min"].iloc[-1] - want) <= 1e-11 * abs(want) and want < 0
    assert rec["warning"] is (rec["phi_min_rel"] < output.CONTACT_WARN)
