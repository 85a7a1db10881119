"""Pack the small files of an I-V study for the trip back from the device (tools/bsp/iv_device.sh).

    python3 tools/bsp/iv_pack.py STUDY_DIR OUT_DIR [TAG]

STUDY_DIR is results_dir/<machine>/iv.  Writes at most 1 + MAX_PARTS files into OUT_DIR:
- iv_small[_TAG].tgz: the study's tables and figures (points, curves, figures of merit, the PNGs,
  the provenance), the run.json and profiles.csv of every point and seed, a thinned current trace
  of every run (traces_packed.csv: at most MAX_ROWS rows per run, always with its first and last
  row), the point logs and benchmarks.  A few MB for 15 coarse points.
- iv_scalars[_TAG]_<k>.tar (k = 0, 1, ...): every run's full scalars.csv (one row per step: ~2.5 MB per 30k-step
  point; session 25's standard-mesh study: 30.6 MB as xz for 1.34e6 steps), each compressed alone
  (``<run>/scalars.csv.xz``, in parallel) and the members laid into at most MAX_PARTS tars of at most LIMIT
  bytes each, largest first; a run that fits none is left out, with a line naming it.
  Unpack: ``tar xf iv_scalars_0_0.tar && unxz <run>/scalars.csv.xz``.
Never packed: *.h5 (checkpoints and states, 31 MB each on the coarse mesh), timers.csv (one row
per phase per step: tens of MB), traces.csv (the full traces again).
"""
from __future__ import annotations

import io
import lzma
import os
import sys
import tarfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pandas as pd

MAX_ROWS = 2000
LIMIT = 15 * 2**20  # the device tool brings back files up to 16 MB
MAX_PARTS = 3  # with iv_small, the Snakemake log and the status: 6 of the ~8 files a device call brings back


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


def _xz(path: Path) -> bytes:
    return lzma.compress(path.read_bytes(), preset=6)


def _pack_scalars(paths: list[Path], base: Path, out: Path, sfx: str) -> list[Path]:
    """The full scalars.csv files, each compressed alone and in parallel, then laid largest first into the first of at
    most MAX_PARTS tars where each fits under LIMIT (first fit decreasing).  xz -6 makes ~1 MB/s on one core of the VM:
    as one stream, the standard mesh's 12 traces (30.6 MB as xz) were most of the ~140 s that packing took in
    session 25.  Threads, because lzma lets the GIL go while it compresses."""
    if not paths:
        return []
    with ThreadPoolExecutor(max_workers=max(1, min(len(paths), os.cpu_count() or 1))) as ex:
        blobs = list(ex.map(_xz, paths))
    parts: list[list] = []  # [[bytes so far, [(name, blob), ...]], ...]
    left = []
    for path, blob in sorted(zip(paths, blobs), key=lambda pb: -len(pb[1])):
        name = str(path.relative_to(base)) + ".xz"
        size = len(blob) + 2048  # the member's header and padding, with margin
        part = next((p for p in parts if p[0] + size + 10240 <= LIMIT), None)  # 10240: the tar's end blocks
        if part is None and len(parts) < MAX_PARTS and size + 10240 <= LIMIT:
            part = [0, []]
            parts.append(part)
        if part is None:
            left.append(f"{name} ({len(blob) / 2**20:.1f} MB)")
            continue
        part[0] += size
        part[1].append((name, blob))
    files = []
    for k, (_, members) in enumerate(parts):
        f = out / f"iv_scalars{sfx}_{k}.tar"
        with tarfile.open(f, "w") as tar:
            for name, blob in sorted(members):
                _add_bytes(tar, name, blob)
        files.append(f)
    if left:
        print(f"iv_pack: left out, over {MAX_PARTS} files of {LIMIT / 2**20:.0f} MB: {', '.join(left)} "
              "(the thinned traces are in iv_small)")
    return files


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
    files = [small] + _pack_scalars([r / "scalars.csv" for r in runs], base, out, sfx)
    for f in files:
        print(f"iv_pack: {f.name} {f.stat().st_size / 2**20:.2f} MB")
    return files


if __name__ == "__main__":
    pack(Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3] if len(sys.argv) > 3 else "")
