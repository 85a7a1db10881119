"""One device-machine session for rgf (run by hand on the GPU machine, not by Snakemake):
gpu tests, Table 3 cases 1-5 at a mid size, and the paper's full-size wire (X-UC = 100, 8 x 16,
blocks of 2560) at a few energies on the GPU.  Usage: python tools/rgf/rgf_device.py OUTDIR BUDGET_S"""
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

T0 = time.time()
out = Path(sys.argv[1])
budget = float(sys.argv[2]) if len(sys.argv) > 2 else 400
out.mkdir(parents=True, exist_ok=True)
from solver.provenance import machine_tag  # noqa: E402

tag = machine_tag()
res = out / tag
res.mkdir(exist_ok=True)
print("machine", tag, flush=True)

r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-m", "gpu", "tests/test_rgf_gpu.py"], capture_output=True, text=True)
(res / "gpu_tests.log").write_text(r.stdout + r.stderr)
print(r.stdout[-600:], flush=True)

from solver.rgf import bench  # noqa: E402
from solver.rgf.wire import build_wire, cell_hamiltonian  # noqa: E402

# Table 3 / Fig 7: cases 4 and 5 first, then 1-3 (slow) while the budget lasts
df = bench.cases_benchmark(res / "table3_cases45.csv", 4, 4, 8, 2.6, cases=(4, 5))
print(df.to_string(index=False), flush=True)

# the paper's full-size wire on the GPU
import cupy as cp  # noqa: E402

w = build_wire(8, 16, "jancu1998", False)
H00, H01 = cell_hamiltonian(w)
Hg = cp.asarray(H00 + H01 + H01.T)
ev = cp.linalg.eigvalsh(Hg).get()
del Hg
nv = (4 * 4 * w.atoms_per_layer - w.n_dangling) // 2
cbm, vbm = float(ev[nv]), float(ev[nv - 1])
print(f"8x16 wire at Gamma: VBM {vbm:.4f} CBM {cbm:.4f} gap {cbm - vbm:.4f} eV", flush=True)
with open(res / "wire_8x16_gamma.txt", "w") as f:
    f.write(f"set jancu1998, no SO, shift 20 eV; bands at k=0 of the 8x16 [100] wire (cell 10240)\nVBM_eV {vbm}\nCBM_eV {cbm}\ngap_eV {cbm - vbm}\n")
del H00, H01
energies = [cbm + 0.02, cbm + 0.05, cbm + 0.1, cbm + 0.15, cbm + 0.3, vbm - 0.1]
done = []
for k, E in enumerate(energies):
    left = budget - (time.time() - T0)
    if done and left < 1.3 * max(done) + 60:
        print("budget: stop full-size sweep after", k, "energies", flush=True)
        break
    t = time.time()
    d = bench.sweep(res / f"full_xuc100_8x16_E{k}.csv", 8, 16, 100, [E], "jancu1998", False, 20.0, 1e-6, "cupy",
                    config={"ny": 8, "nz": 16, "xuc": 100, "E": E})
    done.append(time.time() - t)
    print(d.to_string(index=False), flush=True)
    cp.get_default_memory_pool().free_all_blocks()

left = budget - (time.time() - T0)
if left > 150:
    df = bench.cases_benchmark(res / "table3_cases123.csv", 4, 4, 8, 2.6, cases=(1, 2, 3))
    print(df.to_string(index=False), flush=True)
print(f"total {time.time() - T0:.1f} s", flush=True)
import tarfile  # noqa: E402

with tarfile.open(out / "rgf_device_results.tar.gz", "w:gz") as tf:
    tf.add(res, arcname=tag)
