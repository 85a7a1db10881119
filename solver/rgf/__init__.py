"""Recursive Green's function quantum transport in a [100] Si nanowire (paper 002, Jeong & Ryu 2021).

- :mod:`solver.rgf.tb`       sp3d5s* two-centre integrals (bond-frame blocks rotated), bulk H(k), gaps
- :mod:`solver.rgf.wire`     [100] wire geometry, layer blocks, sp3-hybrid passivation, wire bands
- :mod:`solver.rgf.leads`    Sancho-Rubio surface Green's functions (interior lead layers eliminated)
- :mod:`solver.rgf.rgf`      the paper's four-step RGF: T(E), LDOS; pluggable block algebra
- :mod:`solver.rgf.kernels`  optimization cases 1-5 (numba AoS / SoA / tiled / scheduled; CuPy)
- :mod:`solver.rgf.sched`    thread-utilization efficiency of the j-loop scheduling (Table 1)
"""
