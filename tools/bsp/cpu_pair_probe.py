"""Are the host's CPUs hardware threads of fewer cores?  (issue #14: the numba BTE's 16-thread efficiency;
docs/performance-numba-iter.md §10.)  Independent processes, no shared data, no barriers inside the timed
part: each runs the same compute-bound loop (16 independent multiply-add chains on registers, no memory
traffic) pinned to one CPU.

    python tools/bsp/cpu_pair_probe.py [--seconds 0.2] [--cpus 0-15] [--max 16]     (~8 s on 16 CPUs)

Prints, per trial, each process's rate relative to CPU 0 running alone: CPU 0 alone; CPU 0 with CPU k
(every other k): a pair of hardware threads of one core shares its floating-point units (each ~0.5-0.65),
two cores do not (each ~1.0); all CPUs at once (the all-core clock and any sharing together); then the
largest-to-smallest summary.  On a KVM guest the guest's lscpu shows "1 thread per core" whatever the
host does, so this measures it instead."""
from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import time

import numba


@numba.njit(cache=False)
def spin(n):
    a = [1.0 + 1e-9 * k for k in range(16)]
    a0, a1, a2, a3, a4, a5, a6, a7 = a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7]
    b0, b1, b2, b3, b4, b5, b6, b7 = a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15]
    c = 0.9999999
    d = 1e-7
    for _ in range(n):
        a0 = a0 * c + d
        a1 = a1 * c + d
        a2 = a2 * c + d
        a3 = a3 * c + d
        a4 = a4 * c + d
        a5 = a5 * c + d
        a6 = a6 * c + d
        a7 = a7 * c + d
        b0 = b0 * c + d
        b1 = b1 * c + d
        b2 = b2 * c + d
        b3 = b3 * c + d
        b4 = b4 * c + d
        b5 = b5 * c + d
        b6 = b6 * c + d
        b7 = b7 * c + d
    return a0 + a1 + a2 + a3 + a4 + a5 + a6 + a7 + b0 + b1 + b2 + b3 + b4 + b5 + b6 + b7


def _child(cpu, n, barrier, q):
    os.sched_setaffinity(0, {cpu})
    spin(1000)
    barrier.wait()
    t = time.perf_counter()
    spin(n)
    q.put((cpu, time.perf_counter() - t))


def trial(cpus, n):
    ctx = mp.get_context("fork")  # the compiled spin is inherited
    barrier = ctx.Barrier(len(cpus))
    q = ctx.Queue()
    ps = [ctx.Process(target=_child, args=(c, n, barrier, q)) for c in cpus]
    for p in ps:
        p.start()
    out = dict(q.get() for _ in cpus)
    for p in ps:
        p.join()
    return out


def _cpus(spec, avail):
    if spec is None:
        return sorted(avail)
    out = []
    for part in spec.split(","):
        lo, _, hi = part.partition("-")
        out += list(range(int(lo), int(hi or lo) + 1))
    return [c for c in out if c in avail]


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--seconds", type=float, default=0.2)
    p.add_argument("--cpus", default=None, help="e.g. 0-15 (default: this process's affinity)")
    p.add_argument("--max", type=int, default=0, help="at most the first MAX of those CPUs (0: all)")
    a = p.parse_args(argv)
    cpus = _cpus(a.cpus, os.sched_getaffinity(0)) or sorted(os.sched_getaffinity(0))
    if a.max:
        cpus = cpus[:a.max]
    spin(1000)
    n = 1_000_000
    while True:  # calibrate on CPU 0 alone (the fastest of three: a descheduled trial is slower)
        t = min(trial([cpus[0]], n)[cpus[0]] for _ in range(3))
        if t > 0.05:
            break
        n *= 4
    n = int(n * a.seconds / t)
    base = min(trial([cpus[0]], n)[cpus[0]] for _ in range(3))
    rate = 16.0 * n / base / 1e9
    print(f"cpus {len(cpus)} ({cpus[0]}..{cpus[-1]}); CPU {cpus[0]} alone: {base:.3f} s, {rate:.2f} G multiply-adds/s "
          f"(two flops each, not fused)")
    print("trial,cpu,relative_rate")
    pair = {}
    for k in cpus[1:]:  # the better of two trials (a trial another process interrupted is slower)
        rs = [trial([cpus[0], k], n) for _ in range(2)]
        r = min(rs, key=lambda x: max(x.values()))
        pair[k] = (base / r[cpus[0]], base / r[k])
        print(f"pair 0+{k},{cpus[0]},{pair[k][0]:.3f}")
        print(f"pair 0+{k},{k},{pair[k][1]:.3f}")
    allr = min((trial(cpus, n) for _ in range(2)), key=lambda x: max(x.values()))
    rel = {c: base / t for c, t in allr.items()}
    for c in cpus:
        print(f"all {len(cpus)},{c},{rel[c]:.3f}")
    low = [k for k, v in pair.items() if min(v) < 0.8]
    print(f"summary: pairs with CPU {cpus[0]} slowed below 0.8: {low or 'none'} (min {min(min(v) for v in pair.values()):.3f}, "
          f"max {max(max(v) for v in pair.values()):.3f}); all {len(cpus)} at once: median "
          f"{sorted(rel.values())[len(rel) // 2]:.3f}, min {min(rel.values()):.3f}, max {max(rel.values()):.3f}; "
          f"throughput {sum(rel.values()):.2f}x of one CPU")


if __name__ == "__main__":
    main()
