"""Remake an I-V study's tables and Id figures from its committed run.json files with the present solver.bsp.iv.

    python3 tools/bsp/iv_refresh.py STUDY_DIR CONFIG

STUDY_DIR is results/<machine>/<iv.folder> (its runs/<mesh>/<variant>/vg*/run.json), CONFIG the workflow config
whose iv section made it.  Writes points.csv, curves.csv, figures_of_merit.csv, idvg_log.png, idvg_linear.png and
idvd.png as rule iv_collect does (`solver.bsp.iv.write_curves`), and refresh.json naming this code's commit.  The full
traces (traces.csv) need every point's scalars.csv, which the device does not bring back; where the study's
traces_packed.csv (tools/bsp/iv_pack.py: each trace thinned to at most 2000 rows) holds every point, traces.png is
remade from it, else it is left as it is.  For a study whose collect ran before a change to the figures of merit or
the figures (docs/iv.md §19), or that gained a point run later (§21).
"""
from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd
import yaml

from solver import io, provenance
from solver.bsp import iv


def main(study_dir: str, config: str) -> int:
    d = Path(study_dir)
    cfg = yaml.safe_load(Path(config).read_text())["iv"]
    runs = sorted(p.parent for p in d.glob("runs/*/*/vg*/run.json"))
    if not runs:
        print(f"no point run.json under {d}/runs", file=sys.stderr)
        return 2
    pts = iv.write_curves(runs, cfg, d)
    packed = d / "traces_packed.csv"
    if packed.exists():
        tr = pd.read_csv(packed).rename(columns={"run": "point"})
        missing = sorted(set(pts["point"]) - set(tr["point"]))
        if missing:
            print(f"traces.png left as it is: traces_packed.csv lacks {', '.join(missing)}")
        else:
            iv.plot_traces(tr, pts, d / "traces.png")
            print("traces.png remade from traces_packed.csv (thinned traces)")
    io.write_json(d / "refresh.json", provenance.collect(None, None, {"tool": "tools/bsp/iv_refresh.py", "config": config,
                                                                      "runs": [str(r) for r in runs]}))
    print(f"{len(runs)} points: tables and Id figures remade in {d}")
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    sys.exit(main(*sys.argv[1:]))
