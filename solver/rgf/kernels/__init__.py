"""Block algebra of the paper's optimization cases (Table 3 of paper 002), as ``Ops`` for
:func:`solver.rgf.rgf.rgf_blocks`, one dispatch table per backend (solver.dispatch).

- case 1 ``aos``:    complex128 (array of structures), parallel row loop, i-k-j order (numba prange)
- case 2 ``soa``:    real and imaginary parts in separate arrays (structure of arrays), same loops
- case 3 ``tiled``:  SoA with 32 x 32 tiles, parallel over tile rows
- case 4 ``sched``:  tiled, and the j-loop of step 3 split into powers of two whose products run
                     side by side (threads on (product, tile row) pairs, the paper's NthrA x NthrB)
- case 5 ``gpu-tiled`` / ``gpu-cublas``: step 3 on the GPU (CuPy): the paper's 32 x 32
                     shared-memory tiled SoA kernel (``zgemm_soa_tiled.cu``) or cuBLAS ZGEMM; steps
                     1, 2, 4 stay on the host with case 4's algebra, as in the paper.

Tables: "numba" (``numba_cpu``: aos, soa, tiled, sched) and "cupy" (``cuda``: gpu-tiled,
gpu-cublas); each entry makes the case's ``Ops`` (its ``name`` is the table key).  The reference
is ``solver.rgf.rgf.ComplexOps`` / ``BatchedOps`` (BLAS block algebra of any array module).
Inverses use LAPACK in every case (the paper's cases differ in the products).
"""
from solver.backend import BackendUnavailable
from solver.dispatch import Registry

GPU_KERNELS = ("tiled", "cublas")
CASES = {1: ("numba", "aos"), 2: ("numba", "soa"), 3: ("numba", "tiled"), 4: ("numba", "sched"),
         5: ("cupy", "gpu-{kernel}")}


def _numba():
    from solver.rgf.kernels.numba_cpu import TABLE

    return TABLE


def _cupy():
    from solver.rgf.kernels.cuda import TABLE

    return TABLE


REGISTRY = Registry("rgf", {"numba": _numba, "cupy": _cupy})


def case_ops(case: int, gpu_kernel: str = "cublas"):
    """The ``Ops`` of optimization case ``case`` (1..5); ``gpu_kernel`` ('tiled' or 'cublas') for case 5."""
    if case not in CASES:
        raise ValueError(f"optimization case must be one of {sorted(CASES)}, got {case}")
    if gpu_kernel not in GPU_KERNELS:
        raise ValueError(f"gpu_kernel must be one of {GPU_KERNELS}, got {gpu_kernel!r}")
    backend, name = CASES[case]
    name = name.format(kernel=gpu_kernel)
    make = REGISTRY.lookup(backend, name)
    if make is None:
        need = "numba" if backend == "numba" else "CuPy (and numba)"
        raise BackendUnavailable(f"rgf case {case} ({name}) needs {need}")
    return make()
