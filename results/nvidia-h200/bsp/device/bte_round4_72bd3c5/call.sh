#!/usr/bin/env bash
# BTE round 4 (numerics.bte_graph) device call, run from _dev/bte; everything under /tmp/w/r -> $OUT/r.tgz
set -uo pipefail
R=/tmp/w/r; mkdir -p $R
pack() { tar czf $OUT/r.tgz -C /tmp/w r 2>/dev/null; }
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > $R/device.txt
echo "== 1 gpu tests ($SECONDS s)"
timeout 120 python3 -m pytest -m gpu -q -p no:cacheprovider -rs tests/test_bsp_kernels_cuda_bte_graph.py tests/test_bsp_kernels_cuda_rk.py tests/test_bsp_kernels_cuda_weno.py tests/test_bsp_kernels_cuda_scattering.py tests/test_bsp_kernels.py tests/test_bsp_bte.py > $R/pytest_gpu.log 2>&1; echo "rc $?"; tail -3 $R/pytest_gpu.log; pack
echo "== 2 bench ($SECONDS s)"
STD="--case 6x65x65x300x48:cupy:1:100:5"; FINE="--case 6x129x129x600x96:cupy:1:30:3"
for k in 1 2; do
  timeout 40 python3 -m solver bsp bench $STD --set numerics.bte_graph=false --out $R/std_off_$k > $R/std_off_$k.log 2>&1; echo "rc $?"
  timeout 40 python3 -m solver bsp bench $STD --out $R/std_on_$k > $R/std_on_$k.log 2>&1; echo "rc $?"
done
timeout 45 python3 -m solver bsp bench $FINE --set numerics.bte_graph=false --out $R/fine_off > $R/fine_off.log 2>&1; echo "rc $?"
timeout 45 python3 -m solver bsp bench $FINE --out $R/fine_on > $R/fine_on.log 2>&1; echo "rc $?"
pack
echo "== 3 host time ($SECONDS s)"
for g in false true; do timeout 30 python3 tools_dev/host_time.py 6x65x65x300x48 $g 30 >> $R/host_time.txt 2>&1; done
cat $R/host_time.txt; pack
echo "== 4 bitwise ($SECONDS s)"
SC="--set time.steps=10 --set time.t_end_ps=null --set output.checkpoint_every_steps=0 --backend cupy --no-progress"
for d in c1 c2; do timeout 30 python3 -m solver run config/coarse.yaml --out /tmp/$d $SC >> $R/bitwise.log 2>&1; done
for d in s1 s2; do timeout 30 python3 -m solver run --out /tmp/$d $SC >> $R/bitwise.log 2>&1; done
{ for f in profiles.csv scalars.csv; do cmp /tmp/c1/$f /tmp/c2/$f && echo "coarse run1==run2 $f"; cmp /tmp/s1/$f /tmp/s2/$f && echo "standard run1==run2 $f"; done; } > $R/cmp.txt 2>&1
python3 -c "import json;d=json.load(open('/tmp/c1/run.json'));print('bte_graph', d['config']['numerics'].get('bte_graph'));print(json.dumps(d.get('kernels'),indent=1))" >> $R/cmp.txt 2>&1
head -5 $R/cmp.txt; pack
echo "== 5 validation ($SECONDS s)"
timeout 60 python3 -m solver run config/coarse.yaml --out /tmp/val --backend cupy --no-progress > $R/validation.log 2>&1; echo "rc $?"
timeout 30 python3 -m solver bsp validate /tmp/val >> $R/validation.log 2>&1; echo "rc $?"
tail -9 $R/validation.log; pack
echo "== table ($SECONDS s)"
for d in std_off_1 std_on_1 std_off_2 std_on_2 fine_off fine_on; do echo "$d $(tail -1 $R/$d/steps.csv 2>/dev/null)"; done
