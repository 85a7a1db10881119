#!/usr/bin/env bash
# One device call of the I-V campaign (docs/iv.md §10): tools/bsp/iv_device.sh, and beside it one
# long coarse run (CONTACT_T_PS, default 3 ps, V_G = 0.5 V, V_DS = 0.1 V: config/bsp/dgmosfet.yaml)
# that records the contact-line monitor, to learn whether the authors' coarse mesh carries the
# contact mode of docs/iv.md §9 within the campaign's time.  Both resume in the next call (ignored
# scratch/iv).  Returns iv_device.sh's files plus contact_<n>.csv (every 20th row of the long run's
# scalars) and contact_<n>.log.   usage: IV_LIMIT_S=540 bash tools/bsp/iv_campaign_device.sh
PY=python3 BSP_OUT_DEFAULT=/tmp/iv_out; . "$(dirname "$0")/_preamble.sh"  # set -u, env, OUT
mkdir -p scratch/iv
n=$(ls scratch/iv/.call_* 2>/dev/null | wc -l)
C=scratch/iv/contact_${CONTACT_T_PS:-3}ps
PYTHONUNBUFFERED=1 python3 -m solver run config/bsp/dgmosfet.yaml --out "$C" --backend cupy --gpu auto --no-progress \
  --set mesh.N_sbn=6 --set mesh.NX=33 --set mesh.NZ=33 --set mesh.NW=150 --set mesh.NPHI=24 \
  --set time.t_end_ps="${CONTACT_T_PS:-3}" --set time.steps=null --set output.checkpoint_every_steps=2000 \
  >> "$C.log" 2>&1 &
pid=$!
bash tools/bsp/iv_device.sh
kill -INT "$pid" 2>/dev/null; sleep 3; kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null
cp "$C.log" "$OUT/contact_$n.log"
python3 tools/bsp/run_scalars.py "$C" "$OUT/contact_$n.csv" 20
