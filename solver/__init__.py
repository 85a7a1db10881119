"""solver: a compact GPU solver package for the BSP DG-MOSFET model and related HPC studies.

Shared infrastructure lives at the top level (backend selection, phase timers, provenance,
HDF5/CSV/JSON I/O, configuration); each study is a subpackage:

- ``solver.bsp``       Boltzmann-Schroedinger-Poisson DG-MOSFET solver (papers 000, 001)
- ``solver.rgf``       recursive Green's function quantum transport (paper 002)
- ``solver.vecops``    AXPY / DOT / SpMV kernels (paper 003)
- ``solver.collision`` deterministic Boltzmann collision integral (paper 004)

CuPy is imported lazily: the package imports and tests without it.
"""

__version__ = "0.1.0"
