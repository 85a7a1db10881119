#!/usr/bin/env bash
# Block-tridiagonal ITER fast path (kernels/cuda_blocktri.py) on the device, one call: the BSP GPU
# tests, per-call bench (Frechet, construct, solve: new vs dense/array), per-phase times of the
# coarse (10 steps) and standard (3 steps) meshes with numerics.kernels=auto, and the coarse
# t = 0.1 ps validation against the reference.  Logs and CSVs under $OUT; a short table last.
# usage: OUT=/tmp/x bash workflow/scripts/bsp_blocktri_device.sh
set -u
export PYTHONUNBUFFERED=1 MPLBACKEND=Agg PYTHONPATH=$PWD
OUT=${OUT:-/tmp/bsp_blocktri_out}; mkdir -p "$OUT"
t0=$SECONDS
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
echo "== gpu tests ($((SECONDS-t0)) s)"
timeout 200 python3 -m pytest -m gpu -q -p no:cacheprovider tests/test_bsp_*.py > "$OUT/pytest_gpu_blocktri.log" 2>&1
echo "pytest exit $?"; tail -15 "$OUT/pytest_gpu_blocktri.log"
echo "== per-call bench ($((SECONDS-t0)) s)"
timeout 90 python3 workflow/scripts/bsp_blocktri_bench.py config/coarse.yaml config/standard.yaml --csv "$OUT/bench_newton_pieces.csv" 2>&1 | tail -20
echo "== coarse phases ($((SECONDS-t0)) s)"
timeout 90 python3 -m solver bsp phases config/coarse.yaml --backends cupy --steps 10 --set numerics.kernels=auto \
   --out /tmp/bt_coarse --csv "$OUT/phases_coarse_cupy_blocktri.csv" > "$OUT/phases.log" 2>&1; echo "exit $?"
echo "== standard phases ($((SECONDS-t0)) s)"
timeout 90 python3 -m solver bsp phases config/standard.yaml --backends cupy --steps 3 --set numerics.kernels=auto \
   --out /tmp/bt_std --csv "$OUT/phases_standard_cupy_blocktri.csv" >> "$OUT/phases.log" 2>&1; echo "exit $?"
left=$((470 - (SECONDS-t0)))
echo "== coarse validation, limit ${left} s ($((SECONDS-t0)) s)"
if [ $left -gt 60 ]; then
  timeout $left python3 -m solver run config/coarse.yaml --out /tmp/bt_val --backend cupy --no-progress > "$OUT/validation_coarse_blocktri.log" 2>&1
  echo "run exit $?"; tail -3 "$OUT/validation_coarse_blocktri.log"
  python3 -c "import json;d=json.load(open('/tmp/bt_val/run.json'));print(d.get('summary'))" 2>/dev/null
  python3 -m solver bsp validate /tmp/bt_val --csv "$OUT/validation_coarse_blocktri.csv" 2>&1 | tail -12
fi
echo "== summary ($((SECONDS-t0)) s)"
tail -1 "$OUT/pytest_gpu_blocktri.log"
for f in "$OUT"/phases_*_cupy_blocktri.csv; do echo "-- $f"; grep -E ",step,|step/BTE,|step/ITER" "$f"; done
