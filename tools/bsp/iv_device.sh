#!/usr/bin/env bash
# The I-V study (docs/iv.md) on one GPU host, in as many device calls as it takes: config/gpu.yaml's iv
# section (bias points on the coarse mesh 6x33x33x150x24, cupy, each until steady state or t_max), or with
# CONFIG=config/iv_standard.yaml the standard-mesh study (results under the config's iv.folder).
# One call runs Snakemake for at most IV_LIMIT_S seconds (default 540, inside the device's 10-minute
# command limit), then stops it (SIGINT: running points are killed and marked incomplete), collects
# the finished points and packs the small files into $OUT.  Call it again on the same (warm) machine
# and it goes on: everything is written under IV_RESULTS (default scratch/iv, git-ignored, so the
# device tool keeps it between calls; so is .snakemake/), finished points are not rerun
# (--rerun-triggers params input: the tool lays the tree anew each call, so file times say nothing),
# killed points are rerun and resume from their checkpoints (config/gpu.yaml: every 500 steps).
# Each call warms CuPy's kernel cache with a 3-step run first (so the points do not all compile at
# once).  The points below iv.low_vg_from start from short seed runs (iv.low_vg_seed_ps, docs/iv.md §8).
# Files back in $OUT (at most 6, each under 16 MB): iv_small_<n>.tgz (tables, figures, figures
# of merit, every run's run.json and profiles.csv, thinned current traces, logs; tools/bsp/iv_pack.py),
# iv_scalars_<n>_<k>.tar (the full current traces, <run>/scalars.csv.xz, in at most 3 files of 15 MB), snakemake_<n>.log, status_<n>.txt
# (the jobs still to run: empty when the study is done).  <n> counts the calls on this machine.
#   usage (repository root): SOLVER_SOURCE_COMMIT=<commit sent> bash tools/bsp/iv_device.sh   # again until status is empty
# (the device copy may carry an older .git: SOLVER_SOURCE_COMMIT names the code in every run.json)
# On a host with several GPUs the points spread over them (the iv rule runs `solver run --gpu auto`).
# IV_LIMIT_S, IV_RESULTS, IV_GPU_SLOTS (concurrent points, default the config's iv.points_per_gpu per GPU), CONFIG (default config/gpu.yaml;
# config/smoke.yaml tries it on a CPU) are campaign settings, not variants.  IV_TARGET (default figures_of_merit.csv):
# the Snakemake target, a path under the study's folder, e.g. runs/<mesh>/cupy_t1/<point>/run.json to run one point,
# or several such paths separated by spaces (the partial collect then tables the finished points).
PY=python3 BSP_OUT_DEFAULT=/tmp/iv_out BSP_WHL=1; . "$(dirname "$0")/_preamble.sh"  # set -u, env, OUT, PY, .whl
IV_RESULTS=${IV_RESULTS:-scratch/iv}
CONFIG=${CONFIG:-config/gpu.yaml}
LIMIT=${IV_LIMIT_S:-540}
t0=$SECONDS
M=$(bsp_machine)
# the study's folder (iv.folder: config/iv_standard.yaml's iv_standard) and mesh, from the config
read -r FOLDER MESH PPG < <(python3 -c "import yaml; c = yaml.safe_load(open('$CONFIG'))['iv']; print(c.get('folder', 'iv'), c['mesh'], c.get('points_per_gpu', 16))")  # 16: the schema's default
D=$IV_RESULTS/$M/$FOLDER; mkdir -p "$D"
n=$(ls "$IV_RESULTS"/.call_* 2>/dev/null | wc -l); touch "$IV_RESULTS/.call_$n"
echo "== call $n on $M ($(ls /dev/nvidia[0-9]* 2>/dev/null | wc -l) GPUs, $(nproc) cores): $CONFIG, results in $D, limit ${LIMIT} s"
if command -v nvidia-smi > /dev/null 2>&1; then
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  echo "== warm the kernel cache ($((SECONDS-t0)) s)"
  IFS=x read -r NSB NX NZ NW NPHI <<< "$MESH"  # the kernels are built per mesh (NPHI, rows per block)
  python3 -m solver run config/bsp/dgmosfet.yaml --out /tmp/iv_warm --overwrite --no-resume --backend cupy --no-progress \
    --set mesh.N_sbn="$NSB" --set mesh.NX="$NX" --set mesh.NZ="$NZ" --set mesh.NW="$NW" --set mesh.NPHI="$NPHI" \
    --set time.steps=3 --set time.t_end_ps=null 2>&1 | tail -1
