#!/usr/bin/env bash
# BSP on the device machine, one call: GPU tests, CuPy (fast paths on) vs NumPy after 20 steps,
# per-phase times of the coarse and standard meshes with the array code and with the fast paths
# (numerics.kernels = array | auto), and the t = 0.1 ps validation against the reference
# implementation on the coarse mesh (CuPy, fast paths on).  BSP_NUMPY=1 adds the standard mesh on
# NumPy (one step, ~30 s).  Results go to results/<machine>/bsp/device/ and come back as
# $OUT/bsp_device.tgz.   usage: bash tools/bsp/device_run.sh
PY=python3 BSP_OUT_DEFAULT=/tmp/bsp_out BSP_WHL=1; . "$(dirname "$0")/_preamble.sh"  # set -u, env, OUT, PY, .whl
t0=$SECONDS
M=$(bsp_machine)
D=results/$M/bsp/device; mkdir -p "$D"
pack() { tar czf "$OUT/bsp_device.tgz" "$D"; }
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv | tee "$D/nvidia_smi.csv"
$PY -m solver info > "$D/machine.json"
SMALL="--set mesh.N_sbn=3 --set mesh.NX=17 --set mesh.NZ=17 --set mesh.NW=40 --set mesh.NPHI=12"
echo "== gpu tests ($((SECONDS-t0)) s)"
timeout 300 $PY -m pytest -m gpu -q tests/test_bsp_*.py 2>&1 | tee "$D/pytest_gpu.log" | tail -15
echo "== cupy vs numpy, 20 steps ($((SECONDS-t0)) s)"
timeout 120 $PY -m solver bsp compare-backends $SMALL --steps 20 --backends numpy,cupy --csv "$D/compare_backends_20steps.csv" 2>&1 | tail -8
for k in array auto; do
  echo "== coarse mesh, cupy, kernels=$k, 10 steps ($((SECONDS-t0)) s)"
  timeout 150 $PY -m solver bsp phases config/coarse.yaml --backends cupy --steps 10 --set numerics.kernels=$k --out /tmp/coarse_$k --csv "$D/phases_coarse_cupy_$k.csv" 2>&1 | tail -30
  echo "== standard mesh, cupy, kernels=$k, 3 steps ($((SECONDS-t0)) s)"
  timeout 150 $PY -m solver bsp phases config/standard.yaml --backends cupy --steps 3 --set numerics.kernels=$k --out /tmp/std_$k --csv "$D/phases_standard_cupy_$k.csv" 2>&1 | tail -30
  cp /tmp/std_$k/cupy/run.json "$D/run_standard_cupy_$k.json" 2>/dev/null; cp /tmp/std_$k/cupy/timers.csv "$D/timers_standard_cupy_$k.csv" 2>/dev/null
done
pack
echo "== coarse validation to 0.1 ps on cupy, in the background ($((SECONDS-t0)) s)"
rm -rf "$D/validation_coarse"
left=$((560 - (SECONDS-t0)))
( timeout $left $PY -m solver run config/coarse.yaml --out "$D/validation_coarse" --backend cupy --no-progress > "$D/validation_coarse.log" 2>&1 ) &
vpid=$!
if [ -n "${BSP_NUMPY:-}" ]; then
  echo "== standard mesh, numpy, 1 step ($((SECONDS-t0)) s)"
  timeout 200 $PY -m solver bsp phases config/standard.yaml --backends numpy --steps 1 --out /tmp/std_numpy --csv "$D/phases_standard_numpy.csv" 2>&1 | tail -30
  cp /tmp/std_numpy/numpy/run.json "$D/run_standard_numpy.json" 2>/dev/null; cp /tmp/std_numpy/numpy/timers.csv "$D/timers_standard_numpy.csv" 2>/dev/null
fi
pack
wait $vpid; echo "validation run exit $? ($((SECONDS-t0)) s)"; tail -3 "$D/validation_coarse.log"
rm -f "$D/validation_coarse/fields.h5"; rm -rf "$D/validation_coarse/snapshots"
$PY -m solver bsp validate "$D/validation_coarse" --csv "$D/validation_coarse.csv" 2>&1 | tail -10
pack
echo "== summary ($((SECONDS-t0)) s)"
tail -3 "$D/pytest_gpu.log"; cat "$D/compare_backends_20steps.csv"; cat "$D/validation_coarse.csv"
for f in "$D"/phases_*_cupy_*.csv; do echo "-- $f"; cat "$f"; done
