"""Paper 003 (Coronado-Barrientos, Indalecio & Garcia-Loureiro): AXPY, DOT and CSR SpMV kernels.

Modules
- ``config``: the ``vecops:`` section, validated against ``workflow/schemas/vecops.schema.yaml``.
- ``matrices``: deterministic synthetic CSR matrices (Table 2, Fig 13, crossover sweep).
- ``cpu``: NumPy/SciPy reference (the test oracle and the "CPU routine" column) and numba
  all-core kernels (the many-core stand-in for the Xeon Phi).
- ``kernels``: the paper's five kernels (axpy, dot0, dot1 + red, spmv0, spmv1) as CuPy RawModule
  CUDA templates, plus copy / FMA / spin helper kernels.  CuPy is imported lazily.
- ``bench``: timing harness (CUDA events behind a spin kernel on the GPU, perf_counter on the CPU).
- ``sweeps``: one function per figure, returning a tidy DataFrame.
- ``hardware``: Table 1 (queried from the hardware) and the measured ceilings.
- ``plots``: Figs 9-14, the roofline and Table 1 as markdown.
"""
