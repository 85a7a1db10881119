#!/usr/bin/env bash
# One device call on a host with 2 GPUs (issues #13, #18); call it again on the warm machine until both lanes say
# done.  From the repository root:
#   OUT=... SOLVER_SOURCE_COMMIT=<commit> bash tools/bsp/point_checks_device.sh
# GPU 0, the point lane: one bias point of config/iv_standard.yaml (POINT="VG VDS", default "-0.3 0.4"), run by
#   `solver run` with rule iv_point's settings (iv.run_sets, the mesh, iv.set, on_fault record) except
#   output.checkpoint_every_steps = POINT_CKPT (default 2500 instead of the study's 500: a standard-mesh checkpoint
#   is 135+ MB; the bits do not depend on the interval, a resumed run equals an unbroken one).  In
#   scratch/point/<name>; stopped by SIGINT at the lane's limit (since de71e91 the run writes a checkpoint of its step
#   on it), it resumes from its checkpoint in the next call.
#   $OUT/point/: the log, run.json and profiles.csv once it has finished, and every call the current trace every
#   20 steps (from the checkpoint while it runs: tools/bsp/run_scalars.py).
# GPU 1, the checks lane: tasks in order, each once (markers in scratch/checks), as far as the limit allows:
#   1. sanitizer: a 1-step coarse run (CuPy's kernel cache), then the memcheck and racecheck gpu tests
#      (tests/test_bsp_kernels_cuda_sanitizer.py; logs in $OUT/checks/sanitizer/), ~170 s;
#   2. probe: tools/bsp/iv_step_probe.sh on the standard mesh, variants hyb_s1_g hyb_s1_g_ck0 ref_s1_g ref_s1_g_ck0
#      (where an I-V point's time outside its step goes; docs/iv.md §21), ~120 s;
#   3. tests: every other gpu test (pytest -m gpu), <= 420 s;
#   4. final: tools/bsp/session_device.sh final with FINAL_TESTS=0 (the coarse validation, bitwise repeats, start-up,
#      the cupy bench rows of bsp_bench), ~400 s.
# LANE_LIMIT_S (default 540) bounds both lanes from this script's start.  Campaign settings, not variants.
PY=python3 BSP_COMMIT=require; . "$(dirname "$0")/_preamble.sh"  # set -u, env, OUT
LIM=${LANE_LIMIT_S:-540}
t0=$SECONDS
left() { echo $(( LIM - (SECONDS - t0) )); }
read -r VG VDS <<< "${POINT:--0.3 0.4}"
CK=${POINT_CKPT:-2500}
NAME=$($PY -c "from solver.bsp import iv; print(iv.point_name($VG, $VDS))")
P=scratch/point/$NAME; mkdir -p "$P" "$OUT/point" "$OUT/checks"
(
  export CUDA_VISIBLE_DEVICES=0
  if [ -f "$P/.done" ]; then echo "point $NAME: done in an earlier call"; exit 0; fi
  mapfile -t SETS < <($PY -c "
import yaml
from solver.bsp import iv
c = yaml.safe_load(open('config/iv_standard.yaml'))['iv']
for s in iv.point_sets(c, $VG, $VDS) + ['output.on_fault=record', 'output.checkpoint_every_steps=$CK']:
    print('--set'); print(s)")
  if [ "${#SETS[@]}" -lt 20 ]; then echo "the point's settings did not build (${#SETS[@]} words)"; exit 1; fi
  n=$(ls "$P"/../.call_"$NAME"_* 2>/dev/null | wc -l); touch "$P/../.call_${NAME}_$n"
  echo "point $NAME, call $n ($((SECONDS - t0)) s): ${SETS[*]}"
  timeout -s INT -k 15 $(( $(left) - 35 )) $PY -m solver run config/bsp/dgmosfet.yaml --out "$P/run" --backend cupy \
    --threads 1 --no-progress "${SETS[@]}" > "$P/run_$n.log" 2>&1
  rc=$?; echo "point rc=$rc ($((SECONDS - t0)) s; 124: cut at the limit, resumes next call; 3: a recorded fault)"
  { [ "$rc" = 0 ] || [ "$rc" = 3 ]; } && touch "$P/.done"
  cp "$P"/run_*.log "$OUT/point/"
  for f in run.json profiles.csv; do [ -f "$P/run/$f" ] && cp "$P/run/$f" "$OUT/point/"; done
  [ -d "$P/run" ] && $PY tools/bsp/run_scalars.py "$P/run" "$OUT/point/scalars_every20.csv" 20
  tail -n 2 "$P/run_$n.log"
) > "$OUT/point_lane.log" 2>&1 &
pid=$!
(
  export CUDA_VISIBLE_DEVICES=1
  S=scratch/checks; mkdir -p "$S"
  C=$OUT/checks
  # a task that fails leaves no marker (tried again in the next call); each is cut at the lane's limit
  if [ ! -f "$S/.sanitizer" ] && [ "$(left)" -gt 200 ]; then
    echo "== sanitizer ($((SECONDS - t0)) s)"
    $PY -m solver run config/coarse.yaml --set time.steps=1 --set time.t_end_ps=null --set output.checkpoint_every_steps=0 \
      --no-progress --backend cupy --out /tmp/san_warm > "$C/sanitizer_warm.log" 2>&1
    mkdir -p "$C/sanitizer"
    BSP_SANITIZER_LOGS=$C/sanitizer timeout -k 10 $(( $(left) - 10 )) $PY -m pytest -m gpu -q -p no:cacheprovider \
      tests/test_bsp_kernels_cuda_sanitizer.py > "$C/pytest_sanitizer.log" 2>&1 && touch "$S/.sanitizer"
    tail -n 1 "$C/pytest_sanitizer.log"
  fi
  if [ ! -f "$S/.probe" ] && [ "$(left)" -gt 150 ]; then
    echo "== iv_step_probe, standard mesh ($((SECONDS - t0)) s)"
    OUT=$C IVP_MESH=6x65x65x300x48 IVP_VARIANTS="hyb_s1_g hyb_s1_g_ck0 ref_s1_g ref_s1_g_ck0" \
      timeout -k 10 $(( $(left) - 10 )) bash tools/bsp/iv_step_probe.sh > "$C/probe.log" 2>&1 && touch "$S/.probe"
    cat "$C/ivp/table.txt" 2>/dev/null
  fi
  if [ ! -f "$S/.tests" ] && [ "$(left)" -gt 300 ]; then
    echo "== gpu tests ($((SECONDS - t0)) s)"
    timeout -k 10 $(( $(left) - 10 )) $PY -m pytest -m gpu -q -p no:cacheprovider tests \
      --ignore=tests/test_bsp_kernels_cuda_sanitizer.py > "$C/pytest_gpu.log" 2>&1 && touch "$S/.tests"
    tail -n 3 "$C/pytest_gpu.log"
  fi
  if [ ! -f "$S/.final" ] && [ "$(left)" -gt 380 ]; then
    echo "== session_device.sh final without the gpu tests ($((SECONDS - t0)) s)"
    OUT=$C FINAL_TESTS=0 timeout -k 10 $(( $(left) - 10 )) bash tools/bsp/session_device.sh final > "$C/final.log" 2>&1 \
      && touch "$S/.final"
    tail -n 16 "$C/final.log"
  fi
  echo "checks lane ($((SECONDS - t0)) s; markers: $(ls -A "$S" | tr '\n' ' '))"
) > "$OUT/checks_lane.log" 2>&1
wait "$pid"
tar czf "$OUT/checks.tgz" -C "$OUT" checks && rm -rf "$OUT/checks"
tar czf "$OUT/point.tgz" -C "$OUT" point && rm -rf "$OUT/point"
cat "$OUT/checks_lane.log"; echo; cat "$OUT/point_lane.log"
