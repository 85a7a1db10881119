"""Shared by the eigen kernel tests (test_bsp_kernels_cuda_eigen*.py): dense reference levels and
the start-up potential of a model."""
import numpy as np

from solver.backend import get_backend
from solver.bsp import poisson, schrodinger

NP = get_backend("numpy")


def eigvalsh_levels(m, V):
    """numpy.linalg.eigvalsh of every T_{nu,i}: (eps (NX, 3, N_sbn), ||T||_inf per (i, nu))."""
    NX = V.shape[0]
    eps = np.empty((NX, 3, m.N_sbn))
    tn = np.empty((NX, 3))
    for nu in range(3):
        d, e = schrodinger.schrodinger_matrix(m, V, nu)
        for i in range(NX):
            T = np.diag(d[i]) + np.diag(e[i], 1) + np.diag(e[i], -1)
            eps[i, nu] = np.linalg.eigvalsh(T)[:m.N_sbn]
            tn[i, nu] = np.abs(T).sum(axis=1).max()
    return eps, tn


def ic_V(m):
    """INITCOND's potential of model m (NumPy), C-contiguous."""
    return np.ascontiguousarray(poisson.initcond(m, NP).V)
