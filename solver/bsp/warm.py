"""Start-up (issue #12, docs/performance-startup.md round 4): the array expressions of the start-up, run
once on small arrays of the run's dimensions in background threads while INITCOND starts.

On CuPy every distinct elementwise expression is a kernel that CuPy compiles with NVRTC the first time
it is met on a machine (~0.09 s each on the H200's host, 16 of them one after another in INITCOND,
THERMEQUIL, BTE_init and DENS: ~1.5 s of a fresh machine's start-up) and loads from its disk cache on
later runs.  CuPy keys its kernels by the operation, the dtypes and the number of dimensions left after
merging contiguous axes, not by the sizes, and keeps the loaded kernels for the whole process (for all
threads).  So running the same functions on arrays of the same dimensions and layout, but a length of 2
on the large axes, in parallel threads (NVRTC releases the GIL) compiles or loads the same kernels
beforehand; the start-up then finds them.  The values are thrown away: nothing of the run changes.

``jobs(model, backend)`` lists the callables; ``solver.bsp.kernels.precompile`` runs them beside the CUDA
modules' compiles (_build.precompile), and every CUDA graph capture waits for them first (_build.wait_jobs:
no warm-up thread launches while a graph is captured).  The start-up goes on meanwhile: an expression
it meets before its job has finished is compiled or loaded by the start-up itself, as before.  A gpu test
checks that after the jobs the start-up compiles or loads no CuPy kernel of its own
(tests/test_bsp_kernels_cuda_precompile.py); a CPU test runs every job on NumPy.
"""
from __future__ import annotations

from solver.bsp import bte, dens, poisson


def _small(n: int) -> int:
    """A large axis's length in the warm-up: 2 (CuPy drops axes of length 1, which would change the
    kernel), or the axis's own length when it is 1."""
    return min(n, 2)


def jobs(model, backend) -> list:
    """The warm-up callables of the start-up's array expressions (module docstring), in the order the
    start-up meets them; each runs on ``backend.xp``."""
    xp = backend.xp
    NX, NZ, NS, NW, NPHI = model.NX, model.NZ, model.N_sbn, model.NW, model.NPHI

    def initcond():  # the start potential (poisson.initcond)
        xp.ones((NX, NZ))

    def rho():  # INITCOND's densities and THERMEQUIL's (poisson._startup_loop's rho_fn)
        eps = xp.zeros((NX, 3, NS))
        poisson.fermi_dirac_rho(model, xp, eps)
        poisson.boltzmann_rho(model, xp, eps, 1.0)

    def drho():  # the Frechet kernel's -d rho / d eps (drho_fn)
        poisson.fermi_dirac_drho(model, xp, xp.zeros((NX, 3, NS)))

    def density():  # N(x, z) from the eigenpairs
        poisson.density(xp, xp.zeros((NX, 3, NS)), xp.zeros((NX, 3, NS, NZ)))

    def replay():  # the Newton solve's result (newton.BatchedGraph._replay)
        xp.zeros((NX, NZ)).ravel().copy()

    def bte_init():  # the start distribution and its moments (Simulation.startup, dens.dens)
        Phi = bte.initial_phi(model, backend, xp.zeros((_small(NX), 3, NS)),
                          xp.zeros((3, _small(NW))), xp.zeros((3, _small(NW))), _small(NPHI))
        dens.dens(model, backend, Phi)

    return [initcond, rho, drho, density, replay, bte_init]

