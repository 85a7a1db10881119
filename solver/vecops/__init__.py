"""Paper 003 (Coronado-Barrientos, Indalecio & Garcia-Loureiro): AXPY, DOT and CSR SpMV kernels.

Modules
- ``config``: the ``vecops:`` section, validated against ``workflow/schemas/vecops.schema.yaml``.
- ``matrices``: deterministic synthetic CSR matrices (Table 2, Fig 13, crossover sweep).
- ``cpu``: NumPy/SciPy reference (the test oracle and the "CPU routine" column).
- ``numba_cpu``: numba all-core kernels (the many-core stand-in for the Xeon Phi).
- ``kernels``: the paper's five kernels (axpy, dot0, dot1 + red, spmv0, spmv1) as CuPy RawModule
  CUDA templates (``kernels.cu``), plus copy / FMA / spin helper kernels.
- ``bench``: timing harness (CUDA events behind a spin kernel on the GPU, perf_counter on the CPU).
- ``sweeps``: one function per figure, returning a tidy DataFrame.
- ``hardware``: Table 1 (queried from the hardware) and the measured ceilings.
- ``plots``: Figs 9-14, the roofline and Table 1 as markdown.
"""
from solver.dispatch import Registry


def _numba():
    from solver.vecops.numba_cpu import TABLE

    return TABLE


def _cupy():
    from solver.vecops.kernels import TABLE

    return TABLE


# the fast paths of each backend (solver.dispatch): "numba" axpy/dot/spmv/copy, "cupy" the
# kernels class and the device CSR helpers; CuPy and numba are imported on the first lookup
REGISTRY = Registry("vecops", {"numba": _numba, "cupy": _cupy})


def backend_table(backend: str) -> dict:
    """The table of a backend; BackendUnavailable when its package is missing."""
    from solver.backend import BackendUnavailable

    table = REGISTRY.table(backend)
    if not table:
        raise BackendUnavailable(f"vecops: backend {backend!r} needs its package (numba or CuPy)")
    return table
