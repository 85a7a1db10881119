#!/usr/bin/env bash
# The third device call of the session of 2026-11-27 (5) on a 2-GPU host (<= ~300 s): the host-time changes
# (density probe, f64, A1/A3 kept) and numerics.bte_graph as a default candidate.
# GPU 0: bench this tree, default vs --set numerics.bte_graph=true, standard / 6x65x129 / fine, 200 steps after 5,
#        interleaved, two rounds.  GPU 1: host_timeline.py standard (default, bte_graph=true), the gpu tests of the
#        changed files, the coarse 0.1 ps validation with bte_graph=true, two 10-step standard runs byte for byte.
set -u
export PYTHONUNBUFFERED=1 MPLBACKEND=Agg PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
OUT=${OUT:?set OUT}; L=/tmp/call3; rm -rf $L; mkdir -p $L; t0=$SECONDS; PY=python3
CFG=config/bsp/dgmosfet.yaml; STD=6x65x65x300x48; NZ129=6x65x129x300x48; FINE=6x129x129x600x96
echo "${SOLVER_SOURCE_COMMIT:-unknown}" > $L/commit.txt
bench() {  # NAME [--set ...]
  local name=$1; shift
  timeout 200 $PY -m solver bsp bench $CFG --case $STD:cupy:1:200:5 --case $NZ129:cupy:1:200:5 --case $FINE:cupy:1:200:5 \
    "$@" --out $L/$name > $L/$name.log 2>&1 || echo "bench $name: exit $?"
}
lane0() {
  export CUDA_VISIBLE_DEVICES=0
  for r in 1 2; do bench def_$r; bench graph_$r --set numerics.bte_graph=true; done
}
lane1() {
  export CUDA_VISIBLE_DEVICES=1
  timeout 60 $PY tools/bsp/host_timeline.py $STD 60 10 40 > $L/timeline_def.log 2>&1
  timeout 60 $PY tools/bsp/host_timeline.py $STD 60 10 0 numerics.bte_graph=true > $L/timeline_graph.log 2>&1
  timeout 150 $PY -m pytest -m gpu -q -p no:cacheprovider tests/test_bsp_density_probe.py tests/test_backend_host_copy.py \
    tests/test_bsp_kernels_cuda_eigen_tw.py tests/test_bsp_kernels_cuda_bte_graph.py tests/test_timing.py > $L/pytest_gpu.log 2>&1
  timeout 90 $PY -m solver run config/coarse.yaml --out /tmp/val --backend cupy --no-progress --set numerics.bte_graph=true \
    > $L/validation_run.log 2>&1
  $PY -m solver bsp validate /tmp/val --csv $L/validation_graph.csv > $L/validate.log 2>&1
  SC="--set time.steps=10 --set time.t_end_ps=null --set output.checkpoint_every_steps=0 --no-progress --backend cupy"
  for r in 1 2; do timeout 40 $PY -m solver run config/standard.yaml --out /tmp/rep_$r $SC > $L/repeat_$r.log 2>&1; done
  for f in profiles.csv scalars.csv; do cmp /tmp/rep_1/$f /tmp/rep_2/$f && echo "standard $f identical"; done > $L/bitwise.txt 2>&1
}
( taskset -c 0-15 bash -c "$(declare -f bench lane0); L=$L PY=$PY CFG=$CFG STD=$STD NZ129=$NZ129 FINE=$FINE; lane0" ) &
( taskset -c 16-31 bash -c "$(declare -f lane1); L=$L PY=$PY STD=$STD; lane1" ) &
wait
echo "== done ($((SECONDS - t0)) s)"
tar czf $OUT/call3.tgz -C /tmp call3
tail -3 $L/pytest_gpu.log; tail -6 $L/validate.log; cat $L/bitwise.txt
for f in def graph; do grep -A12 'host wall' $L/timeline_$f.log | head -13; done
echo "run,mesh,step_ms,bte_ms,dens_ms,iter_ms,newton"
for d in $L/def_* $L/graph_*; do tail -n +2 $d/steps.csv 2>/dev/null | awk -F, -v n=$(basename $d) '{print n","$1","$5","$6","$7","$8","$9}'; done
