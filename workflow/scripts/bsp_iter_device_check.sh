#!/usr/bin/env bash
# ITER fast path on the device: its GPU tests, then per-phase times of the coarse mesh with the
# array ITER and the CUDA ITER (BTE as it is).  usage: bash workflow/scripts/bsp_iter_device_check.sh
set -u
export PYTHONUNBUFFERED=1 MPLBACKEND=Agg PYTHONPATH=$PWD
OUT=${OUT:-/tmp/bsp_iter_out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
timeout 240 python3 -m pytest -m gpu -q tests/test_bsp_kernels_iter.py tests/test_bsp_iter.py 2>&1 | tee "$OUT/pytest_iter_gpu.log" | tail -25
for k in array auto; do
  timeout 150 python3 -m solver bsp phases config/coarse.yaml --backends cupy --steps 10 --set numerics.kernels=$k \
     --csv "$OUT/phases_coarse_iter_$k.csv" 2>&1 | grep -E "step|ITER|eigen|linsys|Frechet|BTE  " | head -12
done
