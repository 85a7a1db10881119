#!/usr/bin/env bash
# vecops on the device machine (no Snakemake there): GPU tests, then the same
# `python -m solver vecops ...` commands the rules run, with config/config.yaml, into
# results/<machine>/vecops/; the folder comes back as $OUT/vecops_results.tgz.
#   usage: bash tools/vecops/vecops_device_run.sh [CONFIG] [FIGURES...]
set -u
export PYTHONUNBUFFERED=1 MPLBACKEND=Agg
OUT=${OUT:-/tmp/vecops_out}; mkdir -p "$OUT"
CFG=${1:-config/config.yaml}; shift || true
FIGS=${*:-"fig09 fig10_11 fig12 fig13 fig14 crossover"}
PY=python
M=$($PY -c "from solver.provenance import machine_tag; print(machine_tag())")
D=results/$M/vecops; mkdir -p "$D/logs"
declare -A NAME=([fig09]=fig09_axpy [fig10_11]=fig10_11_dot_blocks [fig12]=fig12_dot_sizes [fig13]=fig13_spmv_vector [fig14]=fig14_spmv_scalar [crossover]=crossover_spmv)
echo "== machine $M ($(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null)) config $CFG"
t0=$SECONDS
$PY -c "import importlib.util as u; print('packages:', {m: bool(u.find_spec(m)) for m in ('cupy','numba','scipy','pandas','matplotlib','jsonschema','yaml')})"
echo "== compile check"
$PY -c "
from solver.vecops.kernels import GpuKernels
import time; t=time.time(); GpuKernels('float32'); GpuKernels('float64'); print(f'compiled in {time.time()-t:.1f} s')" 2>&1 | tail -20
[ "${PIPESTATUS[0]}" -eq 0 ] || { echo "COMPILE FAILED"; exit 3; }
echo "== gpu tests ($((SECONDS-t0)) s)"
timeout 120 $PY -m pytest -m gpu tests/test_vecops_gpu.py -q -x 2>&1 | tail -25
echo "== table1 + ceilings ($((SECONDS-t0)) s)"
$PY -m solver vecops table1 --gpu --config "$CFG" --out "$D/table1.csv" > "$D/logs/table1.log" 2>&1 || tail -20 "$D/logs/table1.log"
for dev in gpu cpu; do
  timeout 120 $PY -m solver vecops ceilings --device $dev --config "$CFG" --out "$D/ceilings.$dev.csv" > "$D/logs/ceilings_$dev.log" 2>&1; tail -6 "$D/logs/ceilings_$dev.log"
done
LIMIT=${VECOPS_LIMIT_S:-540}   # stop starting new steps after this many seconds; results are tarred after each step
for f in $FIGS; do
  for dev in gpu cpu; do
    [ "$dev" = cpu ] && [ "$f" = crossover ] && continue
    [ $((SECONDS-t0)) -gt "$LIMIT" ] && { echo "SKIPPED $f $dev (time limit)"; continue; }
    echo "== $f $dev ($((SECONDS-t0)) s)"
    timeout 120 $PY -m solver vecops bench --figure $f --device $dev --config "$CFG" --out "$D/${NAME[$f]}.$dev.csv" > "$D/logs/bench_${NAME[$f]}_$dev.log" 2>&1 \
      || { echo "FAILED $f $dev"; tail -30 "$D/logs/bench_${NAME[$f]}_$dev.log"; }
    tail -2 "$D/logs/bench_${NAME[$f]}_$dev.log"
    tar czf "$OUT/vecops_results.tgz" results/$M/vecops
  done
done
echo "== plot ($((SECONDS-t0)) s)"
$PY -m solver vecops plot --config "$CFG" --dir "$D" > "$D/logs/plot.log" 2>&1 || tail -20 "$D/logs/plot.log"
tar czf "$OUT/vecops_results.tgz" results/$M/vecops
echo "== summary ($((SECONDS-t0)) s)"
$PY - "$D" <<'PYEOF'
import sys, pandas as pd
from pathlib import Path
d = Path(sys.argv[1])
def rd(n):
    p = d / n
    return pd.read_csv(p) if p.is_file() else pd.DataFrame()
ce = rd("ceilings.gpu.csv")
if not ce.empty:
    print(ce[["quantity", "value", "unit", "reps"]].to_string(index=False))
bw = float(ce[ce.quantity == "copy_bandwidth"].value.iloc[0]) if not ce.empty else float("nan")
cols = ["impl", "n", "block", "matrix", "reps", "median_s", "mean_s", "loop_mean_s", "host_median_s", "gbytes_s", "rel_err", "spin_underruns"]
for n in ("fig09_axpy.gpu.csv", "fig12_dot_sizes.gpu.csv"):
    df = rd(n)
    if df.empty: continue
    big = df[df.n == df.n.max()].copy(); big["pct_copy"] = 100 * big.gbytes_s / bw
    print(n); print(big[cols + ["pct_copy"]].to_string(index=False, float_format=lambda x: f"{x:.4g}"))
for n in ("fig10_11_dot_blocks.gpu.csv", "fig13_spmv_vector.gpu.csv", "fig14_spmv_scalar.gpu.csv", "crossover_spmv.gpu.csv"):
    df = rd(n)
    if df.empty: continue
    print(n); print(df[cols].to_string(index=False, float_format=lambda x: f"{x:.3g}"))
PYEOF
