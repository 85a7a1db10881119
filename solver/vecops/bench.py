"""Timing harness: the paper's method (warm-up discarded, then many timed runs, mean and median).

GPU (``time_gpu``): each timed launch sits between its own pair of CUDA events, the analogue of
the paper's OpenCL event profiling (which times each enqueued kernel).  Launches are enqueued in
batches of ``batch`` behind a one-thread *spin* kernel that keeps the GPU busy while Python
enqueues the batch, so the events measure the device time of the launch (kernel plus the
launch-to-launch gap, ~1-2 us) and not the host's Python launch cost.  If the spin was too short
(its completion event had fired before the batch was enqueued) the batch counts as an underrun and
the batch is discarded and redone with a longer spin (at most 3 times per point; the spin of the
next batch is otherwise 1.25 x the measured enqueue time of the last); the CSV reports
``spin_underruns``.  A call that blocks the host until the GPU is idle (found by a probe
behind a 5 ms spin) is timed without spins (CSV column ``host_blocking``): its event pairs then
include its own host-side work.  Two further numbers per point:
- ``loop_mean_s``: ``loop_reps`` launches back to back between two events (behind a spin), divided
  by the count: the throughput time of a stream of launches;
- ``host_mean_s`` / ``host_median_s``: ``host_reps`` launches each timed on the host from the call to
  the end of a device synchronisation: the latency an application sees when it needs the result.

The number of timed runs is ``reps`` (the paper's 10,000) unless that would take longer than
``max_seconds`` for the point; then it is ``max(min_reps, max_seconds / estimated time per run)``.
The count actually used is returned (CSV column ``reps``).

CPU (``time_cpu``): ``time.perf_counter`` around each call (the paper used gettimeofday), with the
same warm-up / reps / cap logic.
"""
from __future__ import annotations

import math
import time

import numpy as np


def _stats(times_s, prefix="") -> dict:
    t = np.asarray(times_s, dtype=np.float64)
    return {
        f"{prefix}mean_s": float(t.mean()),
        f"{prefix}median_s": float(np.median(t)),
        f"{prefix}min_s": float(t.min()),
        f"{prefix}max_s": float(t.max()),
        f"{prefix}std_s": float(t.std(ddof=1)) if t.size > 1 else 0.0,
    }


def capped_reps(reps: int, min_reps: int, max_seconds: float, per_run_s: float) -> int:
    if per_run_s <= 0 or not math.isfinite(per_run_s):
        return int(reps)
    return int(max(min(min_reps, reps), min(reps, math.floor(max_seconds / per_run_s))))


def time_cpu(fn, *, reps=10000, warmup=2, max_seconds=0.5, min_reps=3) -> dict:
    """Time ``fn()`` on the CPU: warm-up discarded, then per-call perf_counter times."""
    t_last = None
    for _ in range(max(1, warmup)):
        t0 = time.perf_counter()
        fn()
        t_last = time.perf_counter() - t0
    n = capped_reps(reps, min_reps, max_seconds, t_last)
    times = np.empty(n)
    for i in range(n):
        t0 = time.perf_counter()
        fn()
        times[i] = time.perf_counter() - t0
    out = {"reps": n, "warmup": int(max(1, warmup))}
    out.update(_stats(times))
    return out


