#!/usr/bin/env bash
# numerics.iter_graph on the device (docs/performance-iter-graph.md): gpu tests, a same-call A/B of
# ITER with the graph off / on (interleaved, ROUNDS rounds), a 10-step bitwise repeat.  From the
# repository root: OUT=... ROUNDS=1 PART=all|ab bash tools/bsp/iter_graph_device.sh
set -u
export PYTHONUNBUFFERED=1 MPLBACKEND=Agg
OUT=${OUT:?set OUT}; ROUNDS=${ROUNDS:-1}; PART=${PART:-all}; PY=python3
L=/tmp/iter_graph; rm -rf "$L"; mkdir -p "$L"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > "$L/nvidia_smi.csv"
CFG=config/bsp/dgmosfet.yaml; STD=6x65x65x300x48; NZ129=6x65x129x300x48
if [ "$PART" = all ]; then
  echo "== gpu tests ($SECONDS s)"
  timeout 150 $PY -m pytest -m gpu -q -s -p no:cacheprovider tests/test_bsp_iter_graph.py \
    "tests/test_bsp_kernels.py::test_gpu_run_iter_glue_changes_no_bit" > "$L/pytest_gpu.log" 2>&1
  grep -E "^density|iter_graph true|passed|failed|Error" "$L/pytest_gpu.log" | tail -16
  echo "== probe ($SECONDS s)"
  for m in $STD $NZ129; do PYTHONPATH=. timeout 60 $PY tools/bsp/iter_graph_probe.py $m 30 > "$L/probe_$m.log" 2>&1; tail -14 "$L/probe_$m.log"; done
  echo "== ncu: the graph's kernels, steps 3-4 of the standard mesh ($SECONDS s)"
  K='regex:^(eigenvalues_nr|ipim_a|iter_density|newton_rhs|construct_rhs|bcr_rhs|bcr_backsub|newton_norms|iter_start)$'
  PYTHONPATH=. timeout 120 ncu --kernel-name "$K" --launch-skip 150 --launch-count 120 --metrics gpu__time_duration.sum --csv \
    $PY tools/bsp/iter_graph_probe.py $STD 5 --no-timing > "$L/ncu_std.csv" 2> "$L/ncu_std.err"
  $PY - "$L/ncu_std.csv" <<'PYEOF'
import csv, sys, collections
rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 10]
if not rows:
    print("ncu: no rows"); sys.exit()
h = rows[0]; ki, vi = h.index("Kernel Name"), h.index("Metric Value")
unit = rows[1][h.index("Metric Unit")] if "Metric Unit" in h else "?"
scale = {"nsecond": 1e3, "usecond": 1.0, "msecond": 1e-3}.get(unit, 1.0)
d = collections.defaultdict(list)
for r in rows[1:]:
    try: d[r[ki].split("(")[0]].append(float(r[vi].replace(",", "")))
    except ValueError: pass
for k, v in sorted(d.items(), key=lambda kv: -sum(kv[1])):
    v.sort(); print(f"  {k}: n {len(v)}, median {v[len(v)//2]/scale:.1f} us, total {sum(v)/scale:.1f} us ({unit})")
PYEOF
fi
echo "== A/B ($SECONDS s)"
for r in $(seq 1 "$ROUNDS"); do
  for g in false true; do
    timeout 100 $PY -m solver bsp bench $CFG --case $STD:cupy:1:200:5 --case $NZ129:cupy:1:200:5 \
      --set numerics.iter_graph=$g --out "$L/ab_${g}_$r" > "$L/ab_${g}_$r.log" 2>&1 || echo "bench $g $r: exit $?"
  done
done
if [ "$PART" = all ]; then
  echo "== bitwise ($SECONDS s)"
  SC="--set time.steps=10 --set time.t_end_ps=null --set output.checkpoint_every_steps=0 --no-progress --backend cupy"
  for r in 1 2; do timeout 40 $PY -m solver run config/standard.yaml --out /tmp/rep_$r $SC > "$L/repeat_$r.log" 2>&1; done
  timeout 40 $PY -m solver run config/standard.yaml --out /tmp/rep_off $SC --set numerics.iter_graph=false > "$L/repeat_off.log" 2>&1
  for f in profiles.csv scalars.csv; do cmp /tmp/rep_1/$f /tmp/rep_2/$f && echo "graph run 1 vs 2: $f identical"; \
    cmp /tmp/rep_1/$f /tmp/rep_off/$f && echo "graph vs off: $f identical"; done 2>&1 | tee "$L/bitwise.txt"
  cp /tmp/rep_1/run.json "$L/repeat_run.json" 2>/dev/null
fi
echo "== summary ($SECONDS s)"
echo "run,mesh,backend,threads,steps,step_ms,bte_ms,dens_ms,iter_ms,newton_per_step" > "$L/summary.csv"
for d in "$L"/ab_*/; do tail -n +2 "$d/steps.csv" 2>/dev/null | cut -d, -f1-9 | sed "s/^/$(basename "$d"),/" >> "$L/summary.csv"; done
tar czf "$OUT/iter_graph.tgz" -C /tmp iter_graph
cat "$L/summary.csv"
