"""Device-machine session for Fig 8a on a host with several GPUs (run by hand; the workflow does
the same through rule rgf_scaling_run): timed parallel runs of one energy sweep of the paper's
8 x 16 cross-section (X-UC = 4, blocks of 2560), split into C chunks (one process per chunk, the
command of rule rgf_sweep_chunk), at most G chunk processes at a time, one per GPU through
CUDA_VISIBLE_DEVICES (solver.rgf.scaling).  Runs (G, C) in order of importance while
the budget lasts, then Fig 8a from the measured makespans.
With fewer GPUs than G, worker k runs on GPU k mod (number of GPUs): G > 1 on one GPU measures
processes sharing it (RGF_SHARE=1 allows that; otherwise such plans are skipped).
RGF_CPU=1: the same on the host's cores instead (one process per core, one BLAS thread each), a
3 x 3 wire (blocks of 180) at X-UC = 4 and 64 energies; results go to <tag>/rgf/scaling_cpu.
Usage: python tools/rgf/rgf_device_x2.py OUTDIR BUDGET_S [G,C G,C ...]"""
import os
import sys
import tarfile
import time
from pathlib import Path

T0 = time.time()
ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from solver import io, provenance  # noqa: E402
from solver.rgf.scaling import run_chunks  # noqa: E402

out = Path(sys.argv[1])
budget = float(sys.argv[2]) if len(sys.argv) > 2 else 170
DRY = bool(os.environ.get("RGF_DRY"))  # CPU rehearsal: a 1 x 1 wire on CPU workers
CPU = bool(os.environ.get("RGF_CPU"))  # strong scaling over the host's cores
SHARE = bool(os.environ.get("RGF_SHARE"))
plan = [tuple(int(v) for v in a.split(",")) for a in sys.argv[3:]] or [(1, 1), (2, 2), (2, 4), (2, 8), (1, 2), (1, 4)]
try:
    import cupy as cp

    n_gpu = cp.cuda.runtime.getDeviceCount()
except Exception:
    n_gpu = 0
tag = os.environ.get("RGF_TAG") or provenance.machine_tag()
res = out / tag / "rgf"
sc = res / ("scaling_cpu" if CPU else "scaling")
sc.mkdir(parents=True, exist_ok=True)
print(f"machine {tag}, {n_gpu} GPUs", flush=True)
args = ["--ny", "1", "--nz", "1", "--xuc", "2", "--emin", "4.5", "--emax", "8.0", "--ne", "8", "--backend", "numpy"] if DRY else \
    ["--ny", "8", "--nz", "16", "--xuc", "4", "--emin", "1.2125", "--emax", "1.2825", "--ne", "8", "--set", "jancu1998",
     "--eta", "1e-06", "--backend", "cupy"]
if CPU:
    args = ["--ny", "3", "--nz", "3", "--xuc", "4", "--emin", "1.5", "--emax", "2.5", "--ne", "64", "--set", "jancu1998",
            "--eta", "1e-06", "--backend", "numpy"]
devices = "cpu" if DRY or CPU else "gpu"
if devices == "gpu":  # fill CuPy's on-disk kernel cache once, so that the first timed run does not compile
    import subprocess

    subprocess.run([sys.executable, "-m", "solver", "rgf", "sweep", "--out", str(sc / "warmup.csv"), "--ny", "1", "--nz",
                    "1", "--xuc", "2", "--emin", "4", "--emax", "4", "--ne", "1", "--backend", "cupy"],
                   check=True, capture_output=True, env=dict(os.environ, PYTHONPATH=str(ROOT)))
    print(f"warm-up done [{time.time() - T0:.0f} s]", flush=True)
done = {}
csvs = []
for G, C in plan:
    if devices == "gpu" and G > n_gpu and not SHARE:
        print(f"skip G={G}: {n_gpu} GPUs", flush=True)
        continue
    left = budget - (time.time() - T0)
    est = done.get((1, 1), 0) / G * 1.2 + 8 * C / G if done else 0
    if done and left < est:
        print(f"budget: skip G={G} C={C} (estimated {est:.0f} s, {left:.0f} s left)", flush=True)
        continue
    name = f"w{G}_c{C}"
    print(f"run G={G} C={C}", flush=True)
    df, makespan = run_chunks(G, C, args, sc / name, devices, [k % max(n_gpu, 1) for k in range(G)] if devices == "gpu" else None,
                              log=lambda s: print(s, flush=True))
    p = sc / f"{name}.csv"
    io.write_csv(df, p)
    io.write_json(p.with_name(p.stem + ".run.json"),
                  provenance.collect({"workers": G, "chunks": C, "devices": devices, "gpu_ids": [k % max(n_gpu, 1) for k in range(G)],
                                      "n_gpus": min(G, n_gpu) if devices == "gpu" else 0,
                                      "sweep_args": args}, None,
                                     {"makespan_s": makespan, "sum_process_s": float(df.process_s.sum()),
                                      "sum_compute_s": float(df.compute_s.sum())}))
    done[(G, C)] = makespan
    csvs.append(p)
    print(f"  G={G} C={C}: makespan {makespan:.2f} s [{time.time() - T0:.0f} s]", flush=True)

from solver.rgf.bench import measured_scaling  # noqa: E402
from solver.rgf.plots import fig8a_measured, fig8bc  # noqa: E402

stem = "fig8a_strong_scaling_cpu" if CPU else "fig8a_strong_scaling"
df = measured_scaling(csvs, res / f"{stem}.csv")
fig8a_measured(res / f"{stem}.csv", res / f"{stem}.png",
               "1x1 x 2 UC" if DRY else "3x3 x 4 UC, 64 energies, host cores" if CPU else
               f"8x16 x 4 UC, 8 energies (blocks 2560), {n_gpu} GPU(s)")
chunks = sorted((sc / f"w{max(done)[0]}_c{max(done)[1]}").glob("chunk*.csv"))
if chunks and not CPU:
    fig8bc(chunks, res / "fig8bc_scaling_energies.png", "energies of the Fig 8a runs", cbm=None if DRY else 1.2168)
with tarfile.open(out / ("rgf_cpu.tar.gz" if CPU else "rgf_x2.tar.gz"), "w:gz") as tf:
    tf.add(out / tag, arcname=tag)
print(f"total {time.time() - T0:.1f} s", flush=True)
import pandas as pd  # noqa: E402

pd.set_option("display.width", 200)
print(df.to_string(index=False))