class GpuTimer:
    """CUDA-event timing of a launch function (see the module docstring)."""

    def __init__(self, kernels, *, batch=200, loop_reps=1000, host_reps=200):
        self.k = kernels
        self.cp = kernels.cp
        self.batch = int(batch)
        self.loop_reps = int(loop_reps)
        self.host_reps = int(host_reps)
        cp = self.cp
        self.events = [(cp.cuda.Event(), cp.cuda.Event()) for _ in range(self.batch)]
        self.clock_hz = self._calibrate_spin()

    def _calibrate_spin(self) -> float:
        """SM clock in Hz as seen by the spin kernel (cycles per second of event time)."""
        cp = self.cp
        s, e = cp.cuda.Event(), cp.cuda.Event()
        cycles = 20_000_000
        self.k.spin(1000)
        s.record()
        self.k.spin(cycles)
        e.record()
        e.synchronize()
        dt = cp.cuda.get_elapsed_time(s, e) * 1e-3
        return cycles / dt if dt > 0 else 1.5e9

    def _spin_seconds(self, seconds: float) -> None:
        self.k.spin(int(seconds * self.clock_hz))

    def time(self, fn, *, reps=10000, warmup=20, max_seconds=1.5, min_reps=50) -> dict:
        cp = self.cp
        stream_sync = cp.cuda.get_current_stream().synchronize
        # warm-up (discarded); also the host enqueue cost of one launch
        for _ in range(max(1, warmup)):
            fn()
        stream_sync()
        n_probe = max(1, min(20, warmup))
        t0 = time.perf_counter()
        for _ in range(n_probe):
            fn()
        host_enqueue = (time.perf_counter() - t0) / n_probe
        stream_sync()
        # device time estimate of one launch
        s, e = self.events[0]
        s.record()
        fn()
        e.record()
        e.synchronize()
        dev_est = cp.cuda.get_elapsed_time(s, e) * 1e-3
        # does fn block the host until the GPU is idle (a synchronising library call)?  Then
        # no spin can cover its enqueue: time it without spins (column host_blocking)
        probe_s = 0.005
        self._spin_seconds(probe_s)
        t0 = time.perf_counter()
        fn()
        blocking = (time.perf_counter() - t0) > 0.5 * probe_s
        stream_sync()

        # per-run cost of the measurement: the spin covers the host enqueue of start event +
        # launch + stop event (~ host_enqueue + 4 us), then the GPU runs the kernels
        per_launch_host = host_enqueue + 4e-6
        per_run = (1.25 * per_launch_host + dev_est) if not blocking else (per_launch_host + dev_est)
        n = capped_reps(reps, min_reps, max_seconds, per_run)

        # per-launch event pairs, batched behind a spin kernel; a batch whose spin ran out before
        # it was fully enqueued (GPU idle in between: host time would leak into the events) is
        # discarded and redone with a longer spin, at most 3 times per point; the spin never
        # exceeds 10x its first estimate nor 0.1 s per batch, and a point stops after
        # 2 x max_seconds whatever its count (the count used is returned)
        times = np.empty(n)
        spin0 = 1.5 * per_launch_host
        spin_per_launch = spin0
        underruns = redone = 0
        done = 0
        mark = cp.cuda.Event(disable_timing=True)
        t_start = time.perf_counter()
        while done < n:
            b = min(self.batch, n - done)
            if not blocking:
                self._spin_seconds(min(spin_per_launch * b, 0.1))
            mark.record()
            t_enq = time.perf_counter()
            for j in range(b):
                s, e = self.events[j]
                s.record()
                fn()
                e.record()
            t_enq = (time.perf_counter() - t_enq) / b
            late = (not blocking) and bool(mark.done)
            self.events[b - 1][1].synchronize()
            if late:
                underruns += 1
                if redone < 3:
                    redone += 1
                    spin_per_launch = min(max(2.0 * spin_per_launch, 1.5 * t_enq), 10 * spin0)
                    continue
            elif not blocking:
                spin_per_launch = min(max(1.25 * t_enq, 0.5 * spin_per_launch), 10 * spin0)
            for j in range(b):
                s, e = self.events[j]
                times[done + j] = cp.cuda.get_elapsed_time(s, e) * 1e-3
            done += b
            if time.perf_counter() - t_start > 2 * max_seconds:
                break
        times = times[:done]
        out = {"reps": done, "warmup": int(max(1, warmup))}
        out.update(_stats(times))
        out["spin_underruns"] = underruns
        out["host_blocking"] = blocking
        out["host_enqueue_s"] = host_enqueue

        # back-to-back loop between two events
        nl = max(1, min(self.loop_reps, done))
        s, e = self.events[0]
        if not blocking:
            self._spin_seconds(min(1.5 * host_enqueue * nl + 1e-4, 0.2))
        mark.record()
        s.record()
        for _ in range(nl):
            fn()
        e.record()
        loop_underrun = (not blocking) and bool(mark.done)
        e.synchronize()
        out["loop_reps"] = nl
        out["loop_mean_s"] = cp.cuda.get_elapsed_time(s, e) * 1e-3 / nl
        out["loop_underrun"] = loop_underrun

        # host-visible latency: launch + synchronise
        nh = max(1, min(self.host_reps, done))
        ht = np.empty(nh)
        for i in range(nh):
            t0 = time.perf_counter()
            fn()
            stream_sync()
            ht[i] = time.perf_counter() - t0
        out["host_reps"] = nh
        out["host_mean_s"] = float(ht.mean())
        out["host_median_s"] = float(np.median(ht))
        return out
