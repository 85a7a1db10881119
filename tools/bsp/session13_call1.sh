#!/usr/bin/env bash
# The first device call of the session of 2026-11-27 (5) on a 4-GPU host, parts at once (<= ~560 s):
# GPUs 0-1 session_device.sh hybrid (HYBRID_S), GPU 2 session_device.sh fast2, GPU 3 probe_device.sh.
set -u
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
OUT=${OUT:?set OUT}; t0=$SECONDS
( HYBRID_S=${HYBRID_S:-420} taskset -c 0-15 bash tools/bsp/session_device.sh hybrid > "$OUT/hybrid.log" 2>&1 ) &
( CUDA_VISIBLE_DEVICES=2 taskset -c 16-31 bash tools/bsp/session_device.sh fast2 > "$OUT/fast2.log" 2>&1 ) &
( CUDA_VISIBLE_DEVICES=3 taskset -c 32-47 bash tools/bsp/probe_device.sh > "$OUT/probe.log" 2>&1; tar czf "$OUT/probe.tgz" -C "$OUT" probe && rm -rf "$OUT/probe" ) &
wait
echo "== all done ($((SECONDS - t0)) s)"
tail -12 "$OUT/fast2.log"; tail -8 "$OUT/hybrid.log"; tail -25 "$OUT/probe.log"
