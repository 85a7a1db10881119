#!/usr/bin/env bash
# Where ITER's and the BTE's GPU time goes (issues #12, #13), one GPU, <= ~250 s.  From the repository root:
#   OUT=... SOLVER_SOURCE_COMMIT=... bash tools/bsp/probe_device.sh
# 1. eigen kernels and the eigen_tw.cu candidates TW_RCP / TW_CARRY on a real ITER call (eigen_tw_probe.py)
# 2. one replay of the ITER stage graph on the GPU against ITER per step (iter_graph_probe.py), standard, 6x65x129
# 3. every kernel of one whole step under ncu (step_ncu.py; real clocks), standard and 6x65x129: $OUT/probe/ncu_*.csv
# 4. paper 001's ITER kernel tables (bsp iter-kernels)
PY=python3; . "$(dirname "$0")/_preamble.sh"  # set -u, env, OUT
L=$OUT/probe; mkdir -p "$L"; t0=$SECONDS
echo "${SOLVER_SOURCE_COMMIT:-unknown}" > "$L/commit.txt"
timeout 80 $PY tools/bsp/eigen_tw_probe.py --out "$L" > "$L/eigen_probe.log" 2>&1 || echo "eigen probe: exit $?" >> "$L/eigen_probe.log"
for m in 6x65x65x300x48 6x65x129x300x48; do
  timeout 60 $PY tools/bsp/iter_graph_probe.py $m 30 > "$L/iter_graph_$m.log" 2>&1 || echo "exit $?" >> "$L/iter_graph_$m.log"
done
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
for m in 6x65x65x300x48 6x65x129x300x48; do
  timeout 100 $NCU --profile-from-start off --graph-profiling node --clock-control none --metrics gpu__time_duration.sum \
    --csv --log-file "$L/ncu_$m.log" $PY tools/bsp/step_ncu.py $m 10 > "$L/ncu_$m.csv" 2> "$L/ncu_$m.err" || echo "ncu $m: exit $?" >> "$L/ncu_$m.err"
done
timeout 100 $PY -m solver bsp iter-kernels config/bsp/dgmosfet.yaml --table1 "$L/iter_table1.csv" --table4 "$L/iter_table4.csv" \
  --run-json "$L/iter_kernels.run.json" > "$L/iter_kernels.log" 2>&1 || echo "iter-kernels: exit $?" >> "$L/iter_kernels.log"
echo "== probe done ($((SECONDS - t0)) s)"
tail -3 "$L/eigen_probe.log"; grep -h 'ms' "$L"/iter_graph_*.log | head -20; tail -2 "$L/iter_kernels.log"
