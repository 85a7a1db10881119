#!/usr/bin/env bash
# The final device call of the session of 2026-11-27 (6, session 14) on a 2-GPU host (<= ~540 s), the final code:
# GPU 0 (cores 0-3):  the bsp_bench cases of config/gpu.yaml (cupy, 200 steps after 5; three runs of the goal
#                     meshes, one of the rest), the start-up (startup_device.sh), the second half of the gpu tests
# GPU 1 (cores 4-7):  the first half of the gpu tests, the coarse 0.1 ps validation, two 10-step runs each of the coarse and
#                     standard meshes byte for byte, host_timeline.py of the standard mesh, iter_graph_probe.py
# cores 16-31:        the numba bench rows (16/8/4/2/1 threads), the coarse validation on numba (16 threads),
#                     then EXTRA_CPU (optional command)
# Files: $OUT/final.tgz; a short table last.
set -u
export PYTHONUNBUFFERED=1 MPLBACKEND=Agg PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
OUT=${OUT:?set OUT}; L=/tmp/final; rm -rf $L; mkdir -p $L; t0=$SECONDS; PY=python3
CFG=config/bsp/dgmosfet.yaml; STD=6x65x65x300x48; NZ129=6x65x129x300x48; FINE=6x129x129x600x96
echo "${SOLVER_SOURCE_COMMIT:-unknown}" > $L/commit.txt
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > $L/nvidia_smi.csv
bench() { local name=$1; shift; timeout 300 $PY -m solver bsp bench $CFG "$@" --out $L/$name > $L/$name.log 2>&1 || echo "bench $name: exit $?"; }
lane0() {
  export CUDA_VISIBLE_DEVICES=0
  local C=""
  for m in 6x33x33x150x24 $STD 6x129x65x300x48 $NZ129 6x65x65x600x48 6x65x65x300x96 6x97x97x450x72 $FINE 6x33x257x150x24; do
    C="$C --case $m:cupy:1:200:5"
  done
  taskset -c 0-3 bash -c "$(declare -f bench); L=$L PY=$PY CFG=$CFG; bench bench_cupy_1 $C"
  for r in 2 3; do
    taskset -c 0-3 bash -c "$(declare -f bench); L=$L PY=$PY CFG=$CFG; bench bench_cupy_$r --case $STD:cupy:1:200:5 --case $NZ129:cupy:1:200:5 --case $FINE:cupy:1:200:5"
  done
  OUT=$L/startup_out ROUNDS=2 taskset -c 0-3 timeout 90 bash tools/bsp/startup_device.sh > $L/startup.log 2>&1
  # the second half of the gpu tests (the first: lane 1)
  local left=$(( 560 - SECONDS )); [ $left -lt 30 ] && left=30
  taskset -c 0-3 timeout $left $PY -m pytest -m gpu -q -p no:cacheprovider tests/test_bsp_kernels_cuda_[o-z]*.py \
    tests/test_bsp_kernels_[n-z]*.py tests/test_bsp_kr*.py tests/test_bsp_[l-z]*.py tests/test_[c-z]*.py > $L/pytest_gpu_b.log 2>&1
}
lane1() {
  export CUDA_VISIBLE_DEVICES=1
  taskset -c 4-7 timeout 330 $PY -m pytest -m gpu -q -p no:cacheprovider tests/test_backend*.py tests/test_bsp_[a-j]*.py \
    tests/test_bsp_kernels.py tests/test_bsp_kernels_cuda_[a-n]*.py > $L/pytest_gpu.log 2>&1
  taskset -c 4-7 timeout 90 $PY -m solver run config/coarse.yaml --out /tmp/val --backend cupy --no-progress > $L/validation_run.log 2>&1
  $PY -m solver bsp validate /tmp/val --csv $L/validation_coarse.csv > $L/validate.log 2>&1; cp /tmp/val/run.json $L/validation_run.json
  local SC="--set time.steps=10 --set time.t_end_ps=null --set output.checkpoint_every_steps=0 --no-progress --backend cupy"
  for c in coarse:config/coarse.yaml standard:config/standard.yaml; do
    n=${c%%:*}; a=${c#*:}
    for r in 1 2; do taskset -c 4-7 timeout 60 $PY -m solver run $a --out /tmp/rep_${n}_$r $SC > $L/repeat_${n}_$r.log 2>&1; done
    for f in profiles.csv scalars.csv; do cmp /tmp/rep_${n}_1/$f /tmp/rep_${n}_2/$f && echo "$n $f identical"; done
  done > $L/bitwise.txt 2>&1
  taskset -c 4-7 timeout 60 $PY tools/bsp/host_timeline.py $STD 60 10 0 > $L/timeline_std.log 2>&1
  for m in $STD $NZ129; do taskset -c 4-7 timeout 60 $PY tools/bsp/iter_graph_probe.py $m 30 > $L/iter_graph_$m.log 2>&1; done
}
lanec() {
  taskset -c 16-31 bash -c "$(declare -f bench); L=$L PY=$PY CFG=$CFG; bench bench_numba --case $STD:numba:16:20:2 --case $STD:numba:8:10:1 --case $STD:numba:4:5:1 --case $STD:numba:2:3:1 --case $STD:numba:1:3:1"
  NUMBA_NUM_THREADS=16 taskset -c 16-31 timeout 120 $PY -m solver run config/coarse.yaml --out /tmp/val_numba --backend numba \
    --threads 16 --no-progress > $L/validation_numba_run.log 2>&1
  $PY -m solver bsp validate /tmp/val_numba --csv $L/validation_numba_coarse.csv > $L/validate_numba.log 2>&1
  cp /tmp/val_numba/run.json $L/validation_numba_run.json 2>/dev/null
  if [ -n "${EXTRA_CPU:-}" ]; then OUT=$L/extra_cpu taskset -c 16-31 timeout 160 bash -c "$EXTRA_CPU" > $L/extra_cpu.log 2>&1; fi
}
echo "== cpu pair probe (alone, before the lanes)"
timeout 60 $PY tools/bsp/cpu_pair_probe.py --cpus 0-$(( $(nproc) - 1 )) --max $(nproc) > $L/cpu_pair_probe.log 2>&1; tail -8 $L/cpu_pair_probe.log
for l in lane0 lane1 lanec; do ( $l; echo "$l done $((SECONDS - t0)) s" ) > $L/$l.log 2>&1 & done
wait
echo "== done ($((SECONDS - t0)) s)"
tar czf $OUT/final.tgz -C /tmp final
cat $L/lane*.log; tail -3 $L/pytest_gpu.log; tail -3 $L/pytest_gpu_b.log; tail -6 $L/validate.log; tail -6 $L/validate_numba.log; cat $L/bitwise.txt
tail -2 $L/startup.log; tail -12 $L/extra_gpu0.log 2>/dev/null; tail -12 $L/extra_cpu.log 2>/dev/null
grep -A10 'host wall' $L/timeline_std.log | head -11; grep -h 'replay, GPU' $L/iter_graph_*.log
echo "run,mesh,backend,threads,step_ms,bte_ms,dens_ms,iter_ms,newton"
for d in $L/bench_*; do tail -n +2 $d/steps.csv 2>/dev/null | awk -F, -v n=$(basename $d) '{print n","$1","$2","$3","$5","$6","$7","$8","$9}'; done
