#!/usr/bin/env bash
# The I-V study (docs/iv.md) on one GPU in one device call: config/gpu.yaml's iv section (15 bias
# points on the coarse mesh 6x33x33x150x24, cupy, each until steady state or 0.8 ps).  Warms CuPy's
# kernel cache with a 3-step run (so the points do not all compile at once), then runs the points
# through Snakemake with --resources gpu=16 (the coarse mesh is launch-bound, ~11 ms per step, so
# the points share the GPU): 11 at once, then the 4 at V_G = -0.4, -0.6 V ramped down from the
# V_G = -0.2 V points; then the tables and figures (rule iv_collect).  Expected (a prediction,
# docs/iv.md section 6): 6-9 minutes on an H200, at most 15 x ~10,100 steps.  IV_LIMIT_S (default
# 480 s) cuts Snakemake; then (or if a point failed) the finished points are collected, and the same
# command resumes the unfinished points from their checkpoints.
# Results: results/<machine>/iv/ (points, curves, traces, figures of merit, figures, each run's
# run.json / scalars.csv / profiles.csv, logs), packed without the .h5 files into $OUT/iv_device.tgz.
#   usage (repository root): bash tools/bsp/iv_device.sh
set -u
export PYTHONUNBUFFERED=1 MPLBACKEND=Agg
OUT=${OUT:-/tmp/iv_out}; mkdir -p "$OUT"
if [ -d .whl ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    && export PYTHONPATH=/tmp/site:$PWD PATH=/tmp/site/bin:$PATH
fi
t0=$SECONDS
M=$(python3 -c "from solver.provenance import machine_tag; print(machine_tag())")
D=results/$M/iv; mkdir -p "$D"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv | tee "$OUT/nvidia_smi.csv"
echo "== warm the kernel cache ($((SECONDS-t0)) s)"
python3 -m solver run config/bsp/dgmosfet.yaml --out /tmp/iv_warm --overwrite --no-resume --backend cupy --no-progress \
  --set mesh.N_sbn=6 --set mesh.NX=33 --set mesh.NZ=33 --set mesh.NW=150 --set mesh.NPHI=24 \
  --set time.steps=3 --set time.t_end_ps=null 2>&1 | tail -1
echo "== snakemake: every iv point at once ($((SECONDS-t0)) s)"
# a call cut by the timeout's SIGINT can leave .snakemake/ locked and its jobs marked incomplete:
# unlock and rerun those (their runs resume from their checkpoints, which are no rule's output)
# (--unlock needs --cores: a rule takes a fraction of the cores)
snakemake "$D/figures_of_merit.csv" --unlock --cores 16 --configfile config/gpu.yaml > /dev/null 2>&1
timeout -s INT -k 60 "${IV_LIMIT_S:-480}" snakemake "$D/figures_of_merit.csv" --cores 16 --resources gpu=16 \
  --keep-going --rerun-incomplete --configfile config/gpu.yaml > "$OUT/snakemake.log" 2>&1
echo "snakemake rc=$? ($((SECONDS-t0)) s)"; tail -5 "$OUT/snakemake.log"
if [ ! -f "$D/figures_of_merit.csv" ]; then
  # a point failed (e.g. a negative-density fault at low V_G, docs/iv.md): tables and figures of the finished ones
  echo "== collect the finished points only"; tail -n 2 "$D"/logs/point_*.log
  runs=$(ls -d "$D"/runs/*/*/*/ 2>/dev/null | while read -r r; do [ -f "$r/run.json" ] && echo "$r"; done)
  study=$(python3 -c "import json, yaml; c = yaml.safe_load(open('config/gpu.yaml'))['iv']; print(json.dumps({k: c[k] for k in ('vg', 'idvg_vds', 'idvd_vg', 'vds', 'vth_current_A_per_m', 'bottom_gate_V')}))")
  if [ -n "$runs" ]; then python3 -m solver bsp iv collect $runs --study "$study" --out "$D"; else echo "no point finished"; fi
fi
tar czf "$OUT/iv_device.tgz" --exclude='*.h5' "$D"
if [ -f "$D/points.csv" ]; then
  python3 -c "
import pandas as pd
p = pd.read_csv('$D/points.csv')
print(p[['point', 'Id_A_per_m', 'steady', 't_steady_ps', 't_end_ps', 'steps', 'wall_s']].to_string(index=False))
print(pd.read_csv('$D/figures_of_merit.csv')[['quantity', 'value', 'unit', 'condition']].to_string(index=False))"
fi
echo "total $((SECONDS-t0)) s"
