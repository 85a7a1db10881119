#!/bin/bash
# issue 14 round 6, device call 2: 1-thread check (kernel + bench, base b2d1bed vs new 64eda9d interleaved), 16/8 threads, 512-bit probe at 1/16
cd "$(dirname "$0")/.."   # _dev
R=$OUT/r2; mkdir -p $R
BASE=$PWD/numba_base; NEW=$PWD/numba
FEAT="$(python3 -c 'import llvmlite.binding as ll; print(ll.get_host_cpu_features().flatten())'),-prefer-256-bit"
M=6x65x65x300x48
run() { # tag tree commit zmm(0/1) case...
  local tag=$1 tree=$2 com=$3 z=$4; shift 4
  local cs=(); for c in "$@"; do cs+=(--case $c); done
  ( cd $tree && export PYTHONPATH=$tree:/tmp/site SOLVER_SOURCE_COMMIT=$com NUMBA_CACHE_DIR=/tmp/nbc_$(basename $tree)_$z
    if [ $z = 1 ]; then export NUMBA_CPU_FEATURES="$FEAT"; fi
    timeout 100 python3 -m solver bsp bench "${cs[@]}" --timeout 60 --out $R/$tag ) >> $R/log.txt 2>&1
}
stage() { # tag tree zmm threads
  ( cd $2 && export PYTHONPATH=$2:/tmp/site NUMBA_CACHE_DIR=/tmp/nbc_$(basename $2)_$3 NUMBA_NUM_THREADS=$4
    if [ $3 = 1 ]; then export NUMBA_CPU_FEATURES="$FEAT"; fi
    timeout 40 python3 tools/bsp/numba_stage.py 65 $4 stage_fused WENO_x ) > $R/stage_$1.txt 2>&1
}
t0=$(date +%s)
run base_w0 $BASE b2d1bed 0 6x17x17x20x8:numba:4:1:0 &
run new_w0 $NEW 64eda9d 0 6x17x17x20x8:numba:4:1:0 &
run new_w1 $NEW 64eda9d 1 6x17x17x20x8:numba:4:1:0 &
wait; echo "compiled after $(( $(date +%s) - t0 )) s" >> $R/log.txt
stage base_t1 $BASE 0 1
stage new_t1 $NEW 0 1
run base_1a $BASE b2d1bed 0 $M:numba:1:3:1
run new_1a $NEW 64eda9d 0 $M:numba:1:3:1
run base_1b $BASE b2d1bed 0 $M:numba:1:3:1
run new_1b $NEW 64eda9d 0 $M:numba:1:3:1
run base_16 $BASE b2d1bed 0 $M:numba:16:15:2
run new_16 $NEW 64eda9d 0 $M:numba:16:15:2
run newz_16 $NEW 64eda9d 1 $M:numba:16:15:2
run new_8 $NEW 64eda9d 0 $M:numba:8:6:1
echo "benched after $(( $(date +%s) - t0 )) s" >> $R/log.txt
[ $(( $(date +%s) - t0 )) -lt 140 ] && run newz_1 $NEW 64eda9d 1 $M:numba:1:3:1
echo "done after $(( $(date +%s) - t0 )) s" >> $R/log.txt
cd $R && for d in */; do d=${d%/}; [ -f $d/steps.csv ] && paste -d, <(tail -n +2 $d/steps.csv | cut -d, -f3,5-9) <(tail -n +2 $d/steps_spread.csv | cut -d, -f5,7,9) | sed "s|^|$d,|"; done > summary.csv
echo "tag,threads,step_ms,bte_ms,dens_ms,iter_ms,newton,min,median,max"; cat summary.csv; grep -h median stage_*.txt | head; for f in stage_*.txt; do echo $f; grep stage_fused $f; done; tail -3 log.txt
cd $OUT && tar czf round6_call2.tgz r2 && cp r2/summary.csv summary.txt
