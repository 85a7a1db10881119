"""Timed parallel energy sweep (Fig 8a of paper 002, measured): the sweep is split into C chunks
(energies dealt round-robin, as rule rgf_sweep_chunk does) and the chunks run as separate
processes, at most W at a time.  Worker k owns device k: on the GPU (``devices='gpu'``) its
processes see only GPU ``ids[k]`` through CUDA_VISIBLE_DEVICES (one process per GPU at a time; any
number of GPUs); on the CPU (``devices='cpu'``) every process gets one BLAS thread.  Each chunk
runs the very command of rule rgf_sweep_chunk: ``python -m solver rgf sweep <sweep args> --chunk c
--n-chunks C``.

``scaling_run`` writes one row per chunk (worker, device, start/end relative to the launch, wall
time of the process and the chunk's own compute time from its run.json) and ``<out>.run.json``
with the makespan; ``python -m solver rgf scaling-run`` (rule rgf_scaling_run) calls it.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pandas as pd

# the folder holding the solver package: chunk processes import this very copy
ROOT = Path(__file__).resolve().parents[2]


def visible_device(i: int) -> str:
    """CUDA_VISIBLE_DEVICES of a child that is to see GPU ``i`` of the GPUs this process sees:
    entry ``i`` of this process's CUDA_VISIBLE_DEVICES where set (SLURM, ``--gpu exclusive:K``),
    else ``i``."""
    mine = os.environ.get("CUDA_VISIBLE_DEVICES")
    if mine is None or not mine.strip():
        return str(i)
    entries = [e.strip() for e in mine.split(",") if e.strip()]
    if i >= len(entries):
        raise ValueError(f"GPU {i}: this process sees {len(entries)} (CUDA_VISIBLE_DEVICES={mine})")
    return entries[i]


def run_chunks(workers, chunks, sweep_args, chunk_dir, devices="cpu", gpu_ids=None, log=print):
    """Run the C chunk processes on W workers; returns (one row per chunk, makespan in s)."""
    chunk_dir = Path(chunk_dir)
    chunk_dir.mkdir(parents=True, exist_ok=True)
    ids = list(gpu_ids) if gpu_ids else list(range(workers))
    if devices == "gpu" and len(ids) < workers:
        raise ValueError(f"{workers} workers: only {len(ids)} GPU ids given ({ids})")
    todo = list(range(chunks))
    lock = threading.Lock()
    rows, errors = [], []
    t0 = time.perf_counter()

    def worker(k):
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join([str(ROOT)] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
        if devices == "gpu":  # ids count the GPUs this process sees (a scheduler's or gpuslot's list)
            env["CUDA_VISIBLE_DEVICES"] = visible_device(ids[k])
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
        raise RuntimeError("\n".join(errors))
    makespan = time.perf_counter() - t0
    return pd.DataFrame(rows).sort_values("chunk").reset_index(drop=True), makespan


def scaling_run(workers, chunks, sweep_args, out, chunk_dir, devices="cpu", gpu_ids=None, log=print):
    """Run the chunks, write ``out`` (CSV) and ``<out>.run.json`` (atomically); returns the rows."""
    from solver import io, provenance

    if workers < 1 or chunks < 1:
        raise ValueError(f"workers {workers} / chunks {chunks}: both must be >= 1")
    log(f"rgf scaling-run: {chunks} chunks on {workers} {devices} workers")
    df, makespan = run_chunks(workers, chunks, sweep_args, chunk_dir, devices, gpu_ids, log=log)
    out = Path(out)
    io.write_csv(df, out)
    io.write_json(out.with_name(out.stem + ".run.json"),
                  provenance.collect({"workers": workers, "chunks": chunks, "devices": devices,
                                      "gpu_ids": gpu_ids, "sweep_args": list(sweep_args)}, None,
                                     {"makespan_s": makespan, "sum_process_s": float(df.process_s.sum()),
                                      "sum_compute_s": float(df.compute_s.sum())}))
    log(f"makespan {makespan:.2f} s, sum of chunk processes {df.process_s.sum():.2f} s")
    return df
