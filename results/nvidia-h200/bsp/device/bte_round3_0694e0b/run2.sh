#!/usr/bin/env bash
# BTE round 3, device call 2 (run from _dev/bte): kernels + launch shapes (register caps), whole-step
# bench before/after twice (alternating), phase timers of 25 standard steps before/after, bitwise
# repeat, coarse 0.1 ps validation, gpu tests.  Everything under /tmp/w, packed into $OUT/r.tgz.
set -uo pipefail
R=/tmp/w/r; mkdir -p $R
SITE=/tmp/site
NEW=0694e0b9610b466bf1937578d4155747e31206b8; OLD=15b9bf55426083c6dedf769d646a0d28d2c693e3
pack() { tar czf $OUT/r.tgz -C /tmp/w r 2>/dev/null; }
new() { PYTHONPATH=$PWD:$SITE SOLVER_SOURCE_COMMIT=$NEW "$@"; }
old() { (cd ../bte_before && PYTHONPATH=$PWD:$SITE SOLVER_SOURCE_COMMIT=$OLD "$@"); }
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv > $R/device.txt
echo "== 1 kernels ($SECONDS s)"
new timeout 100 python3 tools/bsp/bte_device.py --out $R/bte --no-tests --no-bench --sweep > $R/bte_device.log 2>&1; echo "rc $?"; pack
echo "== 2 bench ($SECONDS s)"
CASES="--case 6x33x33x150x24:cupy:1:20:5 --case 6x65x65x300x48:cupy:1:20:5 --case 6x129x129x600x96:cupy:1:10:3"
for k in 1 2; do
  old timeout 50 python3 -m solver bsp bench $CASES --timeout 25 --out $R/bench_before_$k > $R/bench_before_$k.log 2>&1; echo "rc $?"
  new timeout 50 python3 -m solver bsp bench $CASES --timeout 25 --out $R/bench_after_$k > $R/bench_after_$k.log 2>&1; echo "rc $?"
done; pack
echo "== 3 timers ($SECONDS s)"
RS="--set time.steps=25 --set time.t_end_ps=null --set output.checkpoint_every_steps=0 --backend cupy --no-progress"
old timeout 40 python3 -m solver run --out /tmp/tb $RS > $R/timers_runs.log 2>&1
new timeout 40 python3 -m solver run --out /tmp/ta $RS >> $R/timers_runs.log 2>&1
python3 - $R/timers_phases.csv <<'PY' > $R/timers_table.txt 2>&1
import sys
import pandas as pd
out = []
for tag, d in (("before", "/tmp/tb"), ("after", "/tmp/ta")):
    t = pd.read_csv(f"{d}/timers.csv")
    t = t[t.step > 5]
    g = t.groupby("phase")["seconds"]
    df = pd.DataFrame({"median_ms": g.median() * 1e3, "p10_ms": g.quantile(0.1) * 1e3, "p90_ms": g.quantile(0.9) * 1e3,
                       "steps": g.count()})
    out.append(df.reset_index().assign(variant=tag))
out = pd.concat(out)
out.to_csv(sys.argv[1], index=False)
sel = out[out.phase.str.startswith("step/BTE") | out.phase.isin(["step", "step/ITER", "step/DENS"])]
print(sel.pivot(index="phase", columns="variant", values=["median_ms", "p10_ms", "p90_ms"]).to_string(float_format=lambda v: f"{v:.3f}"))
PY
cat $R/timers_table.txt; pack
echo "== 4 bitwise ($SECONDS s)"
SC="--set time.steps=10 --set output.checkpoint_every_steps=0 --backend cupy --no-progress"
old timeout 40 python3 -m solver run config/coarse.yaml --out /tmp/b0 $SC > $R/bitwise.log 2>&1
for d in a1 a2; do new timeout 40 python3 -m solver run config/coarse.yaml --out /tmp/$d $SC >> $R/bitwise.log 2>&1; done
{ for f in profiles.csv scalars.csv; do cmp /tmp/a1/$f /tmp/a2/$f && echo "after==after2 $f"; cmp /tmp/b0/$f /tmp/a1/$f && echo "before==after $f"; done; } > $R/cmp.txt 2>&1
python3 -c "import json;d=json.load(open('/tmp/a1/run.json'));print(json.dumps(d.get('kernels'),indent=1))" >> $R/cmp.txt 2>&1
head -4 $R/cmp.txt; pack
echo "== 5 validation ($SECONDS s)"
new timeout 60 python3 -m solver run config/coarse.yaml --out /tmp/val --backend cupy --no-progress > $R/validation.log 2>&1; echo "rc $?"
new timeout 30 python3 -m solver bsp validate /tmp/val >> $R/validation.log 2>&1; echo "rc $?"
mkdir -p $R/validation; cp /tmp/val/run.json /tmp/val/scalars.csv $R/validation/ 2>/dev/null; ls /tmp/val > $R/validation/files.txt
tail -9 $R/validation.log; pack
echo "== 6 gpu tests ($SECONDS s)"
LEFT=$(( 330 - SECONDS )); [ $LEFT -gt 20 ] && new timeout $LEFT python3 -m pytest -m gpu -q -p no:cacheprovider -rs tests/test_bsp_kernels_cuda_rk.py tests/test_bsp_kernels_cuda_weno.py tests/test_bsp_kernels.py tests/test_bsp_bte.py > $R/pytest_gpu.log 2>&1; echo "rc $?"
tail -4 $R/pytest_gpu.log; pack
echo "== tables ($SECONDS s)"
sed -n '/== done/,$p' $R/bte_device.log | head -45
grep "sweep" $R/bte_device.log | sed 's/^  sweep //'
grep "strided\|bitwise" $R/bte_device.log
for t in before_1 after_1 before_2 after_2; do echo $t; cut -d, -f1,5-9 $R/bench_$t/steps.csv | tail -3; done
pack; ls -la $OUT
