#!/usr/bin/env bash
# Why racecheck ends on "Internal Sanitizer Error: Detected a failure to track a kernel launch" in 6 of 7 runs
# (docs/performance.md §24; memcheck is clean): one coarse step of config/coarse.yaml under
# `compute-sanitizer --tool racecheck`, in variants that turn the CUDA graphs off one by one, REPEATS times each, spread
# over the host's GPUs (one run per GPU at a time; a plain 1-step run of each variant first fills CuPy's kernel cache).
#   OUT=... SOLVER_SOURCE_COMMIT=<commit> bash tools/bsp/racecheck_probe_device.sh      (REPEATS, default 2;
#   VARIANTS, default "default no_iter_graph no_linsys_graph no_graphs"; RC_TIMEOUT_S, default 240: each sanitizer run's
#   limit; session 24 saw finished runs take ~90 s and half the runs not finish in 240 s, docs/performance.md §26)
# Variants: default; no_iter_graph (numerics.iter_graph=false); no_linsys_graph (numerics.linsys_graph=false);
# no_graphs (both off; numerics.bte_graph is off by default). $OUT/rc.tgz (rc_<variant>_<k>.log, the sanitizer's log,
# and .out, the run's output) and $OUT/table.txt: per run the exit code, whether the internal error was there, and the
# summary line.
PY=python3 BSP_COMMIT=require; . "$(dirname "$0")/_preamble.sh"  # set -u, env, OUT
R=(-m solver run config/coarse.yaml --set time.steps=1 --set time.t_end_ps=null --set output.checkpoint_every_steps=0
   --no-progress --backend cupy)
declare -A V=(
    [default]=""
    [no_iter_graph]="--set numerics.iter_graph=false"
    [no_linsys_graph]="--set numerics.linsys_graph=false"
    [no_graphs]="--set numerics.iter_graph=false --set numerics.linsys_graph=false"
)
NGPU=$(ls /dev/nvidia[0-9]* 2>/dev/null | wc -l); [ "$NGPU" -ge 1 ] || NGPU=1
jobs_=()
for v in ${VARIANTS:-default no_iter_graph no_linsys_graph no_graphs}; do
  for k in $(seq 1 "${REPEATS:-2}"); do jobs_+=("$v:$k"); done
done
run_one() {  # GPU VARIANT K
  local g=$1 v=$2 k=$3
  # shellcheck disable=SC2086
  CUDA_VISIBLE_DEVICES=$g $PY "${R[@]}" --out "/tmp/rcw_${v}_$k" ${V[$v]} > /dev/null 2>&1
  # shellcheck disable=SC2086
  CUDA_VISIBLE_DEVICES=$g timeout "${RC_TIMEOUT_S:-240}" compute-sanitizer --tool racecheck --log-file "$OUT/rc_${v}_$k.log" \
    $PY "${R[@]}" --out "/tmp/rc_${v}_$k" ${V[$v]} > "$OUT/rc_${v}_$k.out" 2>&1
  local rc=$?
  local internal=no; grep -q "Internal Sanitizer Error" "$OUT/rc_${v}_$k.log" 2>/dev/null && internal=yes
  echo "$v $k rc=$rc internal=$internal $(grep -h 'RACECHECK SUMMARY' "$OUT/rc_${v}_$k.log" 2>/dev/null | sed 's/=* *//')"
}
i=0
while [ $i -lt ${#jobs_[@]} ]; do
  for g in $(seq 0 $((NGPU - 1))); do
    [ $i -lt ${#jobs_[@]} ] || break
    IFS=: read -r v k <<< "${jobs_[$i]}"; i=$((i + 1))
    run_one "$g" "$v" "$k" > "$OUT/.line_${v}_$k" &
  done
  wait
done
cat "$OUT"/.line_* | sort > "$OUT/table.txt"; rm -f "$OUT"/.line_*
( cd "$OUT" && tar czf rc.tgz rc_* && rm -f rc_* )  # two files back, not 2 x 4 x REPEATS
cat "$OUT/table.txt"
