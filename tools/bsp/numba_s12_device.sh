#!/usr/bin/env bash
# numba ITER parallel efficiency (issue #14, docs/performance-numba-iter.md §9): the standard mesh
# 6x65x65x300x48 on the numba backend at 1 and 16 threads, base code against new code, side by side in one
# call (<= ~150 s; no GPU or CuPy needed).  From the repository root:
#
#   OUT=... bash _dev/numba/tools/bsp/numba_s12_device.sh BASE_DIR NEW_DIR   # e.g. BASE_DIR = . (base c6b1692),
#                                                                          NEW_DIR = _dev/numba (this branch)
#
# BASE_DIR, NEW_DIR: two source trees (each holding solver/); each runs `python -m solver bsp bench` with
# PYTHONPATH and the working directory set to it, with its own NUMBA_CACHE_DIR.  First both trees fill
# their JIT caches side by side (a 3-step run of a tiny mesh: the same kernel signatures), then two
# interleaved rounds: per tree 16 threads then 1 thread in round 1, 16 threads again in round 2; 10 timed
# steps after 2 each (the same steps at both thread counts: step 10 refreshes the kept Jacobian in both).  Logs and steps.csv per run
# under $OUT/numba_s12/; the table (medians per run, ms per step) is printed last, with the 1/16 speed-up.
set -u
export PYTHONUNBUFFERED=1 MPLBACKEND=Agg
BASE=${1:?BASE_DIR}; NEW=${2:?NEW_DIR}; OUT=${OUT:?set OUT}; PY=${PY:-python3}
L=$OUT/numba_s12; mkdir -p "$L"
t0=$SECONDS
CFG=config/bsp/dgmosfet.yaml
STD=${MESH:-6x65x65x300x48}; HI=${THREADS_HI:-16}; STEPS=${STEPS:-10}  # overrides for a smoke test elsewhere
lscpu > "$L/lscpu.txt" 2>&1; nproc > "$L/nproc.txt"
for d in "$BASE" "$NEW"; do [ -d "$d/solver" ] || { echo "no source tree $d (no solver/ there)"; exit 2; }; done
abs() { (cd "$1" && pwd); }
BASE=$(abs "$BASE"); NEW=$(abs "$NEW")
# bench CODE TREE NAME CASE...: python -m solver bsp bench from TREE, output in $L/NAME
bench() {
  local code=$1 tree=$2 name=$3; shift 3
  ( cd "$tree" && PYTHONPATH="$tree" NUMBA_CACHE_DIR=/tmp/numba_s12_cache_$code timeout 200 $PY -m solver bsp bench \
      "$tree/$CFG" "$@" --out "$L/$name" > "$L/$name.log" 2>&1 ) || echo "bench $name: exit $?"
}
echo "== JIT caches, both trees side by side ($((SECONDS - t0)) s)"
bench base "$BASE" warm_base --case 6x17x17x20x8:numba:2:2:1 &
bench new "$NEW" warm_new --case 6x17x17x20x8:numba:2:2:1 &
wait
for r in 1 2; do
  for code in base new; do
    tree=$BASE; [ $code = new ] && tree=$NEW
    ts="$HI 1"; [ $r = 2 ] && ts=$HI  # 1 thread once per tree (~16 s a run): the call stays within ~150 s
    for t in $ts; do
      echo "== round $r $code $t threads ($((SECONDS - t0)) s)"
      bench $code "$tree" ${code}_t${t}_r$r --case $STD:numba:$t:$STEPS:2
    done
  done
done
echo "== done ($((SECONDS - t0)) s)"
$PY - "$L" "$HI" <<'EOF'
import csv, statistics, sys
from pathlib import Path
L = Path(sys.argv[1])
HI = int(sys.argv[2])
rows = {}
for code in ("base", "new"):
    for t in (HI, 1):
        for r in (1, 2):
            f = L / f"{code}_t{t}_r{r}" / "steps.csv"
            if f.exists():
                for row in csv.DictReader(open(f)):
                    if row["step_ms"]:
                        rows.setdefault((code, t), []).append(row)
print("code,threads,runs,step_ms,bte_ms,iter_ms,newton_per_step,step_ms_runs,iter_ms_runs")
med = {}
for (code, t), rs in sorted(rows.items()):
    m = {k: statistics.median(float(x[k]) for x in rs) for k in ("step_ms", "bte_ms", "iter_ms", "newton_per_step")}
    med[code, t] = m
    print(f"{code},{t},{len(rs)},{m['step_ms']:.1f},{m['bte_ms']:.1f},{m['iter_ms']:.2f},{m['newton_per_step']:.2f},"
          + "/".join(f"{float(x['step_ms']):.1f}" for x in rs) + "," + "/".join(f"{float(x['iter_ms']):.2f}" for x in rs))
for code in ("base", "new"):
    if (code, 1) in med and (code, HI) in med:
        a, b = med[code, 1], med[code, HI]
        print(f"{code}: speed-up 1 -> {HI} threads: step {a['step_ms'] / b['step_ms']:.2f}x, BTE {a['bte_ms'] / b['bte_ms']:.2f}x, "
              f"ITER {a['iter_ms'] / b['iter_ms']:.2f}x (efficiency {100 * a['iter_ms'] / b['iter_ms'] / HI:.0f} %)")
EOF
