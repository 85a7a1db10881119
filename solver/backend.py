"""Array backends chosen by name: ``numpy`` (reference, test oracle), ``numba`` (multi-threaded
CPU fast paths, array code still NumPy) and ``cupy`` (GPU).

Array code is written once against ``backend.xp``.  Modules with hand-written fast paths (numba
``njit`` or CuPy Raw/Elementwise/Reduction kernels) dispatch on ``backend.name`` and keep the
array version as the reference the tests compare against.  CuPy and numba are imported lazily.
"""
from __future__ import annotations

import os
import platform
import threading
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

BACKENDS = ("numpy", "numba", "cupy")


class BackendUnavailable(RuntimeError):
    """The requested backend cannot be used on this machine (package or device missing)."""


@dataclass
class Backend:
    name: str
    xp: Any
    threads: int = 1
    _extra: dict = field(default_factory=dict, repr=False)

    @property
    def is_gpu(self) -> bool:
        return self.name == "cupy"

    # -- arrays -----------------------------------------------------------------
    def asarray(self, a, dtype=None):
        return self.xp.asarray(a, dtype=dtype)

    def to_numpy(self, a):
        if self.is_gpu and not isinstance(a, np.ndarray):
            return self.xp.asnumpy(a)
        return np.asarray(a)

    def scalar(self, a) -> float:
        return float(self.to_numpy(a))

    def to_host_async(self, a) -> "HostCopy":
        """Start copying the small array ``a`` to the host without waiting; ``.result()`` returns it as
        NumPy.  On the GPU: an asynchronous copy into pinned memory on the current stream and an event
        (the host goes on launching work while the GPU gets there); elsewhere the array itself."""
        return HostCopy(self, a)

    def synchronize(self) -> None:
        if self.is_gpu:
            self.xp.cuda.get_current_stream().synchronize()

    # -- description -------------------------------------------------------------
    def device_info(self) -> dict:
        info = {"backend": self.name, "threads": self.threads}
        if self.is_gpu:
            cp = self.xp
            dev = cp.cuda.Device()
            props = cp.cuda.runtime.getDeviceProperties(dev.id)
            name = props["name"]
            info.update(
                device=name.decode() if isinstance(name, bytes) else str(name),
                device_id=dev.id,
                compute_capability=dev.compute_capability,
                multiprocessors=props.get("multiProcessorCount"),
                global_memory_bytes=props.get("totalGlobalMem"),
                l2_cache_bytes=props.get("l2CacheSize"),
                memory_clock_khz=props.get("memoryClockRate"),
                memory_bus_width_bits=props.get("memoryBusWidth"),
                driver_version=cp.cuda.runtime.driverGetVersion(),
                runtime_version=cp.cuda.runtime.runtimeGetVersion(),
                cupy_version=cp.__version__,
                pci_bus_id=_pci_bus_id(cp, dev.id),  # which physical GPU (CUDA_VISIBLE_DEVICES renumbers them)
            )
        else:
            info["device"] = cpu_model()
        return info


class HostCopy:
    """A small device array on its way to the host (Backend.to_host_async)."""

    def __init__(self, backend: Backend, a):
        if not backend.is_gpu or isinstance(a, np.ndarray):
            self._host, self._event = np.array(a), None
            return
        cp = backend.xp
        a = cp.ascontiguousarray(a)
        self._keep = a  # the source stays alive until the copy is done
        # pinned buffers and events from the backend's pool (a cudaHostAlloc per call costs the host
        # tens of us; a stage asks once): taken here, given back by result() once the copy is done
        self._pool = pool = backend._extra.setdefault("host_copy_pool", {})
        self._nbytes = nbytes = max(a.nbytes, 1)
        free = pool.get(nbytes)
        self._mem, self._event = free.pop() if free else (cp.cuda.alloc_pinned_memory(nbytes), cp.cuda.Event())
        self._host = np.frombuffer(self._mem, a.dtype, a.size).reshape(a.shape)
        stream = cp.cuda.get_current_stream()
        cp.cuda.runtime.memcpyAsync(self._host.ctypes.data, a.data.ptr, a.nbytes,
                                    cp.cuda.runtime.memcpyDeviceToHost, stream.ptr)
        self._event.record(stream)

    def result(self) -> np.ndarray:
        if self._event is None:
            return self._host.copy()
        if self._keep is not None:  # the first call: wait, keep the values, give the buffer back
            self._event.synchronize()
            host = self._host.copy()
            self._pool.setdefault(self._nbytes, []).append((self._mem, self._event))
            self._host, self._keep = host, None
        return self._host.copy()


