#!/usr/bin/env bash
# Final device call: coarse 0.1 ps validation (cupy), bitwise repeats, the bsp_bench cases (cupy, 200 steps),
# the gpu tests of the kernels, numba 1/16 threads.  Priorities in that order; time-guarded.
set -uo pipefail
export PYTHONUNBUFFERED=1 MPLBACKEND=Agg
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=$PWD:/tmp/site PATH=/tmp/site/bin:$PATH BSP_SHARED=$PWD/_dev/shared SOLVER_SOURCE_COMMIT=$(cat _dev/COMMIT)
t0=$SECONDS; left() { echo $((${1} - (SECONDS - t0))); }
L=$OUT/final; mkdir -p $L
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > $L/nvidia_smi.csv
echo "commit $SOLVER_SOURCE_COMMIT" | tee $L/commit.txt
echo "== validation ($((SECONDS-t0)) s)"
timeout 60 python3 -m solver run config/coarse.yaml --out /tmp/val --backend cupy --no-progress > $L/validation_run.log 2>&1
python3 -m solver bsp validate /tmp/val --csv $L/validation_coarse.csv > $L/validate.log 2>&1; tail -6 $L/validate.log
cp /tmp/val/run.json $L/validation_run.json 2>/dev/null
echo "== bitwise ($((SECONDS-t0)) s)"
SC="--set time.steps=10 --set output.checkpoint_every_steps=0 --no-progress --backend cupy"
for tag in coarse nz129; do
  ms=""; [ $tag = nz129 ] && ms="--set mesh.NZ=129"
  for r in 1 2; do timeout 60 python3 -m solver run config/coarse.yaml --out /tmp/${tag}_$r $SC $ms > $L/repeat_${tag}_$r.log 2>&1; done
  for f in profiles.csv scalars.csv; do cmp /tmp/${tag}_1/$f /tmp/${tag}_2/$f && echo "$tag $f identical"; done
done 2>&1 | tee $L/bitwise.txt
echo "== bench cupy ($((SECONDS-t0)) s)"
C=""; for m in 6x33x33x150x24 6x65x65x300x48 6x129x65x300x48 6x65x129x300x48 6x65x65x600x48 6x65x65x300x96 6x97x97x450x72 6x129x129x600x96 6x33x257x150x24; do C="$C --case $m:cupy:1:200:5"; done
timeout $(left 200) python3 -m solver bsp bench config/bsp/dgmosfet.yaml $C --out $L/bench_cupy > $L/bench_cupy.log 2>&1; echo "rc=$?"
echo "== gpu tests ($((SECONDS-t0)) s)"
timeout $(left 270) python3 -m pytest -m gpu -q -p no:cacheprovider tests/test_bsp_kernels.py tests/test_bsp_kernels_cuda_rk.py tests/test_bsp_kernels_cuda_newton.py tests/test_bsp_blocktri_batched.py tests/test_bsp_kernels_cuda_weno.py > $L/pytest_gpu.log 2>&1; tail -2 $L/pytest_gpu.log
echo "== bench numba ($((SECONDS-t0)) s)"
timeout $(left 322) python3 -m solver bsp bench config/bsp/dgmosfet.yaml --case 6x65x65x300x48:numba:16:10:2 --case 6x65x65x300x48:numba:1:5:1 --out $L/bench_numba > $L/bench_numba.log 2>&1; echo "rc=$?"
echo "== summary ($((SECONDS-t0)) s)"
cat $L/validation_coarse.csv; cat $L/bitwise.txt
cut -d, -f1-10 $L/bench_cupy/steps.csv 2>/dev/null; cut -d, -f1-10 $L/bench_numba/steps.csv 2>/dev/null
