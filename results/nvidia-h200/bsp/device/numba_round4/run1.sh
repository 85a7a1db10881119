#!/bin/bash
# round 1 (helper NUMBA): before (15b9bf5) vs after, 16-core host, standard mesh, numba
cd "$(dirname "$0")"
HERE=$PWD
{ lscpu; nproc; cat /sys/kernel/mm/transparent_hugepage/enabled; } > $OUT/host.txt 2>&1
M=6x65x65x300x48
for tree in numba_before numba; do
  cd $HERE/../$tree
  export PYTHONPATH=$PWD:/tmp/site NUMBA_CACHE_DIR=$PWD/.numba_cache
  # warm the numba cache (compile once), not timed
  python -m solver bsp bench --case 6x17x17x20x8:numba:2:1:0 --out $OUT/warm_$tree > $OUT/warm_$tree.log 2>&1
done
cd $HERE/../numba_before; export PYTHONPATH=$PWD:/tmp/site NUMBA_CACHE_DIR=$PWD/.numba_cache
python -m solver bsp bench --case $M:numba:1:3:1 --case $M:numba:16:10:2 --out $OUT/before > $OUT/before.log 2>&1
cd $HERE; export PYTHONPATH=$PWD:/tmp/site NUMBA_CACHE_DIR=$PWD/.numba_cache
python -m solver bsp bench --case $M:numba:1:4:1 --case $M:numba:2:6:1 --case $M:numba:4:8:2 --case $M:numba:8:10:2 --case $M:numba:16:10:2 --out $OUT/after > $OUT/after.log 2>&1
for t in 1 16; do
  timeout 40 python stage.py 65 $t > $OUT/kernels_after_t$t.txt 2>&1
done
for t in 1 16; do
  timeout 60 python -m solver bsp phases config/standard.yaml --backends numba --steps 3 --set numerics.threads=$t --out $OUT/ph$t --csv $OUT/phases_after_t$t.csv > $OUT/phases_t$t.log 2>&1
  rm -rf $OUT/ph$t
done
rm -rf $OUT/warm_*
echo "== before"; cat $OUT/before/steps.csv; echo "== after"; cat $OUT/after/steps.csv
for t in 1 16; do echo "== kernels t$t"; cat $OUT/kernels_after_t$t.txt; done
for t in 1 16; do echo "== phases t$t"; grep -E "step,|step/BTE|step/ITER,|DENS" $OUT/phases_after_t$t.csv; done