def _pci_bus_id(cp, device_id):
    """The device's PCI bus id ('0000:1B:00.0'), None where the runtime cannot tell."""
    try:
        bus = cp.cuda.runtime.deviceGetPCIBusId(device_id)
        return bus.decode() if isinstance(bus, bytes) else str(bus)
    except Exception:
        return None


@lru_cache(maxsize=None)
def cpu_model() -> str:
    """The CPU's model name (/proc/cpuinfo), else what platform reports."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def gpu_available() -> bool:
    """True when CuPy imports and sees at least one CUDA device."""
    try:
        import cupy  # noqa: F401

        return cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:
        return False


def numba_available() -> bool:
    try:
        import numba  # noqa: F401

        return True
    except Exception:
        return False


def available_backends() -> list[str]:
    names = ["numpy"]
    if numba_available():
        names.append("numba")
    if gpu_available():
        names.append("cupy")
    return names


def default_backend_name() -> str:
    """``cupy`` when a GPU is present, else ``numpy`` (what the README's main command uses)."""
    _wait_prewarm()
    return "cupy" if gpu_available() else "numpy"


_prewarm: threading.Thread | None = None


def _create_cuda_context() -> None:
    """cuInit and the primary context of device 0 (the current device of every thread until one
    is chosen) through the driver API by ctypes, which releases the GIL during each call: the
    0.2-0.3 s they take then run beside the Python of the start-up (imports, configuration,
    model).  CuPy's runtime later finds this primary context active and binds it (the runtime
    uses the primary context; the one reference taken here is kept for the process's life).
    Any failure (no driver, no device) leaves everything to get_backend, which reports it."""
    try:
        import ctypes

        cuda = ctypes.CDLL("libcuda.so.1")
        if cuda.cuInit(0) != 0:
            return
        dev, ctx = ctypes.c_int(), ctypes.c_void_p()
        if cuda.cuDeviceGet(ctypes.byref(dev), 0) != 0:
            return
        cuda.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev)
    except Exception:  # noqa: BLE001 - an optional head start only
        pass


def prewarm(name: str | None) -> None:
    """Start-up (docs/performance-startup.md, round 2): for the backends 'cupy' and 'auto', start
    creating the CUDA context in a background thread now, as soon as a command knows its
    backend; get_backend waits for it.  Nothing for the other backends or without CuPy installed
    (nothing imported, no thread).  Once per process."""
    global _prewarm
    if name not in ("cupy", "auto") or _prewarm is not None:
        return
    import importlib.util

    if importlib.util.find_spec("cupy") is None:  # no CuPy: 'auto' runs numpy, 'cupy' fails; no context
        return
    # not a daemon: a command that stops early (a bad value) waits for it at exit instead of
    # finalizing the interpreter under a thread inside the driver
    _prewarm = threading.Thread(target=_create_cuda_context, name="cuda-context", daemon=False)
    _prewarm.start()


def _wait_prewarm() -> None:
    if _prewarm is not None:
        _prewarm.join()  # releases the GIL while the driver works


def get_backend(name: str = "numpy", threads: int | None = None) -> Backend:
    """Return the backend called ``name`` ('numpy', 'numba', 'cupy' or 'auto')."""
    if name == "auto":
        name = default_backend_name()
    if name not in BACKENDS:
        raise ValueError(f"unknown backend {name!r}; allowed: {', '.join(BACKENDS)} or 'auto'")
    if name == "numpy":
        return Backend("numpy", np, threads=1)
    if name == "numba":
        try:
            import numba
        except ImportError as exc:  # pragma: no cover - depends on the machine
            raise BackendUnavailable("backend 'numba' needs the numba package (pip install numba)") from exc
        n = threads or int(os.environ.get("NUMBA_NUM_THREADS", 0)) or os.cpu_count() or 1
        n = min(n, numba.config.NUMBA_NUM_THREADS)
        numba.set_num_threads(n)
        return Backend("numba", np, threads=n)
    try:
        import cupy
    except ImportError as exc:
        raise BackendUnavailable("backend 'cupy' needs CuPy (pip install cupy-cuda12x or cupy-cuda13x)") from exc
    _wait_prewarm()
    if not gpu_available():
        raise BackendUnavailable("backend 'cupy': CuPy is installed but no CUDA device is visible")
    return Backend("cupy", cupy, threads=1)


def array_module(a):
    """NumPy or CuPy, whichever owns ``a`` (SigPy's get_array_module)."""
    if type(a).__module__.startswith("cupy"):
        import cupy

        return cupy
    return np
