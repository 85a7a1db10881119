#!/usr/bin/env bash
# Round 3 of the ITER fast path on the device, one call: the BSP GPU tests, the per-call bench
# (block cyclic reduction vs single-block Thomas vs dense getrf, CR warps per block, fused Newton
# glue vs array), per-phase times coarse (10 steps) / standard (3 steps) with numerics.kernels=auto,
# and the whole coarse t = 0.1 ps validation (wall time / 1265 steps).  Files under $OUT.
# usage: OUT=/tmp/x bash workflow/scripts/bsp_blocktri_round3_device.sh
set -u
export PYTHONUNBUFFERED=1 MPLBACKEND=Agg PYTHONPATH=$PWD
OUT=${OUT:-/tmp/bsp_round3_out}; mkdir -p "$OUT"
t0=$SECONDS
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
echo "== gpu tests ($((SECONDS-t0)) s)"
timeout 100 python3 -m pytest -m gpu -q -p no:cacheprovider tests/test_bsp_*.py > "$OUT/pytest_gpu_round3.log" 2>&1
echo "pytest exit $?"; grep -E "FAILED|Error|passed|failed" "$OUT/pytest_gpu_round3.log" | tail -12
echo "== per-call bench ($((SECONDS-t0)) s)"
timeout 80 python3 workflow/scripts/bsp_blocktri_bench.py config/coarse.yaml config/standard.yaml \
   --csv "$OUT/bench_newton_pieces_round3.csv" > "$OUT/bench_round3.log" 2>&1; echo "bench exit $?"
cat "$OUT/bench_round3.log" | tail -40
nw=$(grep BEST_CR_NWARPS "$OUT/bench_round3.log" | awk '{print $2}')
if [ -n "$nw" ]; then export BSP_CR_NWARPS=$nw; fi
echo "BSP_CR_NWARPS=${BSP_CR_NWARPS:-default}"
echo "== coarse phases ($((SECONDS-t0)) s)"
timeout 70 python3 -m solver bsp phases config/coarse.yaml --backends cupy --steps 10 --set numerics.kernels=auto \
   --out /tmp/r3_coarse --csv "$OUT/phases_coarse_cupy_round3.csv" > "$OUT/phases_round3.log" 2>&1; echo "exit $?"
echo "== standard phases ($((SECONDS-t0)) s)"
timeout 70 python3 -m solver bsp phases config/standard.yaml --backends cupy --steps 3 --set numerics.kernels=auto \
   --out /tmp/r3_std --csv "$OUT/phases_standard_cupy_round3.csv" >> "$OUT/phases_round3.log" 2>&1; echo "exit $?"
left=$((285 - (SECONDS-t0)))
echo "== coarse validation, limit ${left} s ($((SECONDS-t0)) s)"
if [ $left -gt 40 ]; then
  ts=$(date +%s.%N)
  timeout $left python3 -m solver run config/coarse.yaml --out /tmp/r3_val --backend cupy --no-progress > "$OUT/validation_coarse_round3.log" 2>&1
  rc=$?; te=$(date +%s.%N)
  echo "run exit $rc wall $(python3 -c "print(f'{$te-$ts:.2f}')") s"
  echo "validation_wall_s $(python3 -c "print(f'{$te-$ts:.3f}')")" >> "$OUT/validation_coarse_round3.log"
  tail -3 "$OUT/validation_coarse_round3.log"
  cp /tmp/r3_val/run.json "$OUT/validation_coarse_round3_run.json" 2>/dev/null
  python3 -c "import json;d=json.load(open('/tmp/r3_val/run.json'));print({k: d[k] for k in d if k in ('steps','wall_s','summary','timing')})" 2>/dev/null
  python3 -m solver bsp validate /tmp/r3_val --csv "$OUT/validation_coarse_round3.csv" > "$OUT/validate_round3.log" 2>&1
  echo "validate exit $?"; tail -12 "$OUT/validate_round3.log"
fi
echo "== summary ($((SECONDS-t0)) s)"
tail -1 "$OUT/pytest_gpu_round3.log"
grep -E "solve_|rhs|norms" "$OUT/bench_round3.log"
for f in "$OUT"/phases_*_cupy_round3.csv; do echo "-- $f"; grep -E ",step,|step/BTE,|step/ITER" "$f"; done
