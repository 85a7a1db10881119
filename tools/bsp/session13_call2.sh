#!/usr/bin/env bash
# The second device call of the session of 2026-11-27 (5) on a 2-GPU host (<= ~420 s):
# GPU 0: bench A/B, base BASE (default _dev/b850) against this tree, standard and 6x65x129, 200 steps after 5,
#        interleaved, two rounds; then this tree with eigen_division=divide, and with bte_kernels=fast (one round each)
# GPU 1: host_timeline.py (standard, 6x65x129), the gpu tests of the touched files, the coarse 0.1 ps
#        validation, two 10-step standard runs byte for byte
set -u
export PYTHONUNBUFFERED=1 MPLBACKEND=Agg PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
OUT=${OUT:?set OUT}; BASE=${BASE:-_dev/b850}; L=/tmp/call2; rm -rf $L; mkdir -p $L; t0=$SECONDS; PY=python3
CFG=config/bsp/dgmosfet.yaml; STD=6x65x65x300x48; NZ129=6x65x129x300x48
echo "${SOLVER_SOURCE_COMMIT:-unknown}" > $L/commit.txt
nvidia-smi --query-gpu=name,driver_version --format=csv > $L/nvidia_smi.csv
bench() {  # TREE NAME [--set ...]
  local tree=$1 name=$2; shift 2; local c=${SOLVER_SOURCE_COMMIT:-unknown}; [ -f "$tree/COMMIT" ] && c=$(cat "$tree/COMMIT")
  ( cd "$tree" && SOLVER_SOURCE_COMMIT=$c PYTHONPATH=$PWD timeout 200 $PY -m solver bsp bench $CFG --case $STD:cupy:1:200:5 \
      --case $NZ129:cupy:1:200:5 "$@" --out $L/$name > $L/$name.log 2>&1 ) || echo "bench $name: exit $?"
}
lane0() {
  export CUDA_VISIBLE_DEVICES=0
  for r in 1 2; do bench $BASE base_$r; bench . new_$r; done
  bench . new_divide --set numerics.eigen_division=divide
  bench . new_fast --set numerics.bte_kernels=fast
}
lane1() {
  export CUDA_VISIBLE_DEVICES=1
  for m in $STD $NZ129; do timeout 60 $PY tools/bsp/host_timeline.py $m 60 10 40 > $L/timeline_$m.log 2>&1; done
  timeout 200 $PY -m pytest -m gpu -q -p no:cacheprovider tests/test_bsp_kernels_cuda_newton.py tests/test_bsp_iter_graph.py \
    tests/test_bsp_kernels_cuda_eigen_tw.py tests/test_bsp_kernels_cuda_eigen.py tests/test_bsp_kernels.py tests/test_timing.py \
    > $L/pytest_gpu.log 2>&1
  timeout 90 $PY -m solver run config/coarse.yaml --out /tmp/val --backend cupy --no-progress > $L/validation_run.log 2>&1
  $PY -m solver bsp validate /tmp/val --csv $L/validation_coarse.csv > $L/validate.log 2>&1; cp /tmp/val/run.json $L/validation_run.json
  SC="--set time.steps=10 --set time.t_end_ps=null --set output.checkpoint_every_steps=0 --no-progress --backend cupy"
  for r in 1 2; do timeout 40 $PY -m solver run config/standard.yaml --out /tmp/rep_$r $SC > $L/repeat_$r.log 2>&1; done
  for f in profiles.csv scalars.csv; do cmp /tmp/rep_1/$f /tmp/rep_2/$f && echo "standard $f identical"; done > $L/bitwise.txt 2>&1
}
( taskset -c 0-15 bash -c "$(declare -f bench lane0); L=$L PY=$PY CFG=$CFG STD=$STD NZ129=$NZ129 BASE=$BASE; lane0" ) &
( taskset -c 16-31 bash -c "$(declare -f lane1); L=$L PY=$PY STD=$STD NZ129=$NZ129; lane1" ) &
wait
echo "== done ($((SECONDS - t0)) s)"
tar czf $OUT/call2.tgz -C /tmp call2
tail -3 $L/pytest_gpu.log; tail -6 $L/validate.log; cat $L/bitwise.txt
for m in $STD $NZ129; do grep -A12 'host wall' $L/timeline_$m.log | head -14; done
echo "run,mesh,step_ms,bte_ms,dens_ms,iter_ms,newton"
for d in $L/base_* $L/new_*; do tail -n +2 $d/steps.csv 2>/dev/null | awk -F, -v n=$(basename $d) '{print n","$1","$5","$6","$7","$8","$9}'; done
