#!/usr/bin/env bash
# Issue #12, round 3 (docs/performance-startup.md): from the repository root of the tree to measure,
#   OUT=... bash tools/bsp/startup_round3.sh diag
#       where CuPy imports cupyx (tools/bsp/startup_trace.py spy: first imports with their stacks,
#       every cupy.ndarray.__array_ufunc__ site), cold (empty CUPY_CACHE_DIR) and warm; the CuPy
#       module loads of the start-up (this project's RawModules / CuPy's kernels); whether NVRTC
#       compiles the start-up's RawModules in parallel (1 vs 16 threads, each in an empty cache);
#       ROUNDS rounds of bench-case with and without a background import of cupyx (what-if)
#   OUT=... BASE=_dev/startup_base [ROUNDS=7] [ALL_ROUNDS=2] bash tools/bsp/startup_round3.sh ab
#       start-up of `bsp bench-case CASE` (startup_s as bench defines it), base and this tree
#       alternating, with CUDA_VISIBLE_DEVICES=0 (one GPU, as the goal's machine): ROUNDS rounds warm
#       (after one uncounted run per tree fills the default kernel cache), ALL_ROUNDS rounds with
#       every GPU of the host visible, then one cold run per tree (COLD_CASE, one step;
#       CUPY_CACHE_DIR = a new empty folder: every CuPy module compiled by NVRTC; the CUDA driver,
#       the page cache and the Python bytecode caches stay warm)
# Logs: $OUT/round3_<mode>.tgz; a summary table is printed last.
set -u
export PYTHONUNBUFFERED=1
MODE=${1:?diag or ab}; OUT=${OUT:?set OUT}; ROUNDS=${ROUNDS:-3}; PY=${PY:-python3}
CASE=${CASE:-6x65x65x300x48:cupy:1:5:1}; CFG=config/bsp/dgmosfet.yaml
NEW=$(pwd); L=/tmp/round3; rm -rf "$L"; mkdir -p "$L"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$L/nvidia_smi.txt" 2>&1
$PY -c "import cupy, sys; print('cupy', cupy.__version__, 'python', sys.version.split()[0])" >> "$L/nvidia_smi.txt" 2>&1
cat "$L/nvidia_smi.txt"
su() { $PY -c "import json,sys; print('%.3f' % json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])['startup_s'])" "$1" 2>/dev/null || echo nan; }
stats() {  # label values...
  $PY -c "import statistics as s, sys; v = [float(x) for x in sys.argv[2:] if x != 'nan']; print(f'{sys.argv[1]:28s} median {s.median(v):.3f} min {min(v):.3f} max {max(v):.3f} (n = {len(v)})' if v else sys.argv[1] + ' none')" "$@"
}
if [ "$MODE" = diag ]; then
  T="$PY $NEW/tools/bsp/startup_trace.py"
  echo "== spy, cold (empty kernel cache), start-up + 2 steps"
  CUPY_CACHE_DIR=$L/cacheA PYTHONPATH=$NEW timeout 150 $T spy "$CASE" $CFG --steps 2 --keys "$L/keys.json" > "$L/spy_cold.json" 2> "$L/spy_cold.err" || echo "spy cold: exit $?"
  echo "== spy, warm (the same cache), start-up + 2 steps"
  CUPY_CACHE_DIR=$L/cacheA PYTHONPATH=$NEW timeout 60 $T spy "$CASE" $CFG --steps 2 > "$L/spy_warm.json" 2> "$L/spy_warm.err" || echo "spy warm: exit $?"
  echo "== NVRTC: the start-up's RawModules, each run in an empty cache"
  for th in 1 16; do
    CUPY_CACHE_DIR=$L/cache_c$th PYTHONPATH=$NEW timeout 60 $T compile "$L/keys.json" --threads $th --where startup 2>> "$L/compile.err" | tee -a "$L/compile.txt"
  done
  CUPY_CACHE_DIR=$L/cache_s1 PYTHONPATH=$NEW timeout 60 $T compile "$L/keys.json" --threads 1 --where step 2>> "$L/compile.err" | tee -a "$L/compile.txt"
  CUPY_CACHE_DIR=$L/cache_s16 PYTHONPATH=$NEW timeout 60 $T compile "$L/keys.json" --threads 16 --where step 2>> "$L/compile.err" | tee -a "$L/compile.txt"
  echo "== warm bench-case, plain vs background import of cupyx in the prewarm thread"
  PYTHONPATH=$NEW timeout 60 $T bench bsp bench-case "$CASE" $CFG > /dev/null 2>&1  # fills the default cache
  for r in $(seq "$ROUNDS"); do
    for v in plain bg; do
      flag=""; [ $v = bg ] && flag="--bg-cupyx"
      PYTHONPATH=$NEW timeout 60 $T bench $flag bsp bench-case "$CASE" $CFG --launched-at "$(date +%s.%N)" > "$L/bench_${v}_$r.out" 2> "$L/bench_${v}_$r.err"
      echo "round $r $v startup_s $(su "$L/bench_${v}_$r.out")"
    done
  done
  tar czf "$OUT/round3_diag.tgz" --exclude='round3/cache*' -C /tmp round3
  echo "== summary"
  $PY - "$L" <<'EOF'
