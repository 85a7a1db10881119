#!/usr/bin/env bash
# BTE round 5 device call 1: run from the repo root of /work/main's copy; results -> $OUT/r.tgz + $OUT/summary.txt
set -uo pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH_SITE=/tmp/site PATH=/tmp/site/bin:$PATH BSP_SHARED=$PWD/_dev/shared PYTHONUNBUFFERED=1
ROOT=$PWD; R=/tmp/w/r; mkdir -p $R; T=$ROOT/_dev/bte_tools
pack() { tar czf $OUT/r.tgz -C /tmp/w r 2>/dev/null; cp $R/summary.txt $OUT/summary.txt 2>/dev/null; }
inb() { local d=$1 c=$2; shift 2; (cd $ROOT/_dev/$d && PYTHONPATH=$PWD:/tmp/site SOLVER_SOURCE_COMMIT=$c "$@"); }
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader > $R/summary.txt
echo "== ktime ($SECONDS s)" | tee -a $R/summary.txt
for t in "bte_base b2d1bed" "bte 0ae85db"; do set -- $t
  timeout 30 bash -c "cd $ROOT/_dev/$1 && PYTHONPATH=\$PWD:/tmp/site python3 $T/ktime.py $1 6x65x65x300x48 20 && PYTHONPATH=\$PWD:/tmp/site python3 $T/ktime.py $1 6x129x129x600x96 10" >> $R/ktime.csv 2>> $R/ktime.err; echo "rc $?" >> $R/summary.txt
done
cat $R/ktime.csv >> $R/summary.txt; pack
echo "== bench ($SECONDS s)" | tee -a $R/summary.txt
STD="--case 6x65x65x300x48:cupy:1:100:5"; FINE="--case 6x129x129x600x96:cupy:1:30:3"
for k in "bte_base b2d1bed std $STD" "bte 0ae85db std $STD" "bte_base b2d1bed fine $FINE" "bte 0ae85db fine $FINE"; do set -- $k
  inb $1 $2 timeout 30 python3 -m solver bsp bench $4 $5 --out $R/bench_$1_$3 > $R/bench_$1_$3.log 2>&1; echo "$1 $3 rc $? $(tail -1 $R/bench_$1_$3/steps.csv 2>/dev/null)" >> $R/summary.txt
  pack
done
echo "== gpu tests ($SECONDS s)" | tee -a $R/summary.txt
inb bte 0ae85db timeout $(( SECONDS < 160 ? 172 - SECONDS : 10 )) python3 -m pytest -m gpu -q -p no:cacheprovider -x tests/test_bsp_kernels_cuda_scattering.py tests/test_bsp_kernels_cuda_weno.py tests/test_bsp_kernels_cuda_bte_graph.py > $R/pytest_gpu.log 2>&1; echo "rc $?" >> $R/summary.txt
tail -3 $R/pytest_gpu.log >> $R/summary.txt
echo "== end ($SECONDS s)" >> $R/summary.txt; pack
cat $R/summary.txt
