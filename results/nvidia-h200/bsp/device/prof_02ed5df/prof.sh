#!/usr/bin/env bash
# Profiling call (no code change): ITER sub-phases per step (standard, 6x65x129) and the start-up breakdown.
set -uo pipefail
export PYTHONUNBUFFERED=1 MPLBACKEND=Agg
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=$PWD:/tmp/site PATH=/tmp/site/bin:$PATH BSP_SHARED=$PWD/_dev/shared SOLVER_SOURCE_COMMIT=$(cat _dev/COMMIT)
L=/tmp/prof_$SOLVER_SOURCE_COMMIT; mkdir -p $L; t0=$SECONDS
timeout 200 python3 tools/bsp/iter_device.py --out $L/phases --parts phases > $L/phases.log 2>&1; echo "phases rc=$? ($((SECONDS-t0)) s)"
S="--set time.steps=2 --set output.checkpoint_every_steps=0 --no-progress --backend cupy --overwrite"
for r in 1 2 3; do /usr/bin/time -f "wall %e s" python3 -m solver run config/standard.yaml --out /tmp/su$r $S > $L/startup_$r.log 2>&1
  python3 -c "import json; r=json.load(open('/tmp/su$r/run.json')); print('run', $r, 'startup_s', r['summary']['startup_s'], r['timers']['startup_s'])" | tee -a $L/startup.txt; tail -1 $L/startup_$r.log | tee -a $L/startup.txt; done
python3 -X importtime -m solver run config/standard.yaml --out /tmp/su4 $S 2> $L/importtime.txt > /dev/null
sort -t'|' -k2 -n $L/importtime.txt | tail -25 > $L/importtime_top.txt
python3 -m cProfile -s cumtime -m solver run config/standard.yaml --out /tmp/su5 $S 2>&1 | head -80 > $L/cprofile_startup.txt
echo "total $((SECONDS-t0)) s"
tar czf $OUT/prof.tgz -C /tmp $(basename $L)
{ cat $L/phases/*.csv 2>/dev/null | grep phases; cat $L/startup.txt; cat $L/importtime_top.txt; } | tee $OUT/summary.txt | tail -60
