#!/usr/bin/env bash
# BTE round 5 device call 2 (final code 7d6dea4 vs b2d1bed); results -> $OUT/r.tgz + $OUT/summary.txt
set -uo pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/*.whl
export PATH=/tmp/site/bin:$PATH BSP_SHARED=$PWD/_dev/shared PYTHONUNBUFFERED=1
ROOT=$PWD; R=/tmp/w/r; mkdir -p $R; T=$ROOT/_dev/bte_tools; ME=7d6dea4
pack() { tar czf $OUT/r.tgz -C /tmp/w r 2>/dev/null; cp $R/summary.txt $OUT/summary.txt 2>/dev/null; }
inb() { local d=$1 c=$2; shift 2; (cd $ROOT/_dev/$d && PYTHONPATH=$PWD:/tmp/site SOLVER_SOURCE_COMMIT=$c "$@"); }
left() { local l=$((176 - SECONDS)); echo $(( l > 5 ? l : 5 )); }
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader > $R/summary.txt
echo "== ktime ($SECONDS s)" >> $R/summary.txt
for t in "bte_base b2d1bed" "bte $ME"; do set -- $t
  inb $1 $2 timeout 25 python3 $T/ktime.py $1 6x65x65x300x48 20 >> $R/ktime.csv 2>> $R/ktime.err
  inb $1 $2 timeout 25 python3 $T/ktime.py $1 6x129x129x600x96 10 >> $R/ktime.csv 2>> $R/ktime.err
done
cat $R/ktime.csv >> $R/summary.txt; pack
echo "== bench ($SECONDS s)" >> $R/summary.txt
STD="--case 6x65x65x300x48:cupy:1:100:5"; FINE="--case 6x129x129x600x96:cupy:1:30:3"
for k in "bte_base b2d1bed std1 $STD" "bte $ME std1 $STD" "bte_base b2d1bed std2 $STD" "bte $ME std2 $STD" \
         "bte_base b2d1bed fine $FINE" "bte $ME fine $FINE"; do set -- $k
  inb $1 $2 timeout 30 python3 -m solver bsp bench $4 $5 --out $R/bench_$1_$3 > $R/bench_$1_$3.log 2>&1
  echo "$1 $3 rc $? $(tail -1 $R/bench_$1_$3/steps.csv 2>/dev/null)" >> $R/summary.txt; pack
done
echo "== gpu tests ($SECONDS s)" >> $R/summary.txt
inb bte $ME timeout 45 python3 -m pytest -m gpu -q -p no:cacheprovider tests/test_bsp_kernels_cuda_scattering.py tests/test_bsp_kernels_cuda_weno.py tests/test_bsp_kernels_cuda_rk.py tests/test_bsp_kernels_cuda_bte_graph.py tests/test_bsp_bte.py > $R/pytest_gpu.log 2>&1
echo "rc $?" >> $R/summary.txt; tail -2 $R/pytest_gpu.log >> $R/summary.txt; pack
echo "== bitwise ($SECONDS s)" >> $R/summary.txt
SC="--set time.steps=10 --set time.t_end_ps=null --set output.checkpoint_every_steps=0 --backend cupy --no-progress"
inb bte $ME timeout 20 python3 -m solver run config/coarse.yaml --out /tmp/c1 $SC > $R/bitwise.log 2>&1
inb bte $ME timeout 20 python3 -m solver run config/coarse.yaml --out /tmp/c2 $SC >> $R/bitwise.log 2>&1
inb bte_base b2d1bed timeout 20 python3 -m solver run config/coarse.yaml --out /tmp/c0 $SC >> $R/bitwise.log 2>&1
for f in profiles.csv scalars.csv; do cmp /tmp/c1/$f /tmp/c2/$f && echo "mine run1 == run2 $f"; cmp /tmp/c1/$f /tmp/c0/$f && echo "mine == base b2d1bed $f"; done >> $R/summary.txt 2>&1
pack
echo "== validation ($SECONDS s)" >> $R/summary.txt
inb bte $ME timeout $(left) python3 -m solver run config/coarse.yaml --out /tmp/val --backend cupy --no-progress > $R/validation.log 2>&1; echo "run rc $?" >> $R/summary.txt
inb bte $ME timeout $(left) python3 -m solver bsp validate /tmp/val >> $R/validation.log 2>&1; echo "validate rc $?" >> $R/summary.txt
tail -9 $R/validation.log >> $R/summary.txt; pack
echo "== ncu ($SECONDS s)" >> $R/summary.txt
if command -v ncu > /dev/null && [ $(left) -gt 25 ]; then
  inb bte $ME timeout $(( $(left) - 3 )) ncu --csv --print-units base -k regex:"bsp_wphi_rk|bsp_weno_dx|bsp_scat_gain" -c 9 --section SpeedOfLight --section Occupancy --section WarpStateStats --section LaunchStats python3 $T/ktime.py ncu 6x65x65x300x48 1 > $R/ncu.csv 2>&1
  echo "ncu rc $?" >> $R/summary.txt
else echo "no ncu or no time" >> $R/summary.txt; fi
echo "== end ($SECONDS s)" >> $R/summary.txt; pack
cat $R/summary.txt
