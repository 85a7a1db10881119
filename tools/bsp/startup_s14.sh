#!/usr/bin/env bash
# Issue #12 start-up, session 14 probe (one call, ~2-3 min, one GPU): where the warm and cold start-up go.
#   OUT=... bash tools/bsp/startup_s14.sh     (repository root)
# imports: numpy / cupy import times (3 runs each), OpenBLAS threads' share, bytecode caches present?
# spy:     tools/bsp/startup_trace.py spy of the standard case, cold (empty CUPY_CACHE_DIR) and warm x2:
#          every CuPy module load with its kernel names, thread, start time and calling site
# prof:    cProfile of a warm bench-case to its first step (top 60 cumulative / tottime)
# warm:    3 bench-case startup_s (the goal's measure)
set -u
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD
OUT=${OUT:?set OUT}; PY=${PY:-python3}; L=$OUT/s14start; mkdir -p "$L"
CASE=${CASE:-6x65x65x300x48:cupy:1:5:1}; CFG=config/bsp/dgmosfet.yaml
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$L/nvidia_smi.txt" 2>&1
nproc > "$L/nproc.txt"
{
  echo "== numpy import"
  for r in 1 2 3; do $PY -c 'import time; t=time.time(); import numpy; print("numpy %.3f" % (time.time()-t))'; done
  for r in 1 2; do OPENBLAS_NUM_THREADS=1 $PY -c 'import time; t=time.time(); import numpy; print("numpy OPENBLAS_NUM_THREADS=1 %.3f" % (time.time()-t))'; done
  $PY -c 'import numpy, os, sys; d=os.path.dirname(numpy.__file__); print("numpy", numpy.__version__, d, "writable", os.access(d, os.W_OK), "pycache", os.path.isdir(os.path.join(d, "_core", "__pycache__")), "dont_write_bytecode", sys.dont_write_bytecode, "pycache_prefix", sys.pycache_prefix)'
  $PY -c 'import numpy; numpy.show_config()' 2>&1 | grep -i -A3 "blas" | head -12
  echo "== cupy import (after numpy)"
  for r in 1 2 3; do $PY -c 'import numpy, time; t=time.time(); import cupy; print("cupy %.3f" % (time.time()-t))'; done
  $PY -c 'import cupy, os; print("cupy", cupy.__version__, os.path.dirname(cupy.__file__)); from cupy.cuda import compiler; print("nvrtc", cupy.cuda.nvrtc.getVersion(), "runtime", cupy.cuda.runtime.runtimeGetVersion(), "driver", cupy.cuda.runtime.driverGetVersion())'
  echo "== python bare"
  for r in 1 2 3; do s=$(date +%s.%N); $PY -c 'pass'; e=$(date +%s.%N); echo "python -c pass $(echo "$e - $s" | bc)"; done
  for r in 1 2; do s=$(date +%s.%N); $PY -S -c 'pass'; e=$(date +%s.%N); echo "python -S -c pass $(echo "$e - $s" | bc)"; done
  $PY -X importtime -c 'import numpy' 2> "$L/importtime_numpy.txt"; sort -t'|' -k2 -n -r "$L/importtime_numpy.txt" | head -15
  $PY -X importtime -c 'import numpy, cupy' 2> "$L/importtime_cupy.txt"; sort -t'|' -k2 -n -r "$L/importtime_cupy.txt" | head -25
} > "$L/imports.txt" 2>&1
cat "$L/imports.txt"
echo "== spy cold / warm"
CUPY_CACHE_DIR=$L/cache_cold timeout 200 $PY tools/bsp/startup_trace.py spy "$CASE" $CFG --steps 2 > "$L/spy_cold.json" 2> "$L/spy_cold.err" || echo "spy cold exit $?"
for r in 1 2; do timeout 200 $PY tools/bsp/startup_trace.py spy "$CASE" $CFG --steps 2 > "$L/spy_warm_$r.json" 2> "$L/spy_warm_$r.err" || echo "spy warm exit $?"; done
echo "== cProfile warm"
timeout 200 $PY -m cProfile -o "$L/prof.out" -m solver bsp bench-case 6x65x65x300x48:cupy:1:1:0 $CFG > "$L/prof_run.out" 2>&1 || echo "prof exit $?"
$PY -c "
import pstats, sys
p = pstats.Stats('$L/prof.out'); p.sort_stats('cumulative').print_stats(70); p.sort_stats('tottime').print_stats(40)" > "$L/prof.txt" 2>&1
echo "== warm bench-case x3"
for r in 1 2 3; do
  timeout 200 $PY -m solver bsp bench-case "$CASE" $CFG --launched-at "$(date +%s.%N)" > "$L/warm_$r.out" 2> "$L/warm_$r.err"
  tail -n 1 "$L/warm_$r.out" | $PY -c "import json,sys; print('warm startup_s', json.load(sys.stdin)['startup_s'])"
done
CUPY_CACHE_DIR=$L/cache_cold2 timeout 200 $PY -m solver bsp bench-case "$CASE" $CFG --launched-at "$(date +%s.%N)" > "$L/cold.out" 2> "$L/cold.err"
tail -n 1 "$L/cold.out" | $PY -c "import json,sys; print('cold startup_s', json.load(sys.stdin)['startup_s'])"
rm -rf "$L"/cache_cold*
$PY - "$L" <<'P'
import json, sys, collections
L = sys.argv[1]
for f in ("spy_cold", "spy_warm_1", "spy_warm_2"):
    try:
        r = json.load(open(f"{L}/{f}.json"))
    except Exception as e:
        print(f, "missing", e); continue
    ms = r["modules"]["startup_list"]
    print(f"== {f}: t_init {r['t_init']} t_startup {r['t_startup']} phases INITCOND {r['startup_phases'].get('INITCOND')} THERMEQUIL {r['startup_phases'].get('THERMEQUIL')}")
    print("  modules", r["modules"]["startup"], "steps", r["modules"]["steps"])
    for m in ms:
        print(f"  {m['at']:7.3f} {m['s']:6.3f} {'raw ' if m['raw'] else 'cupy'} {m['thread'][:12]:12s} {m['phase'][:40]:40s} {','.join(m['kernels'])[:60]:60s} {m['site'][:60]}")
P
