#!/usr/bin/env bash
# One device call on a host with several GPUs: the I-V campaign (tools/bsp/iv_device.sh) on all GPUs but the
# last, and on the last one, alone, the compute-sanitizer racecheck gpu test
# (tests/test_bsp_kernels_cuda_sanitizer.py: one coarse step under racecheck), after a plain 1-step run of
# the same case has filled CuPy's kernel cache (under the sanitizer a cold compile is slow).  Session 18's
# racecheck ran beside six GPU processes on one GPU and stopped with an internal sanitizer error
# (docs/iv.md §18).  The campaign resumes in the next call as iv_device.sh does; the racecheck runs once
# (a marker in scratch/iv).  Files: iv_device.sh's, plus racecheck.log (pytest) and sanitizer_racecheck.log.
#   usage (repository root): SOLVER_SOURCE_COMMIT=<commit> IV_LIMIT_S=540 bash tools/bsp/iv_racecheck_device.sh
# SIDE=<command> runs that command on the last GPU instead of the racecheck (once: a marker in scratch/iv), with
# $OUT set to a folder of its own that comes back packed as side.tgz, its output in side.log; e.g.
#   SIDE="bash tools/bsp/wenox_tile_device.sh" CONFIG=config/iv_standard.yaml SOLVER_SOURCE_COMMIT=... \
#     bash tools/bsp/iv_racecheck_device.sh        (the standard I-V study on GPUs 0..n-2, the tile A/B on n-1)
# SIDE_EVERY_CALL=1: the SIDE command runs in every call (it keeps its own markers), packed as side_<k>.tgz with
# side_<k>.log (k counts the calls).
PY=python3 BSP_OUT_DEFAULT=/tmp/iv_out BSP_COMMIT=require; . "$(dirname "$0")/_preamble.sh"  # set -u, env, OUT
NGPU=$(ls /dev/nvidia[0-9]* 2>/dev/null | wc -l)
mkdir -p scratch/iv
pid=
SIDE=${SIDE:-}
EVERY=${SIDE_EVERY_CALL:-0}
k=; [ "$EVERY" = 1 ] && { k=_$(ls scratch/iv/.side_call_* 2>/dev/null | wc -l); touch "scratch/iv/.side_call$k"; }
if [ "$NGPU" -ge 2 ] && [ -n "$SIDE" ] && { [ "$EVERY" = 1 ] || [ ! -f scratch/iv/.side_done ]; }; then
  (
    export CUDA_VISIBLE_DEVICES=$((NGPU - 1))
    t0=$SECONDS
    mkdir -p "$OUT/side$k"
    OUT="$OUT/side$k" bash -c "$SIDE" 2>&1
    echo "side rc=$? $((SECONDS - t0)) s: $SIDE"
    touch scratch/iv/.side_done
  ) > "$OUT/side$k.log" 2>&1 &
  pid=$!
  CUDA_VISIBLE_DEVICES=$(seq -s, 0 $((NGPU - 2))) bash tools/bsp/iv_device.sh
  wait "$pid"; pid=
  tar czf "$OUT/side$k.tgz" -C "$OUT" "side$k" && rm -rf "$OUT/side$k"
  tail -30 "$OUT/side$k.log"
elif [ "$NGPU" -ge 2 ] && [ -z "$SIDE" ] && [ ! -f scratch/iv/.racecheck_done ]; then
  last=$((NGPU - 1))
  (
    export CUDA_VISIBLE_DEVICES=$last
    t0=$SECONDS
    python3 -m solver run config/coarse.yaml --set time.steps=1 --set time.t_end_ps=null \
      --set output.checkpoint_every_steps=0 --no-progress --out /tmp/rc_warm --overwrite --no-resume 2>&1 | tail -1
    echo "warm run $((SECONDS - t0)) s"
    mkdir -p "$OUT/rc"
    BSP_SANITIZER_LOGS="$OUT/rc" timeout -k 10 "${RC_LIMIT_S:-480}" python3 -m pytest -q -p no:cacheprovider -m gpu \
      tests/test_bsp_kernels_cuda_sanitizer.py -k racecheck 2>&1 | tail -30
    echo "racecheck rc=${PIPESTATUS[0]} $((SECONDS - t0)) s"
    touch scratch/iv/.racecheck_done
  ) > "$OUT/racecheck.log" 2>&1 &
  pid=$!
  CUDA_VISIBLE_DEVICES=$(seq -s, 0 $((NGPU - 2))) bash tools/bsp/iv_device.sh
else
  bash tools/bsp/iv_device.sh
fi
if [ -n "$pid" ]; then wait "$pid"; tail -5 "$OUT/racecheck.log"; fi
