#!/usr/bin/env bash
# Dev call: numerics.iter_jacobian step vs iteration on the H200 (gpu tests of the resolve, coarse
# validation with the defaults, bitwise repeat, bench of 4 meshes in both modes).
set -uo pipefail
export PYTHONUNBUFFERED=1 MPLBACKEND=Agg
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=$PWD:/tmp/site PATH=/tmp/site/bin:$PATH BSP_SHARED=$PWD/_dev/shared SOLVER_SOURCE_COMMIT=$(cat _dev/COMMIT)
t0=$SECONDS; left() { echo $((${1} - (SECONDS - t0))); }
L=/tmp/jac_$SOLVER_SOURCE_COMMIT; mkdir -p $L
echo "== gpu tests newton ($((SECONDS-t0)) s)"
timeout 150 python3 -m pytest -m gpu -q -p no:cacheprovider tests/test_bsp_kernels_cuda_newton.py tests/test_bsp_kernels.py -k "newton or resolve or iter or potential or batched" > $L/pytest_gpu.log 2>&1; tail -3 $L/pytest_gpu.log
echo "== validation ($((SECONDS-t0)) s)"
timeout 90 python3 -m solver run config/coarse.yaml --out /tmp/val --backend cupy --no-progress > $L/validation_run.log 2>&1
python3 -m solver bsp validate /tmp/val --csv $L/validation_coarse.csv > $L/validate.log 2>&1; tail -6 $L/validate.log
grep -o '"newton[^,]*' /tmp/val/run.json | head -3
echo "== bitwise ($((SECONDS-t0)) s)"
SC="--set time.steps=10 --set output.checkpoint_every_steps=0 --no-progress --backend cupy"
for r in 1 2; do timeout 60 python3 -m solver run config/standard.yaml --out /tmp/std_$r $SC > $L/repeat_$r.log 2>&1; done
for f in profiles.csv scalars.csv; do cmp /tmp/std_1/$f /tmp/std_2/$f && echo "standard $f identical"; done 2>&1 | tee $L/bitwise.txt
echo "== bench ($((SECONDS-t0)) s)"
C=""; for m in 6x33x33x150x24 6x65x65x300x48 6x65x129x300x48 6x129x129x600x96; do C="$C --case $m:cupy:1:100:5"; done
timeout $(left 330) python3 -m solver bsp bench config/bsp/dgmosfet.yaml $C --out $L/bench_step > $L/bench_step.log 2>&1; echo "rc=$?"
timeout $(left 440) python3 -m solver bsp bench config/bsp/dgmosfet.yaml --set numerics.iter_jacobian_steps=1 $C --out $L/bench_iteration > $L/bench_iteration.log 2>&1; echo "rc=$?"
echo "== summary ($((SECONDS-t0)) s)"
tar czf $OUT/jac.tgz -C /tmp $(basename $L)
{ cat $L/validation_coarse.csv; cat $L/bitwise.txt; tail -2 $L/pytest_gpu.log
  cut -d, -f1-11 $L/bench_step/steps.csv 2>/dev/null; cut -d, -f1-11 $L/bench_iteration/steps.csv 2>/dev/null; } | tee $OUT/summary.txt
