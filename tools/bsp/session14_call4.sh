#!/usr/bin/env bash
# Session 14, call 4 (one H200, 16 cores): the #13 helpers' kernel A/Bs, the #14 SMT probe, and what
# Python's bytecode cache does to the warm start-up (#12).     OUT=... bash tools/bsp/session14_call4.sh
set -u
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD
OUT=${OUT:?}; PY=python3; CFG=config/bsp/dgmosfet.yaml; CASE=6x65x65x300x48:cupy:1:5:1
L=$OUT/c4; mkdir -p $L
echo "== cpu pair probe (alone)"
timeout 60 $PY tools/bsp/cpu_pair_probe.py > $L/cpu_pair_probe.log 2>&1; tail -12 $L/cpu_pair_probe.log
lscpu > $L/lscpu.txt 2>&1
echo "== bytecode: PYTHONDONTWRITEBYTECODE=${PYTHONDONTWRITEBYTECODE-unset}, sys.flags $($PY -c 'import sys; print(sys.flags.dont_write_bytecode)')"
su() { tail -n 1 "$1" | $PY -c 'import json,sys; print(round(json.load(sys.stdin)["startup_s"], 3))' 2>/dev/null || echo nan; }
for r in 1 2 3; do timeout 100 $PY -m solver bsp bench-case $CASE $CFG --launched-at "$(date +%s.%N)" > $L/nopyc_$r.out 2>&1; echo "as is (no bytecode cache) round $r: $(su $L/nopyc_$r.out)"; done
env -u PYTHONDONTWRITEBYTECODE timeout 100 $PY -m solver bsp bench-case $CASE $CFG > $L/pyc_fill.out 2>&1
for r in 1 2 3; do env -u PYTHONDONTWRITEBYTECODE timeout 100 $PY -m solver bsp bench-case $CASE $CFG --launched-at "$(date +%s.%N)" > $L/pyc_$r.out 2>&1; echo "bytecode cache written and read, round $r: $(su $L/pyc_$r.out)"; done
$PY -c 'import numpy, os; print("numpy pycache now", os.path.isdir(os.path.join(os.path.dirname(numpy.__file__), "_core", "__pycache__")))'
for s in wenox_device.sh rho_scat_device.sh; do
  if [ -f tools/bsp/$s ]; then echo "== $s"; OUT=$L/${s%.sh} timeout 240 bash tools/bsp/$s > $L/${s%.sh}.log 2>&1; echo "exit $?"; tail -25 $L/${s%.sh}.log; fi
done
echo "== bench A/B: base (_dev/base = a7e270b) vs new, interleaved, 200 / 100 steps after 5"
for r in 1 2; do
  for t in base new; do
    d=$PWD; [ $t = base ] && d=$PWD/_dev/base
    ( cd $d && PYTHONPATH=$d timeout 120 $PY -m solver bsp bench $CFG --case 6x65x65x300x48:cupy:1:200:5 --case 6x129x129x600x96:cupy:1:100:5 --out $L/bench_${t}_$r > $L/bench_${t}_$r.log 2>&1 ) || echo "bench $t $r failed"
  done
done
echo "run,mesh,backend,threads,steps,step_ms,bte_ms,dens_ms,iter_ms"
for d in $L/bench_*_*; do [ -d $d ] && tail -n +2 $d/steps.csv | awk -F, -v n=$(basename $d) '{print n","$1","$2","$3","$4","$5","$6","$7","$8}'; done
cd $OUT && tar czf c4.tgz c4 && echo packed
