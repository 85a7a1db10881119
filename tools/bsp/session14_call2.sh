#!/usr/bin/env bash
# Session 14, call 2 (one H200): the start-up warm-up (solver/bsp/warm.py) against base = _dev/base (a7e270b).
#   OUT=... bash tools/bsp/session14_call2.sh
set -u
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD
OUT=${OUT:?}; PY=python3; CFG=config/bsp/dgmosfet.yaml; CASE=6x65x65x300x48:cupy:1:5:1
L=$OUT/c2; mkdir -p $L
echo "== startup_device (cold x1, warm x5, probes)"
OUT=$L BASE=_dev/base ROUNDS=${ROUNDS:-5} timeout 300 bash tools/bsp/startup_device.sh > $L/startup.log 2>&1; tail -4 $L/startup.log
echo "== extra cold rounds"
for r in 2 3; do
  for t in base new; do
    d=$PWD; [ $t = base ] && d=$PWD/_dev/base
    rm -rf /tmp/cc_$t; ( cd $d && CUPY_CACHE_DIR=/tmp/cc_$t PYTHONPATH=$d timeout 200 $PY -m solver bsp bench-case $CASE $CFG --launched-at "$(date +%s.%N)" > $L/cold_${t}_$r.out 2> $L/cold_${t}_$r.err )
    echo "cold $t round $r startup_s $(tail -n 1 $L/cold_${t}_$r.out | $PY -c 'import json,sys; print(round(json.load(sys.stdin)["startup_s"], 3))')"
  done
done
echo "== spy cold (new)"
rm -rf /tmp/cc_spy; CUPY_CACHE_DIR=/tmp/cc_spy timeout 200 $PY tools/bsp/startup_trace.py spy "$CASE" $CFG --steps 2 > $L/spy_cold.json 2> $L/spy_cold.err
$PY - $L/spy_cold.json <<'P'
import json, sys
r = json.load(open(sys.argv[1]))
print("t_init", r["t_init"], "t_startup", r["t_startup"], r["modules"]["startup"], "steps", r["modules"]["steps"])
for m in r["modules"]["startup_list"]:
    print(f"  {m['at']:7.3f} {m['s']:6.3f} {'raw ' if m['raw'] else 'cupy'} {m['thread'][:12]:12s} {m['phase'][:34]:34s} {','.join(m['kernels'])[:50]}")
P
echo "== bitwise: 20-step coarse cupy run, base vs new"
for t in base new; do
  d=$PWD; [ $t = base ] && d=$PWD/_dev/base
  ( cd $d && PYTHONPATH=$d timeout 200 $PY -m solver run config/coarse.yaml --set time.steps=20 --set time.t_end_ps=null --backend cupy --out $L/run_$t > $L/run_$t.log 2>&1 ) || echo "run $t failed"
done
for f in profiles.csv profiles_t0.csv scalars.csv; do cmp $L/run_base/$f $L/run_new/$f && echo "$f identical"; done
echo "== gpu tests"
timeout 400 $PY -m pytest -q -m gpu tests/test_bsp_kernels_cuda_precompile.py tests/test_startup_imports.py tests/test_bsp_kernels_cuda_eigen_tw.py tests/test_bsp_kernels_cuda_eigen.py tests/test_bsp_iter_graph.py tests/test_bsp_kernels_cuda_newton.py 2>&1 | tail -5
cd $OUT && tar czf c2.tgz c2 && rm -rf c2/run_* && echo packed
