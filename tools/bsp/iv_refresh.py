"""Remake an I-V study's tables and Id figures from its committed run.json files with the present solver.bsp.iv.

    python3 tools/bsp/iv_refresh.py STUDY_DIR CONFIG [--out DIR --add POINT_DIR ...]

STUDY_DIR is results/<machine>/<iv.folder> (its runs/<mesh>/<variant>/vg*/run.json), CONFIG the workflow config
whose iv section made it.  Writes points.csv, curves.csv, figures_of_merit.csv, idvg_log.png, idvg_linear.png and
idvd.png as rule iv_collect does (`solver.bsp.iv.write_curves`), and refresh.json naming this code's commit.  The full
traces (traces.csv) need every point's scalars.csv, which the device does not bring back; where the study's
traces_packed.csv (tools/bsp/iv_pack.py: each trace thinned to at most 2000 rows) holds every point, traces.png is
remade from it, else it is left as it is.  For a study whose collect ran before a change to the figures of merit or
the figures (docs/iv.md §19), or that gained a point run later (§21).
With --out DIR and --add POINT_DIR ... (runs/<mesh>/<variant>/<point> folders of another study): the tables and
figures of STUDY_DIR's points and those, for points of STUDY_DIR's one has none of, into DIR (STUDY_DIR is left as it
is); the traces come from both studies' traces_packed.csv.  refresh.json lists every run used (docs/iv.md §23: the
standard-mesh hold study's nine points with the three long points of config/iv_standard.yaml's study).
"""
from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd
import yaml

from solver import io, provenance
from solver.bsp import iv


def main(study_dir: str, config: str, out: str | None = None, add: list[str] | None = None) -> int:
    d = Path(study_dir)
    cfg = yaml.safe_load(Path(config).read_text())["iv"]
    runs = sorted(p.parent for p in d.glob("runs/*/*/vg*/run.json"))
    if not runs:
        print(f"no point run.json under {d}/runs", file=sys.stderr)
        return 2
    added = [Path(a) for a in add or []]
    if added and not out:
        print("--add needs --out (STUDY_DIR holds the rule's own tables)", file=sys.stderr)
        return 2
    bad = [str(a) for a in added if not (a / "run.json").is_file() or len(a.parents) < 3 or a.parents[2].name != "runs"]
    if bad:
        print(f"--add: not a point folder runs/<mesh>/<variant>/<point> with run.json: {', '.join(bad)}", file=sys.stderr)
        return 2
    names = [a.name for a in added] + [r.name for r in runs]
    clash = sorted({n for n in names if names.count(n) > 1})
    if clash:
        print(f"--add: {', '.join(clash)} given twice (or already in {d})", file=sys.stderr)
        return 2
    runs += added
    dest = Path(out) if out else d
    dest.mkdir(parents=True, exist_ok=True)
    pts = iv.write_curves(runs, cfg, dest)
    study = {r.name: r.parents[3] for r in runs}  # point -> the study folder its run lies in (runs/<mesh>/<variant>/)
    frames = []
    for s in dict.fromkeys(study.values()):
        if (s / "traces_packed.csv").exists():
            t = pd.read_csv(s / "traces_packed.csv").rename(columns={"run": "point"})
            frames.append(t[t["point"].map(study.get) == s])  # each point's trace from its own study
    if frames:
        tr = pd.concat(frames, ignore_index=True)
        missing = sorted(set(pts["point"]) - set(tr["point"]))
        if missing:
            print(f"traces.png not remade: traces_packed.csv lacks {', '.join(missing)}")
        else:
            iv.plot_traces(tr, pts, dest / "traces.png")
            print("traces.png remade from traces_packed.csv (thinned traces)")
    io.write_json(dest / "refresh.json", provenance.collect(None, None, {"tool": "tools/bsp/iv_refresh.py", "config": config,
                                                                         "runs": [str(r) for r in runs]}))
    print(f"{len(runs)} points: tables and Id figures remade in {dest}")
    return 0


if __name__ == "__main__":
    import argparse

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("study_dir")
    ap.add_argument("config")
    ap.add_argument("--out", help="write here instead of STUDY_DIR (with --add)")
    ap.add_argument("--add", nargs="+", default=[], metavar="POINT_DIR", help="points of another study")
    a = ap.parse_args()
    sys.exit(main(a.study_dir, a.config, a.out, a.add))
