#!/usr/bin/env bash
# The fourth device call of the session of 2026-11-27 (5) on a 2-GPU host (<= ~200 s):
# GPU 0: tools/bsp/resolve_device.sh (numerics.resolve fused vs levels: gpu tests, probe, bench A/B)
# GPU 1: numerics.overlap (WENO_x of the next stage on a second stream during ITER) false vs true,
#        standard / 6x65x129 / fine, 150 steps after 5, interleaved, two rounds
set -u
export PYTHONUNBUFFERED=1 MPLBACKEND=Agg PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
OUT=${OUT:?set OUT}; L=$OUT/call4; mkdir -p $L; t0=$SECONDS; PY=python3
CFG=config/bsp/dgmosfet.yaml
echo "${SOLVER_SOURCE_COMMIT:-unknown}" > $L/commit.txt
( export CUDA_VISIBLE_DEVICES=0; OUT=$L taskset -c 0-7 timeout 170 bash tools/bsp/resolve_device.sh > $L/resolve.log 2>&1 ) &
(
  export CUDA_VISIBLE_DEVICES=1
  for r in 1 2; do for ov in false true; do
    taskset -c 16-23 timeout 100 $PY -m solver bsp bench $CFG --case 6x65x65x300x48:cupy:1:150:5 --case 6x65x129x300x48:cupy:1:150:5 \
      --case 6x129x129x600x96:cupy:1:150:5 --set numerics.overlap=$ov --out $L/ov_${ov}_$r > $L/ov_${ov}_$r.log 2>&1 || echo "ov $ov $r: exit $?"
  done; done
) &
wait
echo "== done ($((SECONDS - t0)) s)"
tar czf $OUT/call4.tgz -C $OUT call4 && rm -rf $L
tar xzf $OUT/call4.tgz -C /tmp && tail -22 /tmp/call4/resolve.log
echo "run,mesh,step_ms,bte_ms,dens_ms,iter_ms,newton"
for d in /tmp/call4/ov_*; do [ -d $d ] && tail -n +2 $d/steps.csv | awk -F, -v n=$(basename $d) '{print n","$1","$5","$6","$7","$8","$9}'; done
