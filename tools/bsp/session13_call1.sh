#!/usr/bin/env bash
# The first device call of the session of 2026-11-27 (5), parts at once (<= ~560 s).  On a 2-GPU host:
# GPU 0 session_device.sh fast2, then probe_device.sh; GPU 1 session_device.sh hybrid (both points, HYBRID_S).
# On 4 GPUs: hybrid on GPUs 0-1 (one point each), fast2 on 2, the probe on 3.
set -u
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
OUT=${OUT:?set OUT}; t0=$SECONDS
NG=$(nvidia-smi -L | wc -l)
probe() { bash tools/bsp/probe_device.sh > "$OUT/probe.log" 2>&1; tar czf "$OUT/probe.tgz" -C "$OUT" probe && rm -rf "$OUT/probe"; }
if [ "$NG" -ge 4 ]; then
  ( HYBRID_S=${HYBRID_S:-420} taskset -c 32-63 bash tools/bsp/session_device.sh hybrid > "$OUT/hybrid.log" 2>&1 ) &
  ( CUDA_VISIBLE_DEVICES=2 taskset -c 0-15 bash tools/bsp/session_device.sh fast2 > "$OUT/fast2.log" 2>&1 ) &
  ( export CUDA_VISIBLE_DEVICES=3; taskset -c 16-31 bash -c "$(declare -f probe); OUT=$OUT; probe" ) &
else
  ( HYBRID_GPU=$(( NG - 1 )) HYBRID_S=${HYBRID_S:-420} taskset -c 16-31 bash tools/bsp/session_device.sh hybrid > "$OUT/hybrid.log" 2>&1 ) &
  ( export CUDA_VISIBLE_DEVICES=0; taskset -c 0-15 bash tools/bsp/session_device.sh fast2 > "$OUT/fast2.log" 2>&1; taskset -c 0-15 bash -c "$(declare -f probe); OUT=$OUT; probe" ) &
fi
wait
echo "== all done ($((SECONDS - t0)) s)"
tail -12 "$OUT/fast2.log"; tail -8 "$OUT/hybrid.log"; tail -25 "$OUT/probe.log"
