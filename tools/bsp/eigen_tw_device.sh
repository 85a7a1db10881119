#!/usr/bin/env bash
# numerics.eigen = twisted vs newton in one device call (docs/performance-iter-eigen.md).  From the
# tree's root:  OUT=... bash tools/bsp/eigen_tw_device.sh
#   tests   the gpu tests of the eigen kernels, the ITER graph and the cupy resume
#   bench   python -m solver bsp bench, 6x65x65x300x48 and 6x65x129x300x48 (200 steps after 5),
#           numerics.eigen=newton and =twisted alternating, two rounds
#   probe   tools/bsp/eigen_tw_probe.py: the kernels on a real ITER potential (device us, Sturm
#           evaluations, differences, bitwise repeat) at NZ = 65, 129; Newton counts per step of 20 steps
#   ncu     kernel durations of the four kernels (if time is left)
# Everything goes to $OUT/eigen_tw.tgz and $OUT/summary.txt; a short table is printed last.
set -u
export PYTHONUNBUFFERED=1 MPLBACKEND=Agg PYTHONPATH=.
PY=python3; L=/tmp/eigen_tw; rm -rf "$L"; mkdir -p "$L"; t0=$SECONDS
BUDGET=${BUDGET:-225}
left() { echo $(( BUDGET - (SECONDS - t0) )); }
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv > "$L/nvidia_smi.csv"
cat COMMIT > "$L/commit.txt" 2>/dev/null || true; export SOLVER_SOURCE_COMMIT=$(cat COMMIT 2>/dev/null || echo unknown)
CFG=config/bsp/dgmosfet.yaml; STD=6x65x65x300x48; NZ129=6x65x129x300x48
echo "== gpu tests ($((SECONDS-t0)) s)"
timeout 90 $PY -m pytest -m gpu -q -p no:cacheprovider \
  tests/test_bsp_kernels_cuda_eigen_tw.py tests/test_bsp_kernels_cuda_eigen.py tests/test_bsp_iter_graph.py \
  "tests/test_bsp_kernels_cuda_rk.py::test_gpu_run_with_rk_fast_path_resumes_bitwise" > "$L/pytest_gpu.log" 2>&1
echo "pytest exit $?"; tail -3 "$L/pytest_gpu.log"
echo "== bench ($((SECONDS-t0)) s)"
for r in 1 2; do
  for v in newton twisted; do
    timeout 35 $PY -m solver bsp bench $CFG --set numerics.eigen=$v --case $STD:cupy:1:200:5 --case $NZ129:cupy:1:200:5 \
      --out "$L/bench_${v}_$r" > "$L/bench_${v}_$r.log" 2>&1 || echo "bench $v $r: exit $?"
  done
done
echo "== probe ($((SECONDS-t0)) s)"
timeout $(( $(left) - 12 > 15 ? $(left) - 12 : 15 )) $PY tools/bsp/eigen_tw_probe.py --out "$L" --newton-steps 20 \
  > "$L/probe.log" 2>&1 || echo "probe: exit $?"
if [ "$(left)" -gt 22 ] && command -v ncu > /dev/null; then
  echo "== ncu ($((SECONDS-t0)) s)"
  timeout $(( $(left) - 5 )) ncu --target-processes all -k "regex:eigenvalues_(nr|tw)|ipim_(a|t)" --launch-count 70 \
    --metrics gpu__time_duration.sum --csv $PY tools/bsp/eigen_tw_probe.py --load "$L" --reps 1 > "$L/ncu.csv" 2> "$L/ncu.err"
  echo "ncu exit $?"
fi
{
  echo "card: $(tail -1 "$L/nvidia_smi.csv")"
  echo "-- probe (device us per call, SpinTimer median)"; grep "^{" "$L/probe.log"; grep "^NZ=" "$L/probe.log"
  echo "-- bench: case,ITER ms,step ms,BTE ms,Newton/step"
  for d in "$L"/bench_*/; do
    n=$(basename "$d"); tail -n +2 "$d/steps.csv" 2>/dev/null | awk -F, -v n="$n" '{print n","$1","$8","$5","$6","$9}'
  done
  echo "-- ncu (us)"
  grep -E "eigenvalues_|ipim_" "$L/ncu.csv" 2>/dev/null | awk -F'","' '{print $5, $(NF-1), $NF}' | sed 's/"//g' | head -20
  echo "-- tests"; tail -2 "$L/pytest_gpu.log"
} > "$L/summary.txt" 2>&1
tar czf "$OUT/eigen_tw.tgz" -C /tmp eigen_tw
cp "$L/summary.txt" "$OUT/summary.txt"
cat "$L/summary.txt"
