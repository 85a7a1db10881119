"""Table 1 (device specifications queried from the hardware) and the measured ceilings.

Table 1 rows follow the paper's (cores, core clock, memory, bandwidth, TDP, maximum work-group
size, double support, L2 cache, cache line, device type) plus the theoretical FP32/FP64 peaks.
Sources: CUDA device attributes through CuPy, ``nvidia-smi`` where present, ``/proc`` and
``/sys`` on the CPU.  The ``source`` column says where each value came from; a value that cannot
be queried is left empty rather than guessed.

Ceilings (``ceilings.<kind>.csv``), measured with the same timing harness as the figures:
- GPU: device-to-device ``cudaMemcpyAsync`` and a one-element-per-thread copy kernel on
  ``copy_n`` elements (bandwidth = 2 x bytes / median time); the FMA-throughput kernel (8
  independent chains per thread) in the configured precision;
- CPU: NumPy ``copyto`` (one thread) and the numba parallel copy on ``cpu_copy_n`` elements.
"""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pandas as pd

# FP32 / FP64 lanes per SM by compute capability (CUDA C Programming Guide, arithmetic throughput)
FP32_PER_SM = {(6, 0): 64, (7, 0): 64, (7, 5): 64, (8, 0): 64, (8, 6): 128, (8, 7): 128, (8, 9): 128,
               (9, 0): 128, (10, 0): 128, (10, 3): 128, (12, 0): 128}
FP64_PER_SM = {(6, 0): 32, (7, 0): 32, (7, 5): 2, (8, 0): 32, (8, 6): 2, (8, 7): 2, (8, 9): 2,
               (9, 0): 64, (10, 0): 64, (10, 3): 64, (12, 0): 2}

# cudaDeviceAttr numbers (stable across CUDA 11-13)
ATTR = {"max_threads_per_block": 1, "clock_khz": 13, "sm_count": 16, "mem_clock_khz": 36, "bus_width": 37,
        "l2_bytes": 38, "cc_major": 75, "cc_minor": 76}


def _nvidia_smi() -> dict:
    exe = shutil.which("nvidia-smi")
    if not exe:
        return {}
    q = "name,power.limit,clocks.max.sm,clocks.max.memory,memory.total"
    try:
        out = subprocess.run([exe, f"--query-gpu={q}", "--format=csv,noheader,nounits", "-i", "0"],
                             capture_output=True, text=True, timeout=20).stdout.strip().splitlines()
    except Exception:
        return {}
    if not out:
        return {}
    vals = [v.strip() for v in out[0].split(",")]
    keys = q.split(",")
    return dict(zip(keys, vals))


def _num(v):
    try:
        return float(v)
    except (TypeError, ValueError):
        return None


