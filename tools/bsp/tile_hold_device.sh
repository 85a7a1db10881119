#!/usr/bin/env bash
# A side lane on one GPU, beside the standard-mesh I-V point that the main lanes run (issues #13 and #18), for
#   SIDE="bash tools/bsp/tile_hold_device.sh" SIDE_EVERY_CALL=1 CONFIG=config/iv_standard.yaml ... \
#     bash tools/bsp/iv_racecheck_device.sh
# Tasks in order, each once (markers in scratch/side, which the device keeps between calls on a warm machine), as far
# as SIDE_LIMIT_S (default 480 s from this script's start) allows; a task that does not fit waits for the next call:
#  1. tools/bsp/wenox_tile_device.sh: bsp_weno_dx_tile (round 14) against the walk, per launch, and the gpu tests of
#     the weno file (<= 150 s; $OUT/wenox_tile/);
#  2. tools/bsp/session_device.sh tile: numerics.wenox_kernel tile against walk per step (standard and fine,
#     interleaved), the coarse 0.1 ps validation and two standard runs byte for byte with tile (~70 s; $OUT/tile.tgz);
#  3. the standard-mesh point V_G = 0.3 V / V_DS = 0.2 V of config/iv_standard.yaml again with
#     iv.steady.hold_windows = 1 (docs/iv.md §20: its steady flag at 0.347 ps, just after the start-up), to
#     iv.steady.t_max_ps; it resumes from its checkpoint in the next call.  $OUT/hold/: run.json, profiles.csv,
#     the current trace every 20 steps, the log.
PY=python3 BSP_COMMIT=require; . "$(dirname "$0")/_preamble.sh"  # set -u, env, OUT
LIM=${SIDE_LIMIT_S:-480}
t0=$SECONDS
left() { echo $(( LIM - (SECONDS - t0) )); }
S=scratch/side; mkdir -p "$S"
# a task that fails leaves no marker (tried again in the next call); each is cut at the lane's limit
if [ ! -f "$S/.tile" ] && [ "$(left)" -gt 160 ]; then
  echo "== wenox_tile_device.sh ($((SECONDS - t0)) s)"
  timeout -k 10 $(( $(left) - 10 )) bash tools/bsp/wenox_tile_device.sh && touch "$S/.tile"
fi
if [ ! -f "$S/.steps" ] && [ "$(left)" -gt 270 ]; then
  echo "== session_device.sh tile ($((SECONDS - t0)) s)"
  timeout -k 10 $(( $(left) - 10 )) bash tools/bsp/session_device.sh tile && touch "$S/.steps"
fi
H=$S/hold_vg0.300_vds0.200
if [ ! -f "$H/.done" ] && [ "$(left)" -gt 60 ]; then
  echo "== 0.3 V / 0.2 V with hold_windows 1 ($((SECONDS - t0)) s)"
  mapfile -t SETS < <($PY -c "
import yaml
from solver.bsp import iv
c = yaml.safe_load(open('config/iv_standard.yaml'))['iv']
c['steady'] = dict(c['steady'], hold_windows=1)
for s in iv.point_sets(c, 0.3, 0.2):
    print('--set'); print(s)")
  if [ "${#SETS[@]}" -lt 20 ]; then echo "the point's settings did not build (${#SETS[@]} words): hold run skipped"; exit 1; fi
  timeout -s INT -k 15 $(( $(left) - 20 )) $PY -m solver run config/bsp/dgmosfet.yaml --out "$H" --backend cupy --threads 1 \
    --no-progress "${SETS[@]}" > "$H.log" 2>&1
  rc=$?; echo "hold run rc=$rc"
  [ "$rc" = 0 ] && touch "$H/.done"
  mkdir -p "$OUT/hold"
  cp "$H.log" "$OUT/hold/run.log"
  for f in run.json profiles.csv; do [ -f "$H/$f" ] && cp "$H/$f" "$OUT/hold/"; done
  [ -d "$H" ] && $PY tools/bsp/run_scalars.py "$H" "$OUT/hold/scalars_every20.csv" 20 > /dev/null 2>&1
  tail -2 "$H.log"
fi
echo "side lane done ($((SECONDS - t0)) s; markers: $(ls -A "$S" | tr '\n' ' '))"
