#!/usr/bin/env bash
# The final device call of the session of 2026-11-27 (6, session 14) on a 2-GPU host: the CPU pair probe alone
# first (issue #14; $OUT/cpu_pair_probe.log), then the lanes of session13_final.sh (bench, start-up, every gpu
# test over two GPUs, validations, bitwise repeats, the numba rows; $OUT/final.tgz).  (3d0fc20's copy of this
# script ran the same probe inside session13_final.sh's folder, so its log is in final.tgz there.)
set -u
OUT=${OUT:?set OUT}
timeout 60 python3 tools/bsp/cpu_pair_probe.py --cpus 0-$(( $(nproc) - 1 )) --max "$(nproc)" > "$OUT/cpu_pair_probe.log" 2>&1
tail -8 "$OUT/cpu_pair_probe.log"
exec bash tools/bsp/session13_final.sh
