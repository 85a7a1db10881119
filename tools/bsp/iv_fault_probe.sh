#!/usr/bin/env bash
# Issue 18, docs/iv.md §17: why the point V_G = -0.4 V / V_DS = 0.4 V of config/gpu.yaml's iv study faults
# at ~0.69 ps with numerics.contact_rule hybrid (seed and point hybrid), when with the authors' rule (seed
# and point) it ran clean to 0.8 ps (§10) and faulted at ~1.8 ps (§11).  On one GPU, all at once, coarse
# mesh 6x33x33x150x24, the study's settings (steady criterion on, bte_graph), to T_PS (default 1.0) ps:
#   seeds   seed_hyb, seed_ref: V_G -0.2 V / 0.4 V, 0.05 ps, hybrid / reference rule (final state kept)
#   points  fresh_hyb:   -0.4 V fresh (no seed, no ramp), hybrid
#           hybseed_ref: from seed_hyb with the 0.2 ps ramp, reference rule
#           refseed_hyb: from seed_ref with the 0.2 ps ramp, hybrid
#           fresh_ref:   -0.4 V fresh, reference rule
# and, beside them, EXTRA (optional: a command line, e.g. the racecheck gpu test).  Each run's log and every
# 20th scalars row (with contact_phi_min; the points run with output.on_fault=record, so a faulted run keeps
# its rows) go to $OUT/ivf/; $OUT/ivf/table.txt: per run, the end (steps,
# t, fault or done) and Id over the last 0.2 ps.
#   usage (repository root): OUT=... SOLVER_SOURCE_COMMIT=<commit> [T_PS=1.0] [RUN_LIMIT_S=470] [EXTRA='...'] bash tools/bsp/iv_fault_probe.sh
PY=python3 BSP_COMMIT=require; . "$(dirname "$0")/_preamble.sh"  # set -u, env, OUT, SOLVER_SOURCE_COMMIT required
T_PS=${T_PS:-1.0}
L=$OUT/ivf; mkdir -p "$L"
t0=$SECONDS
MESH="--set mesh.N_sbn=6 --set mesh.NX=33 --set mesh.NZ=33 --set mesh.NW=150 --set mesh.NPHI=24"
STUDY="--set steady.enabled=true --set steady.window_ps=0.2 --set steady.rtol=0.005 --set steady.conservation_tol=0.02 \
 --set numerics.bte_graph=true --set output.checkpoint_every_steps=0 --set time.steps=null --set bias.V_DS=0.4"
run() {  # name rule V_G t_end extra...
  local name=$1 rule=$2 vg=$3 t=$4; shift 4
  # shellcheck disable=SC2086
  timeout "${RUN_LIMIT_S:-470}" $PY -m solver run config/bsp/dgmosfet.yaml --out "/tmp/ivf_$name" --overwrite --no-resume --backend cupy --no-progress \
    $MESH $STUDY --set numerics.contact_rule="$rule" --set bias.V_G="$vg" --set time.t_end_ps="$t" "$@" > "$L/$name.log" 2>&1
  echo "$name exit $?" >> "$L/exits.txt"
}
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$L/device.txt"
echo "${SOLVER_SOURCE_COMMIT}" > "$L/commit.txt"
extra=""
if [ -n "${EXTRA:-}" ]; then bash -c "$EXTRA" > "$L/extra.log" 2>&1 & extra=$!; fi
run seed_hyb hybrid -0.2 0.05 --set continuation.save_final_state=true & s1=$!
run seed_ref reference -0.2 0.05 --set continuation.save_final_state=true & s2=$!
run fresh_hyb hybrid -0.4 "$T_PS" --set output.on_fault=record & p1=$!
run fresh_ref reference -0.4 "$T_PS" --set output.on_fault=record & p2=$!
wait "$s1" "$s2"
echo "== seeds done ($((SECONDS-t0)) s)"
C="--set continuation.ramp_ps=0.2 --set output.on_fault=record"
# shellcheck disable=SC2086
run hybseed_ref reference -0.4 "$T_PS" $C --set continuation.init_from=/tmp/ivf_seed_hyb & p3=$!
# shellcheck disable=SC2086
run refseed_hyb hybrid -0.4 "$T_PS" $C --set continuation.init_from=/tmp/ivf_seed_ref & p4=$!
wait "$p1" "$p2" "$p3" "$p4"
echo "== all done ($((SECONDS-t0)) s)"
for n in fresh_hyb fresh_ref hybseed_ref refseed_hyb; do
  f=/tmp/ivf_$n/scalars.csv
  [ -f "$f" ] && awk -F, 'NR==1 || (NR-2)%20==0' "$f" > "$L/scalars_every20_$n.csv"
done
{
  printf "%-12s %-100s %s\n" run end "Id over the last 0.2 ps (A/m)"
  for n in fresh_hyb fresh_ref hybseed_ref refseed_hyb; do
    end=$(grep -E "^(done|fault)" "$L/$n.log" | tail -1 | cut -d';' -f1 | sed 's/ (N_s summed over valleys and subbands//' | cut -c1-100)
    id=$($PY -c "
import pandas as pd, sys
try:
    s = pd.read_csv('/tmp/ivf_$n/scalars.csv'); t = s.time_s * 1e12
    print('%.3f' % s.mean_current_A_per_m[t >= t.iloc[-1] - 0.2].mean())
except Exception as e:
    print('-')" 2>/dev/null)
    printf "%-12s %-100s %s\n" "$n" "$end" "$id"
  done
} | tee "$L/table.txt"
cat "$L/exits.txt"
if [ -n "$extra" ]; then wait "$extra"; tail -3 "$L/extra.log"; fi
echo "total $((SECONDS-t0)) s"
