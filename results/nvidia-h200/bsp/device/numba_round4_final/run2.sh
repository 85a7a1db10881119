#!/bin/bash
# round 4, final (helper NUMBA): thread sweep of the final code, before (15b9bf5) at 16 threads in
# the same call, BTE kernels at 1/16 threads (incl. the fused stage), ITER subphases 1/16, compute scaling
cd "$(dirname "$0")"
HERE=$PWD
M=6x65x65x300x48
for tree in numba_before numba; do
  cd $HERE/../$tree
  export PYTHONPATH=$PWD:/tmp/site NUMBA_CACHE_DIR=$PWD/.numba_cache
  python -m solver bsp bench --case 6x17x17x20x8:numba:2:1:0 --out $OUT/warm_$tree > $OUT/warm_$tree.log 2>&1
done
cd $HERE/../numba_before; export PYTHONPATH=$PWD:/tmp/site NUMBA_CACHE_DIR=$PWD/.numba_cache
python -m solver bsp bench --case $M:numba:16:10:2 --out $OUT/before > $OUT/before.log 2>&1
cd $HERE; export PYTHONPATH=$PWD:/tmp/site NUMBA_CACHE_DIR=$PWD/.numba_cache
python -m solver bsp bench --case $M:numba:1:4:1 --case $M:numba:2:6:1 --case $M:numba:4:8:2 --case $M:numba:8:10:2 --case $M:numba:16:10:2 --out $OUT/after > $OUT/after.log 2>&1
cp $OUT/after/steps.csv $OUT/steps_after.csv; cp $OUT/after/steps_spread.csv $OUT/steps_spread_after.csv
cp $OUT/before/steps_spread.csv $OUT/steps_spread_before.csv
for t in 1 16; do timeout 45 python stage.py 65 $t > $OUT/kernels_t$t.txt 2>&1; done
timeout 30 python spin.py > $OUT/spin.txt 2>&1
for t in 1 16; do timeout 40 python tools/bsp/numba_iter_bench.py config/standard.yaml --threads $t --repeat 3 > $OUT/iter_t$t.txt 2>&1; done
rm -rf $OUT/warm_* $OUT/after $OUT/before
echo "== before"; tail -3 $OUT/before.log; echo "== after"; cat $OUT/steps_spread_after.csv; cat $OUT/steps_after.csv
for t in 1 16; do echo "== kernels t$t"; cat $OUT/kernels_t$t.txt; done
cat $OUT/spin.txt
for t in 1 16; do echo "== iter t$t"; tail -9 $OUT/iter_t$t.txt; done
