"""Two I-V studies of the same points on two meshes, point by point.

    python3 tools/bsp/iv_compare.py BASE_DIR OTHER_DIR OUT.csv

BASE_DIR and OTHER_DIR are results/<machine>/<iv.folder> with a points.csv each (e.g. iv/, the coarse mesh, and
iv_standard/, the standard mesh: docs/iv.md §20).  OUT.csv: one row per point in both, with each study's Id, status,
end time, steps and drift, and rel_change = Id(other) / Id(base) - 1.
"""
from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd

COLS = ["Id_A_per_m", "status", "t_end_ps", "steps", "drift", "contact_rule"]


def compare(base: Path, other: Path) -> pd.DataFrame:
    b, o = (pd.read_csv(Path(d) / "points.csv") for d in (base, other))
    m = o.merge(b, on=["point", "V_G_top", "V_G_bottom", "V_DS"], suffixes=("_other", "_base"))
    m["rel_change"] = m["Id_A_per_m_other"] / m["Id_A_per_m_base"] - 1.0
    keep = ["point", "V_G_top", "V_G_bottom", "V_DS"] + [f"{c}_{s}" for c in COLS for s in ("base", "other")]
    return m[keep + ["rel_change"]].sort_values(["V_G_top", "V_DS"])


if __name__ == "__main__":
    if len(sys.argv) != 4:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    df = compare(Path(sys.argv[1]), Path(sys.argv[2]))
    df.to_csv(sys.argv[3], index=False)
    print(df[["point", "Id_A_per_m_base", "Id_A_per_m_other", "rel_change"]].to_string(index=False))
