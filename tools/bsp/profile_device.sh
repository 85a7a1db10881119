#!/usr/bin/env bash
# Device-machine check of the BSP GPU path at HEAD, one call: every gpu test of the suite, the
# coarse t = 0.1 ps validation with the fast paths (run record kept), the kernel-profile rule through
# Snakemake (config/gpu_quick.yaml, timing mesh 6x33x33x150x24) and the kernel profile of the
# standard mesh on the GPU (CUDA vs array) and on the host (numba 1/16 threads vs NumPy).
# Results under results/<machine>/..., packed into $OUT/bsp_profile.tgz.
# usage: bash tools/bsp/profile_device.sh   (carry .whl for Snakemake)
PY=python3 BSP_OUT_DEFAULT=/tmp/bsp_profile_out BSP_WHL=1; . "$(dirname "$0")/_preamble.sh"  # set -u, env, OUT, PY, .whl
t0=$SECONDS
M=$(bsp_machine)
D=results/$M/bsp/device; K=results/$M/bsp/kernels; mkdir -p "$D" "$K"
pack() { tar czf "$OUT/bsp_profile.tgz" results/$M/pytest_gpu_all.log "$D"/validation_coarse_final* "$K" 2>/dev/null; }
echo "== all gpu tests ($((SECONDS-t0)) s)"
timeout 240 $PY -m pytest -m gpu -q -p no:cacheprovider tests/ 2>&1 | tee results/$M/pytest_gpu_all.log | tail -3
echo "== coarse validation, fast paths ($((SECONDS-t0)) s)"
rm -rf "$D/validation_coarse_final"
timeout 120 $PY -m solver run config/coarse.yaml --out "$D/validation_coarse_final" --backend cupy --no-progress > "$D/validation_coarse_final.log" 2>&1
tail -1 "$D/validation_coarse_final.log"
rm -f "$D/validation_coarse_final/fields.h5"; rm -rf "$D/validation_coarse_final/snapshots"
$PY -m solver bsp validate "$D/validation_coarse_final" --csv "$D/validation_coarse_final.csv" 2>&1 | tail -7
pack
echo "== rule bsp_table4_000_kernel_profile through snakemake, gpu_quick ($((SECONDS-t0)) s)"
timeout 150 $PY -m snakemake --cores 16 --configfile config/gpu_quick.yaml -- "$K/kernel_profile.csv" > "$OUT/snakemake_profile.log" 2>&1
echo "snakemake exit $?"; tail -3 "$OUT/snakemake_profile.log"
echo "== kernel profile, standard mesh, cupy ($((SECONDS-t0)) s)"
timeout 120 $PY -m solver bsp kernel-profile config/standard.yaml --backend cupy --mesh 6x65x65x300x48 \
  --reps 10 --out "$K/kernel_profile_standard_cupy.csv" > "$K/kernel_profile_standard_cupy.log" 2>&1
echo "exit $?"
pack
echo "== kernel profile, standard mesh, numba 1/16 threads ($((SECONDS-t0)) s)"
timeout 150 $PY -m solver bsp kernel-profile config/standard.yaml --backend numba --mesh 6x65x65x300x48 \
  --threads 1,all --reps 3 --out "$K/kernel_profile_standard_numba.csv" > "$K/kernel_profile_standard_numba.log" 2>&1
echo "exit $?"
pack
echo "== summary ($((SECONDS-t0)) s)"
tail -1 results/$M/pytest_gpu_all.log; cat "$D/validation_coarse_final.csv"
for f in "$K"/kernel_profile*.log; do echo "-- $f"; tail -22 "$f"; done
