"""Timed parallel energy sweep (Fig 8a, measured): the sweep is split into C chunks (energies
dealt round-robin, as rule rgf_sweep_chunk does) and the chunks run as separate processes, at most
W at a time.  Worker k owns device k: on the GPU (``--devices gpu``) its processes see only GPU
``ids[k]`` through CUDA_VISIBLE_DEVICES (one process per GPU at a time; any number of GPUs); on the
CPU (``--devices cpu``) every process gets one BLAS thread.  Each chunk runs the very command of
rule rgf_sweep_chunk: ``python -m solver rgf sweep <sweep args> --chunk c --n-chunks C``.

Writes ``--out`` (one row per chunk: worker, device, start/end relative to the launch, wall time
of the process and the chunk's own compute time from its run.json) and ``<out>.run.json`` with
the makespan.  Usage:

    python workflow/scripts/rgf_chunks.py --workers W --chunks C --devices gpu|cpu [--gpu-ids 0,1]
        --out scaling/w2_c4.csv --chunk-dir scaling/w2_c4 -- --ny 8 --nz 16 --xuc 4 --emin ...
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[2]  # the repository (solver/ may not be installed)
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def run_chunks(workers, chunks, sweep_args, chunk_dir, devices="cpu", gpu_ids=None, log=print):
    chunk_dir = Path(chunk_dir)
    chunk_dir.mkdir(parents=True, exist_ok=True)
    ids = list(gpu_ids) if gpu_ids else list(range(workers))
    if devices == "gpu" and len(ids) < workers:
        raise SystemExit(f"--workers {workers}: only {len(ids)} GPU ids given ({ids})")
    todo = list(range(chunks))
    lock = threading.Lock()
    rows, errors = [], []
    t0 = time.perf_counter()

    def worker(k):
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join([str(ROOT)] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
        if devices == "gpu":
            env["CUDA_VISIBLE_DEVICES"] = str(ids[k])
        else:
            env.update(OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1", NUMBA_NUM_THREADS="1")
        while True:
            with lock:
                if not todo:
                    return
                c = todo.pop(0)
            out = chunk_dir / f"chunk{c}.csv"
            cmd = [sys.executable, "-m", "solver", "rgf", "sweep", *sweep_args, "--out", str(out),
                   "--chunk", str(c), "--n-chunks", str(chunks)]
            s = time.perf_counter()
            with open(chunk_dir / f"chunk{c}.log", "w") as f:
                rc = subprocess.call(cmd, env=env, stdout=f, stderr=subprocess.STDOUT)
            e = time.perf_counter()
            if rc != 0:
                errors.append(f"chunk {c} (worker {k}) exit {rc}: see {chunk_dir / f'chunk{c}.log'}")
                return
            rec = json.loads(out.with_name(out.stem + ".run.json").read_text())
            with lock:
                rows.append({"workers": workers, "chunks": chunks, "chunk": c, "worker": k,
                             "device": ids[k] if devices == "gpu" else "cpu", "start_s": s - t0, "end_s": e - t0,
                             "process_s": e - s, "compute_s": rec.get("wall_s")})
            log(f"  chunk {c}/{chunks} on worker {k}: {e - s:.2f} s")

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise SystemExit("\n".join(errors))
    makespan = time.perf_counter() - t0
    return pd.DataFrame(rows).sort_values("chunk").reset_index(drop=True), makespan


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    sweep_args = argv[argv.index("--") + 1:] if "--" in argv else []
    own = argv[:argv.index("--")] if "--" in argv else argv
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--workers", type=int, required=True)
    p.add_argument("--chunks", type=int, required=True)
    p.add_argument("--devices", choices=["cpu", "gpu"], default="cpu")
    p.add_argument("--gpu-ids", default="", help="comma list (default 0..W-1)")
    p.add_argument("--out", required=True)
    p.add_argument("--chunk-dir", required=True)
    a = p.parse_args(own)
    if a.workers < 1 or a.chunks < 1:
        raise SystemExit(f"--workers {a.workers} / --chunks {a.chunks}: both must be >= 1")
    ids = [int(x) for x in a.gpu_ids.split(",") if x] or None
    print(f"rgf_chunks: {a.chunks} chunks on {a.workers} {a.devices} workers", flush=True)
    df, makespan = run_chunks(a.workers, a.chunks, sweep_args, a.chunk_dir, a.devices, ids,
                              log=lambda s: print(s, flush=True))
    from solver import io, provenance

    out = Path(a.out)
    io.write_csv(df, out)
    io.write_json(out.with_name(out.stem + ".run.json"),
                  provenance.collect({"workers": a.workers, "chunks": a.chunks, "devices": a.devices,
                                      "gpu_ids": ids, "sweep_args": sweep_args}, None,
                                     {"makespan_s": makespan, "sum_process_s": float(df.process_s.sum()),
                                      "sum_compute_s": float(df.compute_s.sum())}))
    print(f"makespan {makespan:.2f} s, sum of chunk processes {df.process_s.sum():.2f} s", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
