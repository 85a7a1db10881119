"""One function per figure: run the paper's sweep on one device kind and return a tidy DataFrame.

Every row is one (implementation, size, block) point with the timing statistics of
``solver.vecops.bench``, the compulsory bytes and flops of the operation, the effective bandwidth
and flop rate from the *median* time, and the relative error of the result against a float64
NumPy answer of the same inputs (``rel_err``; max-norm, see ``cpu.rel_err``).

Figures (keys used by the CLI, the CSV names and the rules):
- ``fig09``     AXPY time vs vector size (GPU kernel, cuBLAS, copy kernel, memcpy; NumPy, numba)
- ``fig10_11``  DOT time vs work-group size at 2^20 (dot0, dot1, cuBLAS; NumPy, numba at that size)
- ``fig12``     DOT time vs vector size (dot0 and dot1 at one work-group size, cuBLAS; NumPy, numba)
- ``fig13``     SpMV vector kernel vs work-group size, 2^14 rows x 128 (spmv0; spmv1, cuSPARSE; SciPy, numba)
- ``fig14``     SpMV scalar kernel on Table 2's M001..M006 (spmv1; spmv0, cuSPARSE; SciPy, numba)
- ``crossover`` scalar vs vector kernel at fixed nonzeros over the row length (GPU only)
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from solver.vecops import cpu as C
from solver.vecops import backend_table
from solver.vecops.matrices import fixed_row_csr, random_vectors, table2

FIGURES = ("fig09", "fig10_11", "fig12", "fig13", "fig14", "crossover")
GPU_ONLY = ("crossover",)
CSV_NAMES = {
    "fig09": "fig09_axpy",
    "fig10_11": "fig10_11_dot_blocks",
    "fig12": "fig12_dot_sizes",
    "fig13": "fig13_spmv_vector",
    "fig14": "fig14_spmv_scalar",
    "crossover": "crossover_spmv",
}

COLUMNS = ["figure", "device_kind", "device", "impl", "precision", "n", "block", "matrix", "rows",
           "nnz_per_row", "nnz", "bytes", "flops", "reps", "warmup", "mean_s", "median_s", "min_s",
           "max_s", "std_s", "loop_reps", "loop_mean_s", "host_reps", "host_mean_s", "host_median_s",
           "spin_underruns", "host_blocking", "gbytes_s", "gflops", "rel_err", "threads"]


def vec_bytes(kind: str, n: int, itemsize: int) -> int:
    return {"axpy": 3, "dot": 2, "copy": 2}[kind] * int(n) * itemsize


def _row(fig, ctx, impl, t: dict, *, n=None, block=None, matrix=None, A=None, nbytes=0, flops=0, err=np.nan):
    r = {c: np.nan for c in COLUMNS}
    r.update(figure=fig, device_kind=ctx["kind"], device=ctx["device"], impl=impl, precision=ctx["precision"],
             threads=ctx.get("threads", np.nan))
    if n is not None:
        r["n"] = int(n)
    if block is not None:
        r["block"] = int(block)
    if A is not None:
        r.update(matrix=matrix or A.name, rows=A.rows, nnz_per_row=A.nnz_per_row, nnz=A.nnz, n=A.rows)
    r.update({k: v for k, v in t.items() if k in COLUMNS})
    r["bytes"], r["flops"] = int(nbytes), int(flops)
    med = t["median_s"]
    r["gbytes_s"] = nbytes / med / 1e9 if med > 0 else np.nan
    r["gflops"] = flops / med / 1e9 if med > 0 else np.nan
    r["rel_err"] = float(err)
    return r


def _frame(rows) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=COLUMNS)


# ================================================================================ CPU columns


def set_threading_layer(layer: str) -> None:
    """Choose numba's threading layer before its first parallel launch ('default' leaves numba's choice)."""
    if layer == "default":
        return
    import numba

    numba.config.THREADING_LAYER = layer


class CpuContext:
    def __init__(self, cfg):
        from solver.backend import cpu_model, get_backend

        self.cfg = cfg
        self.dtype = np.dtype(cfg["precision"])
        set_threading_layer(cfg["cpu_threading_layer"])
        self.backend = get_backend("numba", threads=cfg["cpu_threads"] or None)
        self.threads = self.backend.threads
        self.nb = backend_table("numba")
        model = cpu_model()
        self.ctx_numpy = {"kind": "cpu", "device": model, "precision": cfg["precision"], "threads": 1}
        self.ctx_numba = {"kind": "cpu", "device": model, "precision": cfg["precision"], "threads": self.threads}
        tm = cfg["timing"]
        self.tkw = dict(reps=tm["cpu_reps"], warmup=2, max_seconds=tm["cpu_max_seconds"], min_reps=tm["cpu_min_reps"])

    def time(self, fn):
        from solver.vecops.bench import time_cpu

        return time_cpu(fn, **self.tkw)


def cpu_sweep(fig: str, cfg: dict) -> pd.DataFrame:
    if fig in GPU_ONLY:
        raise ValueError(f"figure {fig!r} has no CPU column")
    cx = CpuContext(cfg)
    dt, seed, rows = cx.dtype, cfg["seed"], []
    s = dt.itemsize
    if fig == "fig09":
        a = cfg["axpy"]["alpha"]
        for n in cfg["axpy"]["sizes"]:
            x, y = random_vectors(n, seed, dt)
            r = np.empty_like(x)
            exact = C.axpy_exact(a, x, y)
            t = cx.time(lambda: C.axpy_ref(a, x, y, r))
            rows.append(_row(fig, cx.ctx_numpy, "numpy", t, n=n, nbytes=vec_bytes("axpy", n, s), flops=2 * n,
                             err=C.rel_err(r, exact)))
            r[:] = 0
            t = cx.time(lambda: cx.nb["axpy"](a, x, y, r))
            rows.append(_row(fig, cx.ctx_numba, "numba", t, n=n, nbytes=vec_bytes("axpy", n, s), flops=2 * n,
                             err=C.rel_err(r, exact)))
    elif fig in ("fig10_11", "fig12"):
        sizes = [cfg["dot"]["n_blocks_sweep"]] if fig == "fig10_11" else cfg["dot"]["sizes"]
        for n in sizes:
            x, y = random_vectors(n, seed, dt)
            exact = C.dot_exact(x, y)
            out = {}
            t = cx.time(lambda: out.__setitem__("v", C.dot_ref(x, y)))
            rows.append(_row(fig, cx.ctx_numpy, "numpy", t, n=n, nbytes=vec_bytes("dot", n, s), flops=2 * n,
                             err=C.rel_err(out["v"], exact)))
            t = cx.time(lambda: out.__setitem__("v", cx.nb["dot"](x, y)))
            rows.append(_row(fig, cx.ctx_numba, "numba", t, n=n, nbytes=vec_bytes("dot", n, s), flops=2 * n,
                             err=C.rel_err(out["v"], exact)))
    elif fig in ("fig13", "fig14"):
        if fig == "fig13":
            sv = cfg["spmv_vector"]
            mats = [("fig13", sv["rows"], sv["nnz_per_row"])]
        else:
            mats = table2(cfg)
        for name, nr, k in mats:
            A = fixed_row_csr(nr, k, seed, dt, name=name)
            (v,) = random_vectors(A.cols, seed, dt, count=1, name=f"x-{name}")
            exact = C.spmv_exact(A, v)
            r = np.empty(A.rows, dtype=dt)
            t = cx.time(lambda: C.spmv_ref(A, v, r))
            rows.append(_row(fig, cx.ctx_numpy, "scipy", t, A=A, matrix=name, nbytes=A.bytes_moved(),
                             flops=A.flops(), err=C.rel_err(r, exact)))
            r[:] = 0
            t = cx.time(lambda: cx.nb["spmv"](A, v, r))
            rows.append(_row(fig, cx.ctx_numba, "numba", t, A=A, matrix=name, nbytes=A.bytes_moved(),
                             flops=A.flops(), err=C.rel_err(r, exact)))
    else:
        raise ValueError(f"unknown figure {fig!r}; allowed: {', '.join(FIGURES)}")
    return _frame(rows)


# ================================================================================ GPU columns


class GpuContext:
    def __init__(self, cfg):
        from solver.backend import get_backend
        from solver.vecops.bench import GpuTimer

        self.cfg = cfg
        self.backend = get_backend("cupy")
        self.cp = self.backend.xp
        self.dtype = np.dtype(cfg["precision"])
        self.cuda = backend_table("cupy")
        self.k = self.cuda["kernels"](self.dtype)
        tm = cfg["timing"]
        self.timer = GpuTimer(self.k, batch=tm["batch"], loop_reps=tm["loop_reps"], host_reps=tm["host_reps"])
        self.tkw = dict(reps=tm["reps"], warmup=tm["warmup"], max_seconds=tm["max_seconds"], min_reps=tm["min_reps"])
        info = self.backend.device_info()
        self.ctx = {"kind": "gpu", "device": info.get("device", "gpu"), "precision": cfg["precision"], "threads": np.nan}

    def time(self, fn):
        return self.timer.time(fn, **self.tkw)

    def to_host(self, a):
        return self.cp.asnumpy(a)


def gpu_sweep(fig: str, cfg: dict) -> pd.DataFrame:
    g = GpuContext(cfg)
    cp, k, dt, seed, rows = g.cp, g.k, g.dtype, cfg["seed"], []
    s = dt.itemsize
    if fig == "fig09":
        a = cfg["axpy"]["alpha"]
        block = cfg["axpy"]["block"]
        for n in cfg["axpy"]["sizes"]:
            x, y = random_vectors(n, seed, dt)
            exact = C.axpy_exact(a, x, y)
            dx, dy = cp.asarray(x), cp.asarray(y)
            dr = cp.zeros_like(dx)
            k.axpy(a, dx, dy, dr, block)
            err = C.rel_err(g.to_host(dr), exact)
            t = g.time(lambda: k.axpy(a, dx, dy, dr, block))
            rows.append(_row(fig, g.ctx, "axpy", t, n=n, block=block, nbytes=vec_bytes("axpy", n, s), flops=2 * n, err=err))
            yc = dy.copy()
            k.cublas_axpy(a, dx, yc)
            err = C.rel_err(g.to_host(yc), exact)
            t = g.time(lambda: k.cublas_axpy(a, dx, yc))
            rows.append(_row(fig, g.ctx, "cublas_axpy", t, n=n, nbytes=vec_bytes("axpy", n, s), flops=2 * n, err=err))
            dr[...] = 0
            k.copy(dx, dr, block)
            err = C.rel_err(g.to_host(dr), x)
            t = g.time(lambda: k.copy(dx, dr, block))
            rows.append(_row(fig, g.ctx, "copy", t, n=n, block=block, nbytes=vec_bytes("copy", n, s), err=err))
            nb = dx.nbytes
            t = g.time(lambda: dr.data.copy_from_device_async(dx.data, nb))
            rows.append(_row(fig, g.ctx, "memcpy", t, n=n, nbytes=vec_bytes("copy", n, s)))
            del dx, dy, dr, yc
            cp.get_default_memory_pool().free_all_blocks()
    elif fig in ("fig10_11", "fig12"):
        if fig == "fig10_11":
            sizes, blocks = [cfg["dot"]["n_blocks_sweep"]], cfg["dot"]["block_sizes"]
        else:
            sizes, blocks = cfg["dot"]["sizes"], [cfg["dot"]["block"]]
        for n in sizes:
            x, y = random_vectors(n, seed, dt)
            exact = C.dot_exact(x, y)
            dx, dy = cp.asarray(x), cp.asarray(y)
            vrp = cp.empty(max(k.dot0_partials(n, min(blocks)), k.dot1_partials(n, min(blocks))), dtype=dt)
            out = cp.zeros((), dtype=dt)
            for bs in blocks:
                for name, f in (("dot0", k.dot0), ("dot1", k.dot1)):
                    out[...] = 0
                    f(dx, dy, bs, vrp, out)
                    err = C.rel_err(float(out), exact)
                    t = g.time(lambda: f(dx, dy, bs, vrp, out))
                    rows.append(_row(fig, g.ctx, name, t, n=n, block=bs, nbytes=vec_bytes("dot", n, s), flops=2 * n, err=err))
            out[...] = 0
            k.cublas_dot(dx, dy, out)
            err = C.rel_err(float(out), exact)
            t = g.time(lambda: k.cublas_dot(dx, dy, out))
            rows.append(_row(fig, g.ctx, "cublas_dot", t, n=n, nbytes=vec_bytes("dot", n, s), flops=2 * n, err=err))
            del dx, dy, vrp
            cp.get_default_memory_pool().free_all_blocks()
    elif fig in ("fig13", "fig14", "crossover"):
        device_csr, cusparse_matrix = g.cuda["device_csr"], g.cuda["cusparse_matrix"]
        sc = cfg["spmv_scalar"]
        if fig == "fig13":
            sv = cfg["spmv_vector"]
            mats = [("fig13", sv["rows"], sv["nnz_per_row"])]
            vec_blocks = sv["block_sizes"]
        elif fig == "fig14":
            mats = table2(cfg)
            vec_blocks = [sc["vector_block"]]
        else:
            co = cfg["crossover"]
            mats = [(f"k{kk}", co["nnz"] // kk, kk) for kk in co["nnz_per_row"] if co["nnz"] // kk >= kk]
            vec_blocks = [sc["vector_block"]]
        for name, nr, kk in mats:
            A = fixed_row_csr(nr, kk, seed, dt, name=name)
            (v,) = random_vectors(A.cols, seed, dt, count=1, name=f"x-{name}")
            exact = C.spmv_exact(A, v)
            arrs = device_csr(A, cp, dt)
            dv = cp.asarray(v)
            dr = cp.zeros(A.rows, dtype=dt)
            common = dict(A=A, matrix=name, nbytes=A.bytes_moved(), flops=A.flops())
            for bs in vec_blocks:
                dr[...] = 0
                k.spmv0(*arrs, dv, dr, A.rows, bs)
                err = C.rel_err(g.to_host(dr), exact)
                t = g.time(lambda: k.spmv0(*arrs, dv, dr, A.rows, bs))
                rows.append(_row(fig, g.ctx, "spmv0", t, block=bs, err=err, **common))
            dr[...] = 0
            k.spmv1(*arrs, dv, dr, A.rows, sc["block"])
            err = C.rel_err(g.to_host(dr), exact)
            t = g.time(lambda: k.spmv1(*arrs, dv, dr, A.rows, sc["block"]))
            rows.append(_row(fig, g.ctx, "spmv1", t, block=sc["block"], err=err, **common))
            M = cusparse_matrix(A, arrs)
            err = C.rel_err(g.to_host(M @ dv), exact)
            t = g.time(lambda: M @ dv)
            rows.append(_row(fig, g.ctx, "cusparse", t, err=err, **common))
            del arrs, dv, dr, M
            cp.get_default_memory_pool().free_all_blocks()
    else:
        raise ValueError(f"unknown figure {fig!r}; allowed: {', '.join(FIGURES)}")
    return _frame(rows)