def gpu_specs() -> list[dict]:
    import cupy as cp

    rt = cp.cuda.runtime
    dev = cp.cuda.Device().id
    props = rt.getDeviceProperties(dev)
    name = props["name"]
    name = name.decode() if isinstance(name, bytes) else str(name)

    def attr(key):
        try:
            return rt.deviceGetAttribute(ATTR[key], dev)
        except Exception:
            return None

    smi = _nvidia_smi()
    cc = (attr("cc_major"), attr("cc_minor"))
    sms = attr("sm_count") or props.get("multiProcessorCount")
    f32 = FP32_PER_SM.get(cc)
    f64 = FP64_PER_SM.get(cc)
    clock_mhz = _num(smi.get("clocks.max.sm")) or ((attr("clock_khz") or 0) / 1e3 or None)
    mem_mhz = _num(smi.get("clocks.max.memory")) or ((attr("mem_clock_khz") or 0) / 1e3 or None)
    bus = attr("bus_width") or props.get("memoryBusWidth")
    rows = []

    def add(item, value, unit="", source="CUDA attribute"):
        rows.append({"device_kind": "gpu", "device": name, "item": item, "value": value, "unit": unit, "source": source})

    add("Compute capability", f"{cc[0]}.{cc[1]}")
    add("Multiprocessors (compute units)", sms)
    add("FP32 cores", sms * f32 if (sms and f32) else None, "", "SMs x FP32 lanes per SM of the compute capability")
    add("Core clock (max)", round(clock_mhz / 1e3, 3) if clock_mhz else None, "GHz",
        "nvidia-smi clocks.max.sm" if smi.get("clocks.max.sm") else "CUDA attribute clockRate")
    add("Total memory", round(props.get("totalGlobalMem", 0) / 2**30, 1), "GiB", "cudaDeviceProp totalGlobalMem")
    bw = 2 * mem_mhz * 1e6 * bus / 8 / 1e9 if (mem_mhz and bus) else None
    add("Memory max bandwidth (theoretical)", round(bw, 1) if bw else None, "GB/s",
        "2 x memory clock x bus width / 8 (nvidia-smi / CUDA attributes)")
    add("TDP (power limit)", _num(smi.get("power.limit")), "W", "nvidia-smi power.limit" if smi else "not queryable")
    add("Maximum work-group size", attr("max_threads_per_block") or props.get("maxThreadsPerBlock"))
    add("Double arithmetic support", "yes")
    l2 = attr("l2_bytes") or props.get("l2CacheSize")
    add("Cache L2", round(l2 / 2**20, 1) if l2 else None, "MiB")
    add("Cache line size", 128, "B", "architectural (L1/L2 line of NVIDIA GPUs; not a device attribute)")
    add("Device type", "GPU", "", "")
    if sms and f32 and clock_mhz:
        add("Peak FP32 (theoretical)", round(2 * sms * f32 * clock_mhz / 1e3, 1), "GFLOP/s", "2 x FP32 cores x max clock")
    if sms and f64 and clock_mhz:
        add("Peak FP64 (theoretical, non-tensor)", round(2 * sms * f64 * clock_mhz / 1e3, 1), "GFLOP/s",
            "2 x FP64 lanes x max clock")
    try:
        add("Driver / runtime", f"{rt.driverGetVersion()} / {rt.runtimeGetVersion()}", "", "cudaDriverGetVersion / cudaRuntimeGetVersion")
    except Exception:
        pass
    return rows


def _read(path):
    try:
        return Path(path).read_text().strip()
    except OSError:
        return None


def _size_bytes(text):
    if not text:
        return None
    t = text.upper()
    mult = 1
    if t.endswith("K"):
        mult, t = 1024, t[:-1]
    elif t.endswith("M"):
        mult, t = 1024**2, t[:-1]
    try:
        return int(t) * mult
    except ValueError:
        return None


def cpu_specs(threads: int | None = None) -> list[dict]:
    from solver.backend import cpu_model

    name = cpu_model()
    rows = []

    def add(item, value, unit="", source="/proc, /sys"):
        rows.append({"device_kind": "cpu", "device": name, "item": item, "value": value, "unit": unit, "source": source})

    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:
        usable = os.cpu_count()
    add("Cores (logical CPUs usable)", usable, "", "sched_getaffinity")
    add("Threads of the numba column", threads, "", "numba.get_num_threads()")
    mhz = _read("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq")
    src = "cpufreq cpuinfo_max_freq"
    ghz = int(mhz) / 1e6 if mhz else None
    if ghz is None:
        src = "/proc/cpuinfo cpu MHz (current)"
        for line in (_read("/proc/cpuinfo") or "").splitlines():
            if line.lower().startswith("cpu mhz"):
                ghz = float(line.split(":")[1]) / 1e3
                break
    add("Core clock", round(ghz, 3) if ghz else None, "GHz", src)
    mem = None
    for line in (_read("/proc/meminfo") or "").splitlines():
        if line.startswith("MemTotal:"):
            mem = int(line.split()[1]) * 1024
    add("Total memory", round(mem / 2**30, 1) if mem else None, "GiB", "/proc/meminfo")
    add("Memory max bandwidth (theoretical)", None, "GB/s", "not queryable; see the measured copy bandwidth")
    add("TDP", None, "W", "not queryable")
    add("Maximum work-group size", None, "", "n/a (numba prange)")
    add("Double arithmetic support", "yes", "", "")
    base = Path("/sys/devices/system/cpu/cpu0/cache")
    line_size = None
    for idx in sorted(base.glob("index*")) if base.is_dir() else []:
        level = _read(idx / "level")
        typ = _read(idx / "type")
        size = _size_bytes(_read(idx / "size"))
        if level in ("2", "3") and typ in ("Unified", "Data") and size:
            add(f"Cache L{level} (per cpu0 instance)", round(size / 2**20, 2), "MiB", f"{idx}/size")
        line_size = line_size or _read(idx / "coherency_line_size")
    add("Cache line size", int(line_size) if line_size else None, "B", "coherency_line_size")
    add("Device type", "CPU", "", "")
    return rows


