#!/bin/bash
# issue #14 round 5, call 1 (helper numba): before (c00b11b) vs after (x fused into the stage), stage kernels, ITER profile
cd "$(dirname "$0")"; HERE=$PWD; M=6x65x65x300x48
nproc > $OUT/host.txt; lscpu | head -20 >> $OUT/host.txt
for tree in numba_before numba; do
  ( cd $HERE/../$tree; export PYTHONPATH=$PWD:/tmp/site NUMBA_CACHE_DIR=/tmp/nbc_$tree
    s=$(date +%s%N); python -m solver bsp bench --case 6x17x17x20x8:numba:16:1:0 --out $OUT/warm_$tree > $OUT/warm_$tree.log 2>&1
    echo "cold compile + 1 tiny step, $tree: $(( ($(date +%s%N) - s) / 1000000 )) ms" >> $OUT/cold.txt ) &
done; wait
b() { tree=$1; shift; name=$1; shift; cd $HERE/../$tree; export PYTHONPATH=$PWD:/tmp/site NUMBA_CACHE_DIR=/tmp/nbc_$tree
  timeout 100 python -m solver bsp bench "$@" --out $OUT/$name > $OUT/$name.log 2>&1; }
b numba_before before16 --case $M:numba:16:10:2
b numba after16 --case $M:numba:16:10:2 --case $M:numba:16:3:0
b numba after1 --case $M:numba:1:3:1
cd $HERE; export PYTHONPATH=$PWD:/tmp/site NUMBA_CACHE_DIR=/tmp/nbc_numba
timeout 40 python tools/bsp/numba_stage.py 65 16 WENO_x stage_fused x+stage_fused stage_x_fused > $OUT/stage_t16.txt 2>&1
for t in 16 1; do timeout 45 python tools/bsp/numba_iter_profile.py config/standard.yaml --threads $t --repeat 3 > $OUT/iterprof_t$t.txt 2>&1; done
mkdir -p $OUT/r; for n in before16 after16 after1; do cp $OUT/$n/steps.csv $OUT/r/steps_$n.csv; cp $OUT/$n/steps_spread.csv $OUT/r/spread_$n.csv; cp $OUT/$n.log $OUT/r/; done
cp $OUT/*.txt $OUT/warm_*.log $OUT/r/ 2>/dev/null; tar czf $OUT/round5_call1.tgz -C $OUT r
rm -rf $OUT/warm_* $OUT/before16 $OUT/after16 $OUT/after1 $OUT/r $OUT/*.log $OUT/host.txt
cat $OUT/cold.txt; for n in before16 after16 after1; do tar xzf $OUT/round5_call1.tgz -O r/steps_$n.csv | cut -d, -f1-12; done
cat $OUT/stage_t16.txt; cat $OUT/iterprof_t16.txt; cat $OUT/iterprof_t1.txt
