#!/usr/bin/env bash
# How many coarse-mesh runs can share one GPU (issue #18's I-V campaign plan): 2000 steps alone, then 3 and 6
# processes side by side (no MPS), wall per process and aggregate throughput.
set -uo pipefail
export PYTHONUNBUFFERED=1 MPLBACKEND=Agg
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=$PWD:/tmp/site PATH=/tmp/site/bin:$PATH SOLVER_SOURCE_COMMIT=$(cat _dev/COMMIT)
L=/tmp/conc_$SOLVER_SOURCE_COMMIT; mkdir -p $L
R="python3 -m solver run config/coarse.yaml --backend cupy --no-progress --overwrite --no-resume --set time.t_end_ps=null --set output.checkpoint_every_steps=0"
$R --out /tmp/warm --set time.steps=3 > $L/warm.log 2>&1
N=2000
for k in 1 3 6; do
  t0=$(date +%s.%N)
  for j in $(seq 1 $k); do $R --out /tmp/c${k}_$j --set time.steps=$N > $L/c${k}_$j.log 2>&1 & done
  wait
  t1=$(date +%s.%N)
  python3 - "$k" "$t0" "$t1" "$N" <<'PY' | tee -a $L/summary.txt
import json, sys
k, t0, t1, n = int(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4])
walls = [json.load(open(f"/tmp/c{k}_{j}/run.json"))["summary"]["wall_s"] for j in range(1, k + 1)]
print(f"{k} processes x {n} steps: elapsed {t1 - t0:.1f} s, run walls {min(walls):.1f}-{max(walls):.1f} s, "
      f"aggregate {k * n / (t1 - t0):.0f} steps/s")
PY
done
tar czf $OUT/conc.tgz -C /tmp $(basename $L); cp $L/summary.txt $OUT/summary.txt
