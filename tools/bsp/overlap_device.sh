#!/usr/bin/env bash
# numerics.iter_overlap on the device (docs/performance-iter-overlap.md): its gpu tests, then a same-call
# A/B of the bench (standard and NZ = 129 meshes, 200 steps after 5) with the variant off / on,
# alternated, two rounds (a bench not started past ~133 s).  From the repository root, <= 150 s:  OUT=... bash tools/bsp/overlap_device.sh
PY=python3 BSP_COMMIT=git; . "$(dirname "$0")/_preamble.sh"  # set -u, env, SOLVER_SOURCE_COMMIT, OUT
L=$OUT/overlap; mkdir -p "$L"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > "$L/nvidia_smi.csv" 2>&1
CFG=config/bsp/dgmosfet.yaml; STD=6x65x65x300x48; NZ129=6x65x129x300x48
echo "== gpu tests ($SECONDS s)"
timeout 60 $PY -m pytest -m gpu -q -s -p no:cacheprovider tests/test_bsp_iter_overlap.py > "$L/pytest_gpu.log" 2>&1
echo "pytest exit $?"
grep -E "^iter_overlap|passed|failed|Error" "$L/pytest_gpu.log" | tail -12
echo "== A/B ($SECONDS s)"
for r in 1 2; do
  for v in false true; do
    left=$((145 - SECONDS)); [ "$left" -lt 12 ] && { echo "bench $v $r: skipped (budget)"; continue; }
    [ "$left" -gt 30 ] && left=30
    timeout $left $PY -m solver bsp bench $CFG --case $STD:cupy:1:200:5 --case $NZ129:cupy:1:200:5 \
      --set numerics.iter_overlap=$v --out "$L/ab_${v}_$r" > "$L/ab_${v}_$r.log" 2>&1 || echo "bench $v $r: exit $?"
  done
done
echo "== summary ($SECONDS s)"
echo "run,mesh,backend,threads,steps,step_ms,bte_ms,dens_ms,iter_ms,newton_per_step" > "$L/summary.csv"
for d in "$L"/ab_*/; do tail -n +2 "$d/steps.csv" 2>/dev/null | cut -d, -f1-9 | sed "s/^/$(basename "$d"),/" >> "$L/summary.csv"; done
column -s, -t < "$L/summary.csv" 2>/dev/null || cat "$L/summary.csv"
