#!/usr/bin/env bash
# BTE round 7 device call 1: base 8a75bd0 (_dev/bte_base) vs new (_dev/bte) in one call; -> $OUT/r.tgz, $OUT/summary.txt
set -uo pipefail
export PYTHONUNBUFFERED=1
ROOT=$PWD; R=/tmp/w/r; mkdir -p $R; T=$ROOT/_dev/bte_tools
NEW=$(cat _dev/bte/COMMIT); BASE=$(cat _dev/bte_base/COMMIT)
pack() { tar czf $OUT/r.tgz -C /tmp/w r 2>/dev/null; cp $R/summary.txt $OUT/summary.txt 2>/dev/null; }
inb() { local d=$1 c=$2; shift 2; (cd $ROOT/_dev/$d && SOLVER_SOURCE_COMMIT=$c "$@"); }
left() { local l=$((288 - SECONDS)); echo $(( l > 5 ? l : 5 )); }
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader > $R/summary.txt
echo "== ktime ($SECONDS s)" >> $R/summary.txt
for t in "bte_base $BASE" "bte $NEW"; do set -- $t
  inb $1 $2 timeout 40 python3 $T/ktime.py $1 6x65x65x300x48 30 >> $R/ktime.csv 2>> $R/ktime.err
  inb $1 $2 timeout 40 python3 $T/ktime.py $1 6x129x129x600x96 10 >> $R/ktime.csv 2>> $R/ktime.err
done
cat $R/ktime.csv >> $R/summary.txt; pack
echo "== bench ($SECONDS s)" >> $R/summary.txt
CS="--case 6x65x65x300x48:cupy:1:200:5 --case 6x129x129x600x96:cupy:1:100:5"
for k in "bte_base $BASE base1" "bte $NEW new1" "bte $NEW graph1 --set numerics.bte_graph=true" \
         "bte_base $BASE base2" "bte $NEW new2" "bte $NEW graph2 --set numerics.bte_graph=true"; do set -- $k
  d=$1; c=$2; n=$3; shift 3
  [ $(left) -lt 120 ] && { echo "skip $n (time)" >> $R/summary.txt; continue; }
  inb $d $c timeout 45 python3 -m solver bsp bench config/bsp/dgmosfet.yaml $CS "$@" --out $R/bench_$n > $R/bench_$n.log 2>&1
  echo "$n rc $? ($SECONDS s)" >> $R/summary.txt; tail -n +2 $R/bench_$n/steps.csv 2>/dev/null | cut -d, -f1-10 >> $R/summary.txt; pack
done
echo "== bitwise, standard mesh 10 steps ($SECONDS s)" >> $R/summary.txt
SC="--set time.steps=10 --set time.t_end_ps=null --set output.checkpoint_every_steps=0 --backend cupy --no-progress"
inb bte $NEW timeout 30 python3 -m solver run config/standard.yaml --out /tmp/s1 $SC > $R/bitwise.log 2>&1
inb bte $NEW timeout 30 python3 -m solver run config/standard.yaml --out /tmp/s2 $SC >> $R/bitwise.log 2>&1
inb bte_base $BASE timeout 30 python3 -m solver run config/standard.yaml --out /tmp/s0 $SC >> $R/bitwise.log 2>&1
for f in profiles.csv scalars.csv; do cmp /tmp/s1/$f /tmp/s2/$f && echo "new run1 == run2 $f"; cmp /tmp/s1/$f /tmp/s0/$f && echo "new == base $f"; done >> $R/summary.txt 2>&1
pack
echo "== gpu tests ($SECONDS s)" >> $R/summary.txt
inb bte $NEW timeout $(left) python3 -m pytest -m gpu -q -p no:cacheprovider tests/test_bsp_kernels_cuda_rk.py tests/test_bsp_kernels_cuda_weno.py tests/test_bsp_kernels_cuda_bte_graph.py > $R/pytest_gpu.log 2>&1
echo "rc $?" >> $R/summary.txt; tail -3 $R/pytest_gpu.log >> $R/summary.txt
echo "== end ($SECONDS s)" >> $R/summary.txt; pack
cat $R/summary.txt
