#!/usr/bin/env bash
# numerics.resolve on the device (docs/performance-iter-resolve.md): the gpu tests of the fused resolve,
# the resolve alone as a captured graph (levels vs fused, 100 replays each, CUDA events), then the bench
# A/B of ITER per step (levels / fused alternated, two rounds).  ~150 s.  From the repository root:
#   OUT=... bash tools/bsp/resolve_device.sh
# (a bench run is not started past 125 s; each is ~15-20 s)
PY=python3 BSP_COMMIT=git; . "$(dirname "$0")/_preamble.sh"  # set -u, env, SOLVER_SOURCE_COMMIT, OUT
L=$OUT/resolve; mkdir -p "$L"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$L/gpu.txt"; cat "$L/gpu.txt"
CFG=config/bsp/dgmosfet.yaml; STD=6x65x65x300x48; NZ129=6x65x129x300x48
echo "== gpu tests ($SECONDS s)"
timeout 65 $PY -m pytest -m gpu -v -s -p no:cacheprovider tests/test_bsp_kernels_cuda_resolve.py > "$L/pytest_gpu.log" 2>&1
echo "pytest exit $? (124: timed out; the PASSED lines say how far it got)"
grep -cE "PASSED" "$L/pytest_gpu.log" | sed 's/^/tests passed: /'
grep -E "FAILED|Error|levels vs fused|[0-9]+ passed|failed" "$L/pytest_gpu.log" | tail -12
echo "== resolve graph replays ($SECONDS s)"
: > "$L/probe.log"
for nz in 65 129; do timeout 20 $PY tools/bsp/resolve_probe.py 65 $nz 100 >> "$L/probe.log" 2>&1 || echo "probe 65x$nz: exit $?"; done
grep -v "^RESOLVE" "$L/probe.log" | tail -12
echo "== bench A/B ($SECONDS s)"
for r in 1 2; do
  for v in levels fused; do
    if [ "$SECONDS" -gt 125 ]; then echo "bench $v $r: skipped (time)"; continue; fi
    timeout 45 $PY -m solver bsp bench $CFG --case $STD:cupy:1:200:5 --case $NZ129:cupy:1:200:5 \
      --set numerics.resolve=$v --out "$L/ab_${v}_$r" > "$L/ab_${v}_$r.log" 2>&1 || echo "bench $v $r: exit $?"
  done
done
echo "== summary ($SECONDS s)"
grep "^RESOLVE" "$L/probe.log" | sed 's/^RESOLVE,/resolve_us,NX=/' | awk -F, '{print $1","$2",NZ="$3",levels "$4",fused "$5",grid "$6}'
echo "run,mesh,backend,threads,steps,step_ms,bte_ms,dens_ms,iter_ms,newton_per_step" > "$L/summary.csv"
for d in "$L"/ab_*/; do tail -n +2 "$d/steps.csv" 2>/dev/null | cut -d, -f1-9 | sed "s/^/$(basename "$d"),/" >> "$L/summary.csv"; done
cat "$L/summary.csv"
