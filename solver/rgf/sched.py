"""Thread-utilization efficiency of the paper's j-loop scheduling (Section 2.2.3, Table 1).

A product of n x n blocks tiled by ``tile`` has R = n / tile block rows.  Without scheduling all
``threads`` threads share the R rows of one product at a time: efficiency R / (T ceil(R / T)).
With scheduling the j-loop of ``nj`` independent products is split into powers of two,
nj = sum 2^p (binary digits, parts of at most T iterations); a part of 2^p iterations runs its
products side by side with NthrA = 2^p threads on the j-loop and NthrB = T / 2^p threads on each
product's rows, efficiency R / (NthrB ceil(R / NthrB)).  The efficiency of the j-loop is the
iteration-weighted mean over its parts (the paper's Table 1).
"""
from __future__ import annotations

import math


def row_efficiency(rows: int, threads: int) -> float:
    return rows / (threads * math.ceil(rows / threads))


def parts(nj: int, threads: int) -> list[int]:
    """Power-of-two decomposition of the j-loop, largest part first (parts capped at ``threads``)."""
    out = []
    full, rest = divmod(nj, threads)
    out += [threads] * full
    p = 1 << max(rest.bit_length() - 1, 0)
    while rest:
        if rest >= p:
            out.append(p)
            rest -= p
        p >>= 1
    return out


def efficiency(nj: int, rows: int = 80, threads: int = 32, scheduled: bool = True) -> float:
    if not scheduled:
        return row_efficiency(rows, threads)
    tot = 0.0
    for part in parts(nj, threads):
        tot += part * row_efficiency(rows, threads // part)
    return tot / nj


def table1(max_nj: int = 7, rows: int = 80, threads: int = 32) -> list[dict]:
    out = []
    for nj in range(1, max_nj + 1):
        ps = parts(nj, threads)
        terms = " + ".join(f"{p}x({rows}/({threads // p}x{math.ceil(rows / (threads // p))}))" for p in ps)
        out.append({"j_loop_iterations": nj, "parts": "+".join(map(str, ps)), "formula": f"({terms})/{nj}",
                    "efficiency_scheduled": efficiency(nj, rows, threads),
                    "efficiency_unscheduled": efficiency(nj, rows, threads, scheduled=False)})
    return out


def average(max_nj: int, rows: int = 80, threads: int = 32, scheduled: bool = True) -> float:
    """Mean over the i-loop of a triangle whose j-loops have 1..max_nj iterations."""
    return sum(efficiency(n, rows, threads, scheduled) for n in range(1, max_nj + 1)) / max_nj
