#!/bin/bash
# issue #14 round 5, call 2 (helper numba): before (c00b11b), x-fused (1bf75e4) and after (final) in one call
cd "$(dirname "$0")"; HERE=$PWD; M=6x65x65x300x48
for tree in numba_before numba_xfused numba; do
  ( cd $HERE/../$tree; export PYTHONPATH=$PWD:/tmp/site NUMBA_CACHE_DIR=/tmp/nbc2_$tree
    s=$(date +%s%N); python -m solver bsp bench --case 6x17x17x20x8:numba:16:1:0 --out $OUT/warm_$tree > $OUT/warm_$tree.log 2>&1
    echo "cold compile + 1 tiny step, $tree: $(( ($(date +%s%N) - s) / 1000000 )) ms" >> $OUT/cold.txt ) &
done; wait
b() { tree=$1; shift; name=$1; shift; cd $HERE/../$tree; export PYTHONPATH=$PWD:/tmp/site NUMBA_CACHE_DIR=/tmp/nbc2_$tree
  timeout 100 python -m solver bsp bench "$@" --out $OUT/b/$name > $OUT/b/$name.log 2>&1; }
mkdir -p $OUT/b
b numba_before before16a --case $M:numba:16:10:2
b numba after16a --case $M:numba:16:10:2
b numba_xfused xfused16 --case $M:numba:16:10:2
b numba_before before16b --case $M:numba:16:10:2 --case $M:numba:16:3:0
b numba after16b --case $M:numba:16:10:2 --case $M:numba:16:3:0
b numba_before before1 --case $M:numba:1:3:1
b numba after1 --case $M:numba:1:3:1
b numba_xfused xfused1 --case $M:numba:1:3:1
b numba afterT --case $M:numba:8:6:1 --case $M:numba:4:4:1 --case $M:numba:2:3:1
cd $HERE; export PYTHONPATH=$PWD:/tmp/site NUMBA_CACHE_DIR=/tmp/nbc2_numba
timeout 40 python tools/bsp/numba_iter_profile.py config/standard.yaml --threads 16 --repeat 3 > $OUT/b/iterprof_t16.txt 2>&1
cp $OUT/cold.txt $OUT/warm_*.log $OUT/b/; tar czf $OUT/round5_call2.tgz -C $OUT b
cat $OUT/cold.txt
for n in before16a after16a xfused16 before16b after16b before1 after1 xfused1 afterT; do echo "== $n"; cut -d, -f1-10 $OUT/b/$n/steps.csv | tail -n +2; cut -d, -f3,5-9 $OUT/b/$n/steps_spread.csv | tail -n +2; done
head -20 $OUT/b/iterprof_t16.txt
rm -rf $OUT/b $OUT/warm_*
