#!/usr/bin/env bash
# numba ITER round s13 (issue #14, docs/performance-numba-iter.md §10): the standard mesh 6x65x65x300x48 on the
# numba backend, base code against new code, side by side in one call (<= ~150 s on 16 cores; no GPU or CuPy
# needed).  From the repository root of the new tree:
#
#   OUT=... bash tools/bsp/numba_s13_device.sh BASE_DIR NEW_DIR      # e.g. _dev/base .
#
# BASE_DIR, NEW_DIR: two source trees (each holding solver/); each runs `python -m solver bsp bench` with
# PYTHONPATH and the working directory set to it and its own NUMBA_CACHE_DIR.  First both trees fill their JIT
# caches side by side (a 3-step run of a tiny mesh: the same kernel signatures); then round 1: base and new at
# 16 threads, base and new at 1 thread, new at 8, 4, 2 threads; round 2: new and base at 16 threads (the
# reverse order); 10 timed steps after 2 each (step 10 refreshes the kept Jacobian at every thread count).
# Then, while the time allows (started before 120 s): tools/bsp/cpu_pair_probe.py (are the 16 CPUs hardware
# threads of 8 cores?) and tools/bsp/numba_step_profile.py of the new tree at 16 threads (ITER piece by piece).
# Logs and steps.csv per run under $OUT/numba_s13/; the table (medians over the runs' steps, ms per step, and
# the speed-up / efficiency against 1 thread) is printed last.
set -u
export PYTHONUNBUFFERED=1 MPLBACKEND=Agg
BASE=${1:?BASE_DIR}; NEW=${2:?NEW_DIR}; OUT=${OUT:?set OUT}; PY=${PY:-python3}
L=$OUT/numba_s13; mkdir -p "$L"
t0=$SECONDS
CFG=config/bsp/dgmosfet.yaml
STD=${MESH:-6x65x65x300x48}; HI=${THREADS_HI:-16}; STEPS=${STEPS:-10}; MID=${THREADS_MID:-8 4 2}  # overrides for a smoke test
lscpu > "$L/lscpu.txt" 2>&1; nproc > "$L/nproc.txt"
for d in "$BASE" "$NEW"; do [ -d "$d/solver" ] || { echo "no source tree $d (no solver/ there)"; exit 2; }; done
abs() { (cd "$1" && pwd); }
BASE=$(abs "$BASE"); NEW=$(abs "$NEW")
tree_of() { [ "$1" = new ] && echo "$NEW" || echo "$BASE"; }
# bench CODE NAME CASE...: python -m solver bsp bench from CODE's tree, output in $L/NAME
bench() {
  local code=$1 name=$2 tree; shift 2; tree=$(tree_of $code)
  ( cd "$tree" && export PYTHONPATH="$tree" NUMBA_CACHE_DIR=/tmp/numba_s13_cache_$code && timeout 200 $PY -m solver bsp bench \
      "$tree/$CFG" "$@" --out "$L/$name" > "$L/$name.log" 2>&1 ) || echo "bench $name: exit $?"
}
run() {  # run CODE THREADS ROUND
  echo "== round $3 $1 $2 threads ($((SECONDS - t0)) s)"
  bench $1 ${1}_t$2_r$3 --case $STD:numba:$2:$STEPS:2
}
echo "== JIT caches, both trees side by side ($((SECONDS - t0)) s)"
bench base warm_base --case 6x17x17x20x8:numba:2:2:1 &
bench new warm_new --case 6x17x17x20x8:numba:2:2:1 &
wait
run base $HI 1; run new $HI 1
run base 1 1; run new 1 1
for t in $MID; do run new $t 1; done
run new $HI 2; run base $HI 2
if [ $((SECONDS - t0)) -lt 120 ]; then
  echo "== cpu_pair_probe ($((SECONDS - t0)) s)"
  ( cd "$NEW" && PYTHONPATH="$NEW" NUMBA_CACHE_DIR=/tmp/numba_s13_cache_new timeout 25 $PY tools/bsp/cpu_pair_probe.py \
      --max $HI > "$L/cpu_pair_probe.txt" 2>&1 ) || echo "cpu_pair_probe: exit $?"
fi
if [ $((SECONDS - t0)) -lt 128 ]; then
  echo "== numba_step_profile new $HI threads ($((SECONDS - t0)) s)"
  ( cd "$NEW" && PYTHONPATH="$NEW" NUMBA_CACHE_DIR=/tmp/numba_s13_cache_new timeout 20 $PY tools/bsp/numba_step_profile.py \
      config/standard.yaml --threads $HI --steps 4 --warmup 2 > "$L/step_profile_new_t$HI.txt" 2>&1 ) || echo "step_profile: exit $?"
fi
echo "== done ($((SECONDS - t0)) s)"
tail -n 1 "$L/cpu_pair_probe.txt" 2>/dev/null
head -n 12 "$L/step_profile_new_t$HI.txt" 2>/dev/null
$PY - "$L" "$HI" <<'PYEOF'
import csv, statistics, sys
from pathlib import Path
L = Path(sys.argv[1])
HI = int(sys.argv[2])
rows = {}
for f in sorted(L.glob("*_t*_r*/steps.csv")):
    code, t, _ = f.parent.name.split("_")
    for row in csv.DictReader(open(f)):
        if row["step_ms"]:
            rows.setdefault((code, int(t[1:])), []).append(row)
print("code,threads,runs,step_ms,bte_ms,iter_ms,newton_per_step,step_ms_runs,iter_ms_runs")
med = {}
for (code, t), rs in sorted(rows.items(), key=lambda kv: (kv[0][0], -kv[0][1])):
    m = {k: statistics.median(float(x[k]) for x in rs) for k in ("step_ms", "bte_ms", "iter_ms", "newton_per_step")}
    med[code, t] = m
    print(f"{code},{t},{len(rs)},{m['step_ms']:.1f},{m['bte_ms']:.1f},{m['iter_ms']:.2f},{m['newton_per_step']:.2f},"
          + "/".join(f"{float(x['step_ms']):.1f}" for x in rs) + "," + "/".join(f"{float(x['iter_ms']):.2f}" for x in rs))
print("code,threads,speedup_step,speedup_bte,speedup_iter,eff_bte_pct,eff_iter_pct")
for (code, t), b in sorted(med.items(), key=lambda kv: (kv[0][0], -kv[0][1])):
    a = med.get((code, 1))
    if a and t > 1:
        print(f"{code},{t},{a['step_ms'] / b['step_ms']:.2f},{a['bte_ms'] / b['bte_ms']:.2f},{a['iter_ms'] / b['iter_ms']:.2f},"
              f"{100 * a['bte_ms'] / b['bte_ms'] / t:.0f},{100 * a['iter_ms'] / b['iter_ms'] / t:.0f}")
PYEOF
