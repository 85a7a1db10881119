"""Pack the small files of an I-V study for the trip back from the device (tools/bsp/iv_device.sh).

    python3 tools/bsp/iv_pack.py STUDY_DIR OUT_DIR [TAG]

STUDY_DIR is results_dir/<machine>/iv.  Writes at most two files into OUT_DIR:
- iv_small[_TAG].tgz: the study's tables and figures (points, curves, figures of merit, the PNGs,
  the provenance), the run.json and profiles.csv of every point and seed, a thinned current trace
  of every run (traces_packed.csv: at most MAX_ROWS rows per run, always with its first and last
  row), the point logs and benchmarks.  A few MB for 15 coarse points.
- iv_scalars[_TAG].tar.xz: every run's full scalars.csv (one row per step: ~2.5 MB per 30k-step
  point), only if it stays under LIMIT bytes; otherwise it is left out, with a line saying so.
Never packed: *.h5 (checkpoints and states, 31 MB each on the coarse mesh), timers.csv (one row
per phase per step: tens of MB), traces.csv (the full traces again).
"""
from __future__ import annotations

import io
import sys
import tarfile
from pathlib import Path

import pandas as pd

MAX_ROWS = 2000
LIMIT = 15 * 2**20  # the device tool brings back files up to 16 MB


def _add_bytes(tar, name, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    tar.addfile(info, io.BytesIO(data))


def thinned(scalars: Path, max_rows=MAX_ROWS) -> pd.DataFrame:
    """Every k-th row of the run's scalars.csv (k so that at most max_rows remain) plus the last."""
    sc = pd.read_csv(scalars)
    k = max(1, -(-len(sc) // max_rows))
    keep = sc.iloc[::k]
    if keep.index[-1] != sc.index[-1]:
        keep = pd.concat([keep, sc.iloc[[-1]]])
    return pd.DataFrame({"run": scalars.parent.name, "step": keep["step"], "time_ps": keep["time_s"] * 1e12,
                         "current_A_per_m": keep["mean_current_A_per_m"]})


def pack(study: Path, out: Path, tag: str = "") -> list[Path]:
    study, out = Path(study), Path(out)
    out.mkdir(parents=True, exist_ok=True)
    sfx = f"_{tag}" if tag else ""
    base = study.parent.parent  # results_dir: names in the archive start at <machine>/iv/
    runs = sorted(p.parent for p in study.glob("runs/*/*/*/scalars.csv"))
    small = out / f"iv_small{sfx}.tgz"
    with tarfile.open(small, "w:gz") as tar:
        for p in sorted(study.iterdir()):
            if p.is_file() and p.suffix in (".csv", ".png", ".json") and p.name != "traces.csv":
                tar.add(p, arcname=str(p.relative_to(base)))
        for sub in ("logs", "benchmarks"):
            for p in sorted((study / sub).glob("*")) if (study / sub).is_dir() else []:
                tar.add(p, arcname=str(p.relative_to(base)))
        for r in sorted({p.parent for p in study.glob("runs/*/*/*/run.json")}):
            for name in ("run.json", "profiles.csv"):
                if (r / name).is_file():
                    tar.add(r / name, arcname=str((r / name).relative_to(base)))
        if runs:
            tr = pd.concat([thinned(r / "scalars.csv") for r in runs], ignore_index=True)
            _add_bytes(tar, str((study / "traces_packed.csv").relative_to(base)),
                       tr.to_csv(index=False, float_format="%.8e").encode())
    files = [small]
    full = out / f"iv_scalars{sfx}.tar.xz"
    with tarfile.open(full, "w:xz") as tar:
        for r in runs:
            tar.add(r / "scalars.csv", arcname=str((r / "scalars.csv").relative_to(base)))
    if full.stat().st_size > LIMIT:
        print(f"iv_pack: {full.name} is {full.stat().st_size / 2**20:.1f} MB, over the limit: left out "
              f"(the thinned traces are in {small.name})")
        full.unlink()
    else:
        files.append(full)
    for f in files:
        print(f"iv_pack: {f.name} {f.stat().st_size / 2**20:.2f} MB")
    return files


if __name__ == "__main__":
    pack(Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3] if len(sys.argv) > 3 else "")