def table1(gpu: bool, threads: int | None = None) -> pd.DataFrame:
    rows = []
    if gpu:
        rows += gpu_specs()
    rows += cpu_specs(threads)
    return pd.DataFrame(rows, columns=["device_kind", "device", "item", "value", "unit", "source"])


# ---------------------------------------------------------------------------------------- ceilings


def gpu_ceilings(cfg: dict) -> pd.DataFrame:
    from solver.vecops.sweeps import GpuContext

    g = GpuContext(cfg)
    cp, k, dt = g.cp, g.k, g.dtype
    n = cfg["ceilings"]["copy_n"]
    x = cp.random.random(n, dtype=dt)
    r = cp.empty_like(x)
    nbytes = 2 * x.nbytes
    rows = []
    t = g.time(lambda: k.copy(x, r))
    ok = bool(cp.array_equal(x, r))
    rows.append(dict(quantity="copy_kernel_bandwidth", value=nbytes / t["median_s"] / 1e9, unit="GB/s", n=n, **t, check=ok))
    t = g.time(lambda: r.data.copy_from_device_async(x.data, x.nbytes))
    rows.append(dict(quantity="memcpy_d2d_bandwidth", value=nbytes / t["median_s"] / 1e9, unit="GB/s", n=n, **t, check=True))
    del x, r
    cp.get_default_memory_pool().free_all_blocks()
    sms = cp.cuda.runtime.getDeviceProperties(cp.cuda.Device().id)["multiProcessorCount"]
    grid, block, iters = sms * 32, 256, cfg["ceilings"]["fma_iters"]
    out = cp.zeros(grid * block, dtype=dt)
    flops = 16 * iters * grid * block
    t = g.time(lambda: k.fma(out, iters, grid, block))
    rows.append(dict(quantity=f"fma_peak_{cfg['precision']}", value=flops / t["median_s"] / 1e9, unit="GFLOP/s",
                     n=grid * block, **t, check=True))
    df = pd.DataFrame(rows)
    df.insert(0, "device", g.ctx["device"])
    df.insert(0, "device_kind", "gpu")
    best = df[df.quantity.str.endswith("bandwidth")].value.max()
    extra = pd.DataFrame([dict(device_kind="gpu", device=g.ctx["device"], quantity="copy_bandwidth", value=best,
                               unit="GB/s", n=n, check=True)])
    return pd.concat([df, extra], ignore_index=True)


def cpu_ceilings(cfg: dict) -> pd.DataFrame:
    from solver.vecops.sweeps import CpuContext

    cx = CpuContext(cfg)
    n = cfg["ceilings"]["cpu_copy_n"]
    x = np.random.default_rng(cfg["seed"]).random(n).astype(cx.dtype)
    r = np.empty_like(x)
    nbytes = 2 * x.nbytes
    rows = []
    t = cx.time(lambda: np.copyto(r, x))
    rows.append(dict(quantity="numpy_copy_bandwidth", value=nbytes / t["median_s"] / 1e9, unit="GB/s", n=n, **t,
                     threads=1, check=bool(np.array_equal(x, r))))
    r[:] = 0
    t = cx.time(lambda: cx.nb["copy"](x, r))
    rows.append(dict(quantity="numba_copy_bandwidth", value=nbytes / t["median_s"] / 1e9, unit="GB/s", n=n, **t,
                     threads=cx.threads, check=bool(np.array_equal(x, r))))
    df = pd.DataFrame(rows)
    df.insert(0, "device", cx.ctx_numba["device"])
    df.insert(0, "device_kind", "cpu")
    best = df.value.max()
    extra = pd.DataFrame([dict(device_kind="cpu", device=cx.ctx_numba["device"], quantity="copy_bandwidth",
                               value=best, unit="GB/s", n=n, threads=cx.threads, check=True)])
    return pd.concat([df, extra], ignore_index=True)
