#!/usr/bin/env bash
# One device call of `snakemake --cores 16 --configfile config/gpu.yaml` (issue #15): runs for at most
# LIMIT_S seconds (default 540, inside the device's 10-minute command limit), then stops Snakemake
# cleanly (SIGINT: running jobs are killed, their outputs marked incomplete) and tars the small files
# of results/<machine>/ into $OUT.  Call it again on the same (warm) machine and it goes on where it
# stopped: the work folder WORK (default /tmp/gpu_yaml, outside the carried tree, which each call
# replaces) keeps the results, the checkpoints and .snakemake/; unfinished jobs are redone and solver
# runs resume from their checkpoints (config bsp.checkpoint_steps for the timing runs).
#
# From the repository root of a copy of the code (see docs/reproduction.md, "Running config/gpu.yaml"):
#   python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/*.whl
#   export PYTHONPATH=$PWD:/tmp/site PATH=/tmp/site/bin:$PATH SOLVER_SOURCE_COMMIT=<commit> PYTHONUNBUFFERED=1
#   bash tools/bsp/gpu_yaml_device.sh                      # everything: 14.3 min on a 4-H200 host (host_slices, 3 chunks),
#                                                          # ~44 min of job time in series on one GPU (docs/reproduction.md)
#   TARGETS="bsp_all" bash tools/bsp/gpu_yaml_device.sh    # or a part: rule names or files
#   FINAL=1 bash tools/bsp/gpu_yaml_device.sh              # last call: also the HTML report
# Files back in $OUT (at most 8, 16 MiB each): results_<machine>.tgz (every csv/json/png/md/log/tsv of
# results/<machine>/ and results/compare/, no .h5), snakemake_<n>.log, status.txt (the jobs still to
# run), report.html (FINAL=1).  LIMIT_S, WORK, TARGETS, FINAL, CONFIG (default config/gpu.yaml; e.g.
# config/smoke.yaml to try the chunking on a CPU), CORES (default 16 per GPU, at most nproc) and
# GPU_JOBS (default: the host's GPUs; --resources gpu=GPU_JOBS: one GPU job per GPU, each timing job on
# a GPU of its own, docs/workflow.md "Several GPUs on one host") are campaign settings, not variants.
PY=python3 BSP_OUT_DEFAULT=$PWD/out BSP_COMMIT=require; . "$(dirname "$0")/_preamble.sh"  # set -u, env, SOLVER_SOURCE_COMMIT, OUT
LIMIT_S=${LIMIT_S:-540}
WORK=${WORK:-/tmp/gpu_yaml}
TARGETS=${TARGETS:-}
CONFIG=${CONFIG:-config/gpu.yaml}
NGPU=$(ls /dev/nvidia[0-9]* 2>/dev/null | wc -l); [ "$NGPU" -ge 1 ] || NGPU=1
GPU_JOBS=${GPU_JOBS:-$NGPU}
CORES=${CORES:-$(( 16 * NGPU < $(nproc) ? 16 * NGPU : $(nproc) ))}
mkdir -p "$WORK"
SRC=$PWD
t0=$(date +%s)

# the code of this call into the work folder (results/, .snakemake/ and checkpoints there stay)
tar cf - --exclude=./results --exclude=./.snakemake --exclude=./out --exclude=./.whl . | tar xf - -C "$WORK"
cd "$WORK" || exit 1
PYTHONPATH=${PYTHONPATH:-}
export PYTHONPATH=$WORK:${PYTHONPATH#"$SRC"}
MACHINE=$(python3 -c "from solver.provenance import machine_tag; print(machine_tag())")
RESULTS=$(python3 -c "import yaml; print(yaml.safe_load(open('$CONFIG')).get('results_dir', 'results'))")
n=$(ls "$WORK"/.chunk_* 2>/dev/null | wc -l)
touch "$WORK/.chunk_$n"
echo "chunk $n on $MACHINE, code $SOLVER_SOURCE_COMMIT, limit ${LIMIT_S}s, $CORES cores, $GPU_JOBS GPU jobs at once, targets: ${TARGETS:-all}"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true
command -v ncu && ncu --version | tail -1

snakemake --unlock --cores 16 --configfile "$CONFIG" > /dev/null 2>&1  # --cores: without it the DAG of vecops.smk fails and nothing is unlocked
left=$(( LIMIT_S - ($(date +%s) - t0) - 40 ))  # 40 s for Snakemake to stop, the tar and the status
# shellcheck disable=SC2086
timeout --signal=INT --kill-after=20 "$left" snakemake --cores "$CORES" --resources gpu="$GPU_JOBS" --configfile "$CONFIG" \
    --rerun-incomplete --keep-going --printshellcmds $TARGETS > "$OUT/snakemake_$n.log" 2>&1
rc=$?
echo "snakemake exit $rc after $(( $(date +%s) - t0 )) s (124: stopped at the limit; call again)"

# the jobs still to run (the targets without --prioritize and its files; after "--": options end there); the
# same --cores / --resources as the run, else params that depend on them read as changed (2026-11-27: 30 jobs listed
# after a complete run)
# shellcheck disable=SC2086
snakemake -n --cores "$CORES" --resources gpu="$GPU_JOBS" --configfile "$CONFIG" --quiet rules -- ${TARGETS%%--prioritize*} > "$OUT/status.txt" 2>&1
if [ "${FINAL:-0}" = 1 ]; then
    snakemake --cores 16 --configfile "$CONFIG" --report "$OUT/report.html" >> "$OUT/snakemake_$n.log" 2>&1
fi
find "$RESULTS/$MACHINE" "$RESULTS/compare" -type f \( -name '*.csv' -o -name '*.json' -o -name '*.png' -o -name '*.md' \
    -o -name '*.log' -o -name '*.tsv' \) 2>/dev/null | tar czf "$OUT/results_$MACHINE.tgz" -T -
ls -la "$OUT"
tail -15 "$OUT/status.txt"
grep -E "steps \([0-9]+%\) done|Error in rule|Exiting because" "$OUT/snakemake_$n.log" | tail -5
