#!/bin/bash
# issue 14 round 6, device call 1: base b2d1bed vs new (interleaved fused stage), + 512-bit vectors (NUMBA_CPU_FEATURES) as a probe
cd "$(dirname "$0")/.."   # _dev
R=$OUT/r; mkdir -p $R
BASE=$PWD/numba_base; NEW=$PWD/numba
FEAT="$(python3 -c 'import llvmlite.binding as ll; print(ll.get_host_cpu_features().flatten())'),-prefer-256-bit"
(nproc; lscpu; python3 -c 'import llvmlite.binding as ll; print(ll.get_host_cpu_name())') > $R/host.txt 2>&1
M=6x65x65x300x48
run() { # tag tree commit zmm(0/1) case...
  local tag=$1 tree=$2 com=$3 z=$4; shift 4
  local cs=(); for c in "$@"; do cs+=(--case $c); done
  ( cd $tree && export PYTHONPATH=$tree:/tmp/site SOLVER_SOURCE_COMMIT=$com NUMBA_CACHE_DIR=/tmp/nbc_$(basename $tree)_$z
    if [ $z = 1 ]; then export NUMBA_CPU_FEATURES="$FEAT"; fi
    timeout 150 python3 -m solver bsp bench "${cs[@]}" --timeout 90 --out $R/$tag ) >> $R/log.txt 2>&1
}
t0=$(date +%s)
# compile every variant side by side (tiny mesh, same signatures)
run base_w0 $BASE b2d1bed 0 6x17x17x20x8:numba:4:1:0 &
run new_w0 $NEW 64eda9d 0 6x17x17x20x8:numba:4:1:0 &
run base_w1 $BASE b2d1bed 1 6x17x17x20x8:numba:4:1:0 &
run new_w1 $NEW 64eda9d 1 6x17x17x20x8:numba:4:1:0 &
wait; echo "compiled after $(( $(date +%s) - t0 )) s" >> $R/log.txt
run base_16a $BASE b2d1bed 0 $M:numba:16:15:2
run new_16a $NEW 64eda9d 0 $M:numba:16:15:2
run base_16b $BASE b2d1bed 0 $M:numba:16:15:2
run new_16b $NEW 64eda9d 0 $M:numba:16:15:2
run base_1 $BASE b2d1bed 0 $M:numba:1:3:1
run new_1 $NEW 64eda9d 0 $M:numba:1:3:1
run basez_16 $BASE b2d1bed 1 $M:numba:16:15:2
run newz_16 $NEW 64eda9d 1 $M:numba:16:15:2
echo "benched after $(( $(date +%s) - t0 )) s" >> $R/log.txt
for tr in base new; do T=$BASE; [ $tr = new ] && T=$NEW
  ( cd $T && PYTHONPATH=$T:/tmp/site NUMBA_CACHE_DIR=/tmp/nbc_$(basename $T)_0 timeout 40 python3 tools/bsp/numba_stage.py 65 16 WENO_x scat_gain scat_loss stage_fused ) > $R/stage_${tr}_16.txt 2>&1
done
echo "done after $(( $(date +%s) - t0 )) s" >> $R/log.txt
cd $R && for f in */steps.csv; do tail -n +2 $f | sed "s|^|${f%/steps.csv},|"; done > summary.csv
cat summary.csv; cat stage_*_16.txt; tail -3 log.txt
cd $OUT && tar czf round6_call1.tgz r && cp r/summary.csv summary.txt
