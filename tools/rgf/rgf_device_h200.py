"""Device-machine session for rgf on one H200 (run by hand, not by Snakemake; the per-chunk
command is the one of rule rgf_sweep_chunk, called in-process):
1. the GPU tests of tests/test_rgf*.py;
2. the inverse / batching benchmarks (stacked inv vs stacked solve vs one gesv per block; whole RGF
   one energy at a time vs batched over energies, blocks 20 / 80 / 320);
3. Fig 8b/8c of the paper's 8 x 16 cross-section (blocks of 2560) at X-UC = 4 and 10 (the leads of
   an energy shared by both lengths) on an energy grid resolving the first plateaus above the
   conduction-band edge (CBM 1.2168 eV at k = 0, results/nvidia-h100/rgf/wire_8x16_gamma.txt),
   4 chunks dealt round-robin, run coarse-to-fine (0, 2, 1, 3) while the budget lasts.
Usage: python tools/rgf/rgf_device_h200.py OUTDIR BUDGET_S"""
import os
import subprocess
import sys
import tarfile
import time
from pathlib import Path

T0 = time.time()
out = Path(sys.argv[1])
budget = float(sys.argv[2]) if len(sys.argv) > 2 else 330
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from solver.provenance import machine_tag  # noqa: E402

DRY = bool(os.environ.get("RGF_DRY"))  # CPU rehearsal: NumPy, a 1 x 1 wire, tiny benchmarks
BE = "numpy" if DRY else "cupy"
NY, NZ = (1, 1) if DRY else (8, 16)
tag = machine_tag()
res = out / tag / "rgf"
res.mkdir(parents=True, exist_ok=True)
print("machine", tag, flush=True)

r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-m", "gpu", "tests/test_rgf.py", "tests/test_rgf_gpu.py"],
                   capture_output=True, text=True)
(res / "gpu_tests.log").write_text(r.stdout + r.stderr)
print(r.stdout[-800:], f"[{time.time() - T0:.0f} s]", flush=True)

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from solver.rgf import bench  # noqa: E402

pd.set_option("display.width", 200)
df = bench.inverse_benchmark(res / "inverse_bench.csv", sizes=(64,) if DRY else (64, 128, 256, 320, 512, 1024),
                             batch=8, backend=BE, gemm_sizes=(64,) if DRY else (320, 1024, 2560))
print(df.to_string(index=False), f"[{time.time() - T0:.0f} s]", flush=True)
df = bench.batching_benchmark(res / "batching_bench.csv", sections=((1, 1),) if DRY else ((1, 1), (2, 2), (4, 4)),
                              xuc=4, n_energies=16, backend=BE)
print(df.to_string(index=False), f"[{time.time() - T0:.0f} s]", flush=True)

CBM = 1.2168
E = np.linspace(1.200, 1.300, 41)  # 2.5 meV steps
cfg = {"ny": NY, "nz": NZ, "xuc": [4, 10], "emin": 1.2, "emax": 1.3, "ne": 41, "n_chunks": 4, "set": "jancu1998",
       "spin_orbit": False, "eta": 1e-6, "backend": BE, "batch": 1}
sw = res / "sweep8x16"
sw.mkdir(exist_ok=True)
done = []
for c in (0, 2, 1, 3):
    left = budget - (time.time() - T0)
    if done and left < 1.15 * max(done) + 15:
        print(f"budget: stop the 8x16 sweep before chunk {c} ({left:.0f} s left)", flush=True)
        break
    t = time.time()
    d = bench.sweep(sw / f"chunk{c}.csv", NY, NZ, [4, 10], E, "jancu1998", False, 20.0, 1e-6, BE, c, 4,
                    config=cfg | {"chunk": c}, batch=1)
    done.append(time.time() - t)
    print(d.to_string(index=False), f"[chunk {c}: {done[-1]:.1f} s, total {time.time() - T0:.0f} s]", flush=True)
    if not DRY:
        import cupy as cp

        cp.get_default_memory_pool().free_all_blocks()

from solver.rgf.plots import fig8bc  # noqa: E402

csvs = sorted(sw.glob("chunk*.csv"))
if csvs:
    fig8bc(csvs, res / "fig8bc_8x16_transmission_ldos.png", f"{NY}x{NZ}, X-UC = 4 and 10 (Jancu, no SO)", cbm=CBM)
print(f"total {time.time() - T0:.1f} s", flush=True)
with tarfile.open(out / "rgf_h200.tar.gz", "w:gz") as tf:
    tf.add(out / tag, arcname=tag)
# short table last
if csvs:
    a = pd.concat([pd.read_csv(c) for c in csvs]).sort_values(["xuc", "E_eV"])
    print(a.groupby("xuc")[["time_s", "leads_s", "step1_s", "step3_s", "step4_s"]].mean().to_string())
    print(a[a.xuc == 4][["E_eV", "T_LR", "T_RL", "LDOS_per_cell_per_eV"]].to_string(index=False))