fi
# the tables of an earlier call's partial collect (below) are not the rule's: remove them, or Snakemake
# (which cannot tell: --rerun-triggers without mtime) would take them as the study's
if [ -f "$D/.partial" ]; then
  rm -f "$D"/points.csv "$D"/curves.csv "$D"/traces.csv "$D"/figures_of_merit.csv "$D"/idvg_log.png \
    "$D"/idvg_linear.png "$D"/idvd.png "$D"/traces.png "$D/.partial"
fi
NGPU=$(ls /dev/nvidia[0-9]* 2>/dev/null | wc -l); [ "$NGPU" -ge 1 ] || NGPU=1
read -ra TT <<< "${IV_TARGET:-figures_of_merit.csv}"  # IV_TARGET: one path or several, spaces between (no globbing)
TGT=(); for t in "${TT[@]}"; do TGT+=("$D/$t"); done
SMK=(snakemake "${TGT[@]}" --cores "$(nproc)" --configfile "$CONFIG" --config "results_dir=$IV_RESULTS")
echo "== snakemake ($((SECONDS-t0)) s)"
# a call cut by SIGINT leaves .snakemake/ locked and its jobs incomplete: unlock, rerun those
"${SMK[@]}" --unlock > /dev/null 2>&1
left=$(( LIMIT - (SECONDS - t0) - 45 ))  # 45 s to stop, collect and pack
if [ "$left" -lt 1 ]; then  # a slow warm-up ate the call: timeout would refuse the interval; collect and pack only
  echo "no time left for Snakemake in this call (${left} s after the warm-up): call again"; left=0
fi
# the points start longest first (rule iv_point's priority: solver.bsp.iv.start_priority), so that with
# IV_GPU_SLOTS = the GPU count (one point per GPU) the longest runs do not start last
[ "$left" -gt 0 ] && timeout -s INT -k 20 "$left" "${SMK[@]}" --resources gpu="${IV_GPU_SLOTS:-$((PPG * NGPU))}" --keep-going --rerun-incomplete \
  --rerun-triggers params input > "$OUT/snakemake_$n.log" 2>&1
echo "snakemake rc=$? ($((SECONDS-t0)) s; 124: cut at the limit, call again)"; tail -3 "$OUT/snakemake_$n.log"
"${SMK[@]}" -n --quiet rules --rerun-triggers params input > "$OUT/status_$n.txt" 2>&1
if [ ! -f "$D/figures_of_merit.csv" ] || [ -n "$(find "$D/runs" -name run.json -newer "$D/figures_of_merit.csv" 2>/dev/null)" ]; then
  # points unfinished or failed: the tables and figures of the finished ones
  echo "== collect the finished points"
  for f in "$D"/logs/point_*.log; do [ -f "$f" ] && echo "$(basename "$f"): $(tail -n 1 "$f" | cut -c1-200)"; done
  runs=$(ls -d "$D"/runs/*/*/vg*/ 2>/dev/null | while read -r r; do [ -f "$r/run.json" ] && echo "$r"; done)
  study=$(python3 -c "import json, yaml; c = yaml.safe_load(open('$CONFIG'))['iv']; print(json.dumps({k: c.get(k) for k in ('vg', 'idvg_vds', 'idvd_vg', 'vds', 'vth_current_A_per_m', 'bottom_gate_V')}))")
  # shellcheck disable=SC2086
  if [ -n "$runs" ]; then python3 -m solver bsp iv collect $runs --study "$study" --out "$D" && touch "$D/.partial"; else echo "no point finished"; fi
fi
python3 tools/bsp/iv_pack.py "$D" "$OUT" "$n"
if [ -f "$D/points.csv" ]; then
  python3 -c "
import pandas as pd
p = pd.read_csv('$D/points.csv')
print(p[[c for c in ('point', 'Id_A_per_m', 'status', 'steady', 't_steady_ps', 't_end_ps', 'steps', 'wall_s', 'init_from') if c in p]].to_string(index=False))
f = p[p['status'] == 'fault'] if 'status' in p else p.iloc[:0]
for _, r in f.iterrows(): print('fault:', r['point'], str(r['fault'])[:160])
print(pd.read_csv('$D/figures_of_merit.csv')[['quantity', 'value', 'unit', 'condition']].to_string(index=False))"
fi
left_jobs=$(grep -m1 -E "^total" "$OUT/status_$n.txt" | awk '{print $2}')
echo "jobs left: ${left_jobs:-0}; total $((SECONDS-t0)) s"
