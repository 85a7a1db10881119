#!/usr/bin/env bash
# BTE round 7 device call 2: per-kernel times and output hashes (ktime.py), ncu of bsp_wphi_rk, more bench rounds
# (standard: base / new / new + bte_graph), the compute-sanitizer test; -> $OUT/r.tgz, $OUT/summary.txt
set -uo pipefail
export PYTHONUNBUFFERED=1
ROOT=$PWD; R=/tmp/w/r; mkdir -p $R; T=$ROOT/_dev/bte_tools
NEW=$(cat _dev/bte/COMMIT); BASE=$(cat _dev/bte_base/COMMIT)
pack() { tar czf $OUT/r.tgz -C /tmp/w r 2>/dev/null; cp $R/summary.txt $OUT/summary.txt 2>/dev/null; }
inb() { local d=$1 c=$2; shift 2; (cd $ROOT/_dev/$d && PYTHONPATH=$PWD SOLVER_SOURCE_COMMIT=$c "$@"); }
left() { local l=$((285 - SECONDS)); echo $(( l > 5 ? l : 5 )); }
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader > $R/summary.txt
echo "== ktime: label,mesh,kernel,median,min,p90,GB/s,sha1 ($SECONDS s)" >> $R/summary.txt
for r in 1 2; do for t in "bte_base $BASE" "bte $NEW"; do set -- $t
  inb $1 $2 timeout 40 python3 $T/ktime.py $1_$r 6x65x65x300x48 30 >> $R/ktime.csv 2>> $R/ktime.err
  inb $1 $2 timeout 40 python3 $T/ktime.py $1_$r 6x129x129x600x96 10 >> $R/ktime.csv 2>> $R/ktime.err
done; done
cat $R/ktime.csv >> $R/summary.txt; pack
echo "== ncu bsp_wphi_rk ($SECONDS s)" >> $R/summary.txt
for t in "bte_base $BASE" "bte $NEW"; do set -- $t
  for mesh in 6x65x65x300x48 6x129x129x600x96; do
    [ $(left) -lt 150 ] && { echo "skip ncu $1 $mesh" >> $R/summary.txt; continue; }
    inb $1 $2 timeout 60 ncu --csv --print-units base -k regex:bsp_wphi_rk -c 1 --section SpeedOfLight --section Occupancy \
      --section WarpStateStats --section InstructionStats --section ComputeWorkloadAnalysis --section LaunchStats \
      python3 $T/ktime.py ncu $mesh 1 > $R/ncu_$1_$mesh.csv 2>&1
    echo "ncu $1 $mesh rc $? ($SECONDS s)" >> $R/summary.txt
    grep -E '"(Duration|Executed Instructions|Issue Slots Busy|Registers Per Thread|Achieved Occupancy|Compute \(SM\) Throughput|DRAM Throughput|Block Limit Shared Mem|Block Limit Registers|Warp Cycles Per Issued Instruction)"' $R/ncu_$1_$mesh.csv | awk -F'","' '{print $(NF-2)": "$NF}' | tr -d '"' >> $R/summary.txt
    pack
  done
done
echo "== bench standard ($SECONDS s)" >> $R/summary.txt
CS="--case 6x65x65x300x48:cupy:1:200:5"
for k in "bte_base $BASE base3" "bte $NEW new3" "bte $NEW graph3 --set numerics.bte_graph=true" \
         "bte_base $BASE base4" "bte $NEW new4" "bte $NEW graph4 --set numerics.bte_graph=true"; do set -- $k
  d=$1; c=$2; n=$3; shift 3
  [ $(left) -lt 70 ] && { echo "skip $n (time)" >> $R/summary.txt; continue; }
  inb $d $c timeout 30 python3 -m solver bsp bench config/bsp/dgmosfet.yaml $CS "$@" --out $R/bench_$n > $R/bench_$n.log 2>&1
  echo "$n rc $? ($SECONDS s)" >> $R/summary.txt; tail -n +2 $R/bench_$n/steps.csv 2>/dev/null | cut -d, -f1-10 >> $R/summary.txt
  tail -n +2 $R/bench_$n/steps_spread.csv 2>/dev/null | cut -d, -f5-9 >> $R/summary.txt; pack
done
echo "== sanitizer ($SECONDS s)" >> $R/summary.txt
inb bte $NEW timeout $(left) python3 -m pytest -m gpu -q -p no:cacheprovider tests/test_bsp_kernels_cuda_sanitizer.py > $R/pytest_sanitizer.log 2>&1
echo "rc $?" >> $R/summary.txt; tail -3 $R/pytest_sanitizer.log >> $R/summary.txt
echo "== end ($SECONDS s)" >> $R/summary.txt; pack
cat $R/summary.txt