import json, sys
L = sys.argv[1]
for f in ("spy_cold", "spy_warm"):
    try:
        r = json.loads(open(f"{L}/{f}.json").read().strip().splitlines()[-1])
    except Exception as e:
        print(f, "failed", e, open(f"{L}/{f}.err").read()[-1500:]); continue
    print(f, "t_init", r["t_init"], "t_startup", r["t_startup"], "modules", json.dumps(r["modules"]["startup"]), "steps", json.dumps(r["modules"]["steps"]))
    print("  phases", json.dumps(r["startup_phases"]))
    for x in r["first_imports"][:6]:
        print("  first", x["name"], x["t"], x["phase"], " <- ", " < ".join(reversed(x["stack"][-6:])))
    for k, v in sorted(r["array_ufunc_sites"].items(), key=lambda kv: -kv[1])[:20]:
        print("  site", v, k)
EOF
  for v in plain bg; do stats "warm $v" $(for r in $(seq "$ROUNDS"); do su "$L/bench_${v}_$r.out"; done); done
  cat "$L/compile.txt"
  exit 0
fi
# ---- ab
BASE=${BASE:?set BASE}; [ -d "$BASE" ] || { echo "no base tree $BASE"; exit 2; }
BASE=$(cd "$BASE" && pwd); ALL=${ALL_ROUNDS:-2}; COLD_CASE=${COLD_CASE:-${CASE%:*:*:*}:1:1:0}
tree() { if [ "$1" = base ]; then echo "$BASE"; else echo "$NEW"; fi; }
case1() {  # TREE FILE CASE [ENV...]
  local d; d=$(tree "$1"); shift; local f=$1; shift; local c=$1; shift
  ( cd "$d" && env "$@" PYTHONPATH="$d" timeout 120 $PY -m solver bsp bench-case "$c" $CFG \
      --launched-at "$(date +%s.%N)" > "$L/$f.out" 2> "$L/$f.err" ) || echo "$f: exit $?"
}
# one GPU visible (the goal's machine: one H200), then ALL rounds with every GPU of the host visible
for t in base new; do case1 $t fill_$t "$CASE" CUDA_VISIBLE_DEVICES=0; done
for r in $(seq "$ROUNDS"); do
  for t in base new; do case1 $t warm_${t}_$r "$CASE" CUDA_VISIBLE_DEVICES=0; echo "round $r $t startup_s $(su "$L/warm_${t}_$r.out")"; done
done
for r in $(seq "$ALL"); do
  for t in base new; do case1 $t all_${t}_$r "$CASE"; echo "all-GPU round $r $t startup_s $(su "$L/all_${t}_$r.out")"; done
done
for t in base new; do
  case1 $t cold_$t "$COLD_CASE" CUDA_VISIBLE_DEVICES=0 CUPY_CACHE_DIR="$L/cache_cold_$t"; echo "cold $t startup_s $(su "$L/cold_$t.out")"
done
tar czf "$OUT/round3_ab.tgz" --exclude='round3/cache*' -C /tmp round3
echo "== startup_s ($CASE; $(head -1 "$L/nvidia_smi.txt"); warm/cold: CUDA_VISIBLE_DEVICES=0)"
for t in base new; do
  stats "$t warm" $(for r in $(seq "$ROUNDS"); do su "$L/warm_${t}_$r.out"; done)
  stats "$t warm, all GPUs visible" $(for r in $(seq "$ALL"); do su "$L/all_${t}_$r.out"; done)
  echo "$t cold ($COLD_CASE) $(su "$L/cold_$t.out")"
done
