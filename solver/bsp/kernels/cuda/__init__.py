"""CUDA fast paths of the cupy backend: the ``.cu`` sources beside the Python that launches them
(compiled, cached and launched by ``_build``), and the dispatch table ``TABLE`` (phase -> function)
of solver.bsp.kernels.  Importing this package needs CuPy (ModuleNotFoundError otherwise: the
phases stay on the array reference).

    weno.py        + weno.cu               WENO_x, WENO_w, WENO_phi (variant numerics.bte_kernels)
    rk.py          + rk.cu                 RK (the stage update fused with the loss product, the
                                           sum of the terms and DENS; numerics.bte_kernels: fast);
                                           RK_wphi (the same with the WENO w and phi terms, kernel
                                           bsp_wphi_rk of weno.cu); bsp_scal (alpha and dt on the
                                           device: numerics.bte_speculate)
    scattering.py  + scattering.cu         scat_gain, scat_loss, overlap (W by bsp_overlap; numerics.bte_kernels: fast)
    bte_graph.py                           numerics.bte_graph: the whole stage (WENO_x, gain, loss, RK_wphi)
                                           replayed from a CUDA graph (bte.advance; not a TABLE entry)
    eigen.py       + eigen.cu, eigen_nr.cu eigen (kernels eigenvalues / eigenvalues_nr, variant numerics.eigen;
                     eigen_tw.cu           ipim, variant numerics.ipim; eigenvalues_tw + ipim_t: numerics.eigen =
                                           twisted, the default)
    frechet.py     + frechet.cu            Frechet
    newton.py      + newton.cu,            construct_linsys, linsys_rhs, solve_linsys (variant numerics.linsys),
                     cyclic_reduction.cu   newton_rhs, newton_norms, deps_dx,
                                           newton_norms_tail, iter_start
                     batched_inverse.cu    (batched_cr: numerics.linsys_graph, numerics.batched_blocks)
    iter_graph.py  + iter_graph.cu         newton_iteration (numerics.iter_graph): POTENTIAL's kept-Jacobian
                                           Newton iteration replayed from a CUDA graph (density by iter_density);
                                           iter_prologue (numerics.iter_overlap): its start's eigenpairs on a
                                           second stream during the BTE
    dens.py        + dens.cu               density_probe (the stage's density check numbers, one launch),
                                           scalars_probe (a scalars row's numbers, one launch)
    _cublas.py     (cuBLAS via ctypes)     batched LU solve and GEMM inside newton.BatchedGraph's capture
    dense.py       (cuSOLVER)              the dense Newton system (numerics.linsys: dense, the baseline)
    (solver/bsp/blocktri_batched.py: the batched block solve of numerics.linsys: batched_cr, array code)
"""
from __future__ import annotations

import cupy  # noqa: F401  (no CuPy: no fast paths)

from solver.bsp.kernels.cuda import dens, eigen, frechet, iter_graph, newton, rk, scattering, weno

def startup_modules(model) -> list:
    """(source, options, defines) of the modules of the start-up's fast paths (INITCOND and
    THERMEQUIL: eigen, Frechet, the Newton system and its norms) for this model, which
    Simulation.startup compiles in parallel background threads (_build.precompile; a fresh
    machine's start-up, docs/performance-startup.md round 3)."""
    return eigen.modules(model) + [(frechet.SOURCE, frechet.OPTIONS, None)] + newton.modules(model)


TABLE = {
    "WENO_x": weno.weno_x,
    "WENO_w": weno.weno_w,
    "WENO_phi": weno.weno_phi,
    "scat_gain": scattering.scat_gain,
    "scat_loss": scattering.scat_loss,
    "RK": rk.rk_update,
    "RK_wphi": rk.stage_update,
    "overlap": scattering.overlap,
    "eigen": eigen.eigen,
    "Frechet": frechet.frechet,
    "construct_linsys": newton.construct_linsys,
    "solve_linsys": newton.solve_linsys,
    "newton_rhs": newton.newton_rhs,
    "newton_norms": newton.newton_norms,
    "deps_dx": newton.deps_dx_max,
    "newton_norms_tail": newton.newton_norms_tail,
    "iter_start": newton.iter_start,
    "linsys_rhs": newton.linsys_rhs,
    "newton_iteration": iter_graph.newton_iteration,
    "density_probe": dens.density_probe,
    "scalars_probe": dens.scalars_probe,
    "iter_prologue": iter_graph.iter_prologue,
}
