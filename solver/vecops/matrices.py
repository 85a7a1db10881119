"""Synthetic square CSR matrices with a fixed number of nonzeros per row, generated from a seed.

Columns of each row are distinct and sorted: ``sort(U{0..ncols-k}^k) + arange(k)`` (sorted draws
with replacement shifted by their rank are strictly increasing and stay below ``ncols``).  Values
are uniform in [0.5, 1.5) so row sums are well conditioned and relative errors are meaningful.
Indices are int32 as in the paper's OpenCL kernels (``__global int *JA, *IA``).
"""
from __future__ import annotations

import zlib
from dataclasses import dataclass

import numpy as np


@dataclass
class CSR:
    name: str
    rows: int
    cols: int
    nnz_per_row: int
    data: np.ndarray     # AA
    indices: np.ndarray  # JA (int32, 0-based)
    indptr: np.ndarray   # IA (int32, rows + 1)

    @property
    def nnz(self) -> int:
        return int(self.indptr[-1])

    def to_scipy(self):
        import scipy.sparse as sp

        return sp.csr_matrix((self.data, self.indices, self.indptr), shape=(self.rows, self.cols))

    def bytes_moved(self) -> int:
        """Compulsory traffic of r = A v: AA and JA once, IA once, v once, r once."""
        s = self.data.itemsize
        return self.nnz * (s + 4) + (self.rows + 1) * 4 + self.cols * s + self.rows * s

    def flops(self) -> int:
        return 2 * self.nnz


def name_seed(seed: int, name: str) -> int:
    return (int(seed) * 1_000_003 + zlib.crc32(name.encode())) % (2**63)


def fixed_row_csr(rows: int, nnz_per_row: int, seed: int, dtype="float32", name: str = "A",
                  chunk_rows: int = 2048) -> CSR:
    """Square ``rows x rows`` CSR matrix with exactly ``nnz_per_row`` distinct columns per row."""
    rows, k = int(rows), int(nnz_per_row)
    if k < 1 or k > rows:
        raise ValueError(f"nnz_per_row must be in 1..rows ({rows}), got {k}")
    rng = np.random.default_rng(name_seed(seed, name))
    indices = np.empty(rows * k, dtype=np.int32)
    ramp = np.arange(k, dtype=np.int64)
    for r0 in range(0, rows, chunk_rows):  # chunks keep the int64 temporaries small
        r1 = min(rows, r0 + chunk_rows)
        draw = rng.integers(0, rows - k + 1, size=(r1 - r0, k), dtype=np.int64)
        draw.sort(axis=1)
        indices[r0 * k:r1 * k] = (draw + ramp).ravel()
    data = rng.uniform(0.5, 1.5, size=rows * k).astype(dtype)
    indptr = (np.arange(rows + 1, dtype=np.int64) * k).astype(np.int32)
    return CSR(name, rows, rows, k, data, indices, indptr)


def table2(cfg: dict, dtype="float32") -> list[tuple[str, int, int]]:
    """[(name, rows, nnz_per_row)] of Table 2 from the config, in name order."""
    return [(n, int(v[0]), int(v[1])) for n, v in sorted(cfg["spmv_scalar"]["matrices"].items())]


def random_vectors(n: int, seed: int, dtype="float32", count: int = 2, name: str = "v"):
    """``count`` vectors uniform in [0, 1) (positive, so dot products are well conditioned)."""
    rng = np.random.default_rng(name_seed(seed, f"{name}:{n}"))
    dt = np.dtype(dtype)
    return [rng.random(n, dtype=dt) if dt in (np.float32, np.float64) else rng.random(n).astype(dt)
            for _ in range(count)]
