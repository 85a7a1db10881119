#!/usr/bin/env bash
# One device session for the eigen split (docs/performance-ipim.md): Tables 1 and 4 of 001,
# a coarse whole-run check (split vs the fused kernel, bitwise), the coarse phases, the gpu tests.
# Usage (repository root, $OUT set): SOLVER_SOURCE_COMMIT=<sha> bash workflow/scripts/bsp_ipim_device.sh
export PYTHONPATH=$PWD
mkdir -p "$OUT/tables" "$OUT/device"
# at most 8 files come back from $OUT: keep the count low (the first run lost table4 to this limit)
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.sm --format=csv
timeout 120 python3 workflow/scripts/bsp_iter_kernels.py --table1 "$OUT/tables/table1_ipim_001.csv" \
    --table4 "$OUT/tables/table4_iter_kernels_001.csv" > "$OUT/device/iter_kernels_001.log" 2>&1
echo "bench rc $?"; tail -n 25 "$OUT/device/iter_kernels_001.log"
timeout 30 python3 - > "$OUT/device/coarse_split_vs_fused.log" 2>&1 <<'PY'
import numpy as np
from solver.backend import get_backend
from solver.bsp.model import load
from solver.bsp.simulation import Simulation
from solver.bsp.kernels import cuda, cuda_iter
be = get_backend("cupy")
out = {}
for name, fn in (("split", cuda_iter.solve_eigen), ("fused", cuda_iter.solve_eigen_fused)):
    cuda.solve_eigen = fn
    cfg = load("config/coarse.yaml", ["time.steps=10", "time.t_end_ps=null", "numerics.backend=cupy", "output.progress=false", "output.checkpoint_every_steps=0"])
    sim = Simulation(cfg, backend=be, progress=False); sim.run(resume=False)
    out[name] = {k: be.to_numpy(getattr(sim.state, k)) for k in ("Phi", "V", "eps", "chi")}
cuda.solve_eigen = cuda_iter.solve_eigen
for k in out["split"]:
    print(k, "bitwise equal:", np.array_equal(out["split"][k], out["fused"][k]))
PY
echo "coarse check rc $?"; cat "$OUT/device/coarse_split_vs_fused.log" | tail -n 6
timeout 40 python3 -m solver bsp phases config/coarse.yaml --backends cupy --steps 10 --set numerics.kernels=auto \
    --csv "$OUT/device/phases_coarse_ipim.csv" 2>&1 | tail -n 3
echo "phases rc $?"; grep -E "step,|eigen|ITER," "$OUT/device/phases_coarse_ipim.csv"
timeout 110 python3 -m pytest -m gpu -q tests/test_bsp_*.py > "$OUT/device/pytest_gpu_ipim.log" 2>&1
echo "pytest rc $?"; tail -n 8 "$OUT/device/pytest_gpu_ipim.log"
