#!/usr/bin/env bash
# Issue #12, start-up (process start to the first step) of the standard mesh on the GPU, one call:
#   OUT=... [BASE=_dev/base] [ROUNDS=3] bash tools/bsp/startup_device.sh
# from the repository root of the tree to measure ("new"); BASE (optional) = a tree to compare with, run
# interleaved in the same call.  Parts (about 2-4 min in all):
#   cold   each tree once with an empty CuPy kernel cache (CUPY_CACHE_DIR): the fresh-machine start-up
#   warm   one uncounted bench-case per tree (fills the default kernel cache), then ROUNDS rounds of
#          `bsp bench-case 6x65x65x300x48:cupy:1:5:1` per tree: startup_s as bench defines it
#   probe  tools/bsp/startup_probe.py (time stamps of the start-up, CuPy module loads, heavy imports) per
#          tree, 2 rounds, and the new tree without backend.prewarm (--no-prewarm): the thread's share
#   imports `python -X importtime` of the new tree's bench-case, the 25 largest cumulative entries
# Logs under $OUT/startup.tgz; a summary table (startup_s per tree: median, min, max) is printed last.
set -u
export PYTHONUNBUFFERED=1
OUT=${OUT:?set OUT}; BASE=${BASE:-}; ROUNDS=${ROUNDS:-3}; PY=${PY:-python3}
CASE=${CASE:-6x65x65x300x48:cupy:1:5:1}; CFG=config/bsp/dgmosfet.yaml
NEW=$(pwd); L=/tmp/startup; rm -rf "$L"; mkdir -p "$L"
trees="new"; [ -n "$BASE" ] && { [ -d "$BASE" ] || { echo "no base tree $BASE"; exit 2; }; trees="base new"; }
tree() { if [ "$1" = base ]; then (cd "$BASE" && pwd); else echo "$NEW"; fi; }
# case TREE FILE [ENV...]: one bench-case process in TREE, its JSON record (last stdout line) to $L/FILE
case1() {
  local d; d=$(tree "$1"); shift; local f=$1; shift
  ( cd "$d" && env "$@" PYTHONPATH="$d" timeout 300 $PY -m solver bsp bench-case "$CASE" $CFG \
      --launched-at "$(date +%s.%N)" > "$L/$f.out" 2> "$L/$f.err" ) || echo "$f: exit $?"
  tail -n 1 "$L/$f.out" > "$L/$f.json"
}
su() { $PY -c "import json,sys; print('%.3f' % json.load(open(sys.argv[1]))['startup_s'])" "$L/$1.json" 2>/dev/null || echo nan; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$L/nvidia_smi.txt" 2>&1
echo "== cold (empty kernel cache)"
for t in $trees; do case1 $t cold_$t CUPY_CACHE_DIR="$L/cache_$t"; echo "cold $t startup_s $(su cold_$t)"; done
echo "== warm"
for t in $trees; do case1 $t fill_$t; done
for r in $(seq "$ROUNDS"); do
  for t in $trees; do case1 $t warm_${t}_$r; echo "round $r $t startup_s $(su warm_${t}_$r)"; done
done
echo "== probe"
for r in 1 2; do
  for t in $trees; do
    d=$(tree $t)
    ( cd "$d" && PYTHONPATH="$d" $PY "$NEW/tools/bsp/startup_probe.py" "$CASE" $CFG --launched-at "$(date +%s.%N)" ) \
      2> "$L/probe_${t}_$r.err" | tail -n 1 | tee "$L/probe_${t}_$r.json"
  done
  ( PYTHONPATH="$NEW" $PY "$NEW/tools/bsp/startup_probe.py" "$CASE" $CFG --no-prewarm --launched-at "$(date +%s.%N)" ) \
    2> "$L/probe_noprewarm_$r.err" | tail -n 1 | tee "$L/probe_noprewarm_$r.json"
done
echo "== imports"
PYTHONPATH="$NEW" $PY -X importtime -m solver bsp bench-case "$CASE" $CFG 2> "$L/importtime.txt" > /dev/null
grep '^import time' "$L/importtime.txt" | sort -t'|' -k2 -n -r | head -25 > "$L/importtime_top.txt"
cat "$L/importtime_top.txt"
tar czf "$OUT/startup.tgz" --exclude='startup/cache_*' -C /tmp startup
echo "== startup_s ($CASE, $(cat "$L/nvidia_smi.txt"))"
for t in $trees; do
  vals=$(for r in $(seq "$ROUNDS"); do su warm_${t}_$r; done | tr '\n' ' ')
  $PY -c "import statistics as s, sys; v = [float(x) for x in sys.argv[3:] if x != 'nan']; print(f'{sys.argv[1]:5s} warm median {s.median(v):.3f} min {min(v):.3f} max {max(v):.3f} (n = {len(v)}), cold {sys.argv[2]}')" $t "$(su cold_$t)" $vals
done
