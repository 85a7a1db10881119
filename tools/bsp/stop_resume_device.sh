#!/usr/bin/env bash
# A cupy run stopped by SIGINT and resumed, against the same run uninterrupted (the stop signals of
# Simulation._stop_signals on a GPU): config/standard.yaml (MESH_SETS to change it) to STEPS steps; run B gets SIGINT
# DELAY s after its start-up is done, must exit 130 with a checkpoint, then the same command resumes it; profiles.csv
# and scalars.csv of A and B must be byte-identical.  $OUT/stop_resume.txt (the verdict last), the runs' logs.
#   OUT=... SOLVER_SOURCE_COMMIT=<commit> bash tools/bsp/stop_resume_device.sh     (STEPS 1500, DELAY 2)
PY=python3 BSP_COMMIT=require; . "$(dirname "$0")/_preamble.sh"  # set -u, env, OUT
STEPS=${STEPS:-1500}
R=(-m solver run config/standard.yaml --backend cupy --no-progress --set time.t_end_ps=null --set "time.steps=$STEPS"
   --set output.checkpoint_every_steps=0 ${MESH_SETS:-})
W=/tmp/stop_resume; rm -rf "$W"; mkdir -p "$W"
$PY "${R[@]}" --out "$W/a" > "$OUT/run_a.log" 2>&1; echo "A rc=$?" | tee "$OUT/stop_resume.txt"
set -m  # job control: a background job of a script ignores SIGINT otherwise
$PY "${R[@]}" --out "$W/b" > "$OUT/run_b1.log" 2>&1 &
pid=$!
for _ in $(seq 600); do [ -e "$W/b/profiles_t0.csv" ] && break; sleep 0.1; done
sleep "${DELAY:-2}"; kill -INT "$pid"; wait "$pid"; rc1=$?
set +m
$PY "${R[@]}" --out "$W/b" > "$OUT/run_b2.log" 2>&1; rc2=$?
{ echo "B stopped rc=$rc1 (130 expected): $(grep -h 'stopped' "$OUT/run_b1.log" | tail -1)"
  echo "B resumed rc=$rc2: $(grep -h 'resumed from' "$OUT/run_b2.log" | tail -1)"
  ok=yes
  for f in profiles.csv scalars.csv; do
    if cmp -s "$W/a/$f" "$W/b/$f"; then echo "$f identical"; else echo "$f DIFFERS"; ok=no; fi
  done
  [ "$rc1" = 130 ] && [ "$rc2" = 0 ] || ok=no
  echo "stop_resume: $ok"; } | tee -a "$OUT/stop_resume.txt"
