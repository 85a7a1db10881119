"""Schroedinger eigenproblems in z at every x_i, per valley (physics.md §4, §8; phase ``eigen``).

For each column i and valley pair nu the interior nodes j = 1..NZ-2 carry the symmetric
tridiagonal matrix of physics.md §8

    diag_j = (c_s1/2) dz^-2 (1/(2 m_{j-1}) + 1/m_j + 1/(2 m_{j+1})) - V_j - V_c,j
    off_j  = -(c_s1/2) dz^-2 (1/(2 m_j) + 1/(2 m_{j+1}))          (between j and j+1)

whose N_sbn lowest eigenpairs are the subband levels eps_{nu,p}(x_i) and wave functions
chi_{nu,p}(x_i, z).  The reference CPU method (paper 000) is LAPACK's tridiagonal bisection plus
inverse iteration (``dstebz`` + ``dstein``, called directly: what ``scipy.linalg.eigh_tridiagonal`` does with
``select='i'``, without its per-call overhead); it runs on the host for every backend, the results go back to the backend.

Array shapes (memory order of paper 000, Table 1): V (NX, NZ); eps (NX, 3, N_sbn);
chi (NX, 3, N_sbn, NZ) with chi = 0 at j = 0 and NZ-1, dz sum chi^2 = 1 and a deterministic
sign (the first component with |chi| > 1e-3 max|chi| is positive), so every backend agrees.
"""
from __future__ import annotations

import functools
import importlib.machinery
import importlib.util
import os
import sys

import numpy as np

from solver.backend import array_module
from solver.bsp import constants as K
from solver.bsp import kernels as _kernels

SIGN_THRESHOLD = 1e-3  # relative size of the component that fixes the eigenvector's sign


def _kinetic(model, nu: int):
    """(kinetic part of the diagonal (NZ-2,), off-diagonal (NZ-3,)) of valley nu, host arrays."""
    inv_m = 1.0 / model.m_z[nu]  # (NZ,)
    c = 0.5 * model.cs1 / model.dz**2
    kd = c * (0.5 * inv_m[:-2] + inv_m[1:-1] + 0.5 * inv_m[2:])
    ko = -c * (0.5 * inv_m[1:-2] + 0.5 * inv_m[2:-1])
    return kd, ko


def schrodinger_matrix(model, V, nu: int):
    """Tridiagonal Schroedinger matrix of valley ``nu`` at every column: (diag (NX, NZ-2), off (NX, NZ-3)).

    ``V`` (NX, NZ) may be a NumPy or CuPy array; the result lives with ``V``.
    """
    xp = array_module(V)
    kd, ko = _kinetic(model, nu)
    kd, ko, Vc = xp.asarray(kd), xp.asarray(ko), xp.asarray(model.V_c[1:-1])
    diag = kd[None, :] - V[:, 1:-1] - Vc[None, :]
    off = xp.broadcast_to(ko, (V.shape[0], ko.shape[0])).copy()
    return diag, off


def fix_sign(vecs: np.ndarray, axis: int = -1) -> np.ndarray:
    """Flip eigenvectors (along ``axis``) so that the first component with |v| > 1e-3 max|v| is > 0."""
    v = np.moveaxis(vecs, axis, -1)
    a = np.abs(v)
    first = np.argmax(a > SIGN_THRESHOLD * a.max(axis=-1, keepdims=True), axis=-1)
    s = np.sign(np.take_along_axis(v, first[..., None], axis=-1))
    s[s == 0] = 1.0
    return np.moveaxis(v * s, -1, axis)


@functools.cache
def lapack() -> tuple:
    """(dstebz, dstein): SciPy's LAPACK wrappers, the functions ``scipy.linalg.lapack`` exports, loaded
    at the first call.  Start-up (docs/performance-startup.md, round 2): importing
    ``scipy.linalg`` costs 0.2 s (VM) to 0.3 s (H200), nearly all of it outside LAPACK: its
    ``scipy._lib._array_api`` runs ``hasattr`` over every name of NumPy, which imports numpy.f2py,
    numpy.testing and charset_normalizer.  So the Fortran wrapper module ``scipy.linalg._flapack``
    (an extension module that needs NumPy only) is loaded by its file, without the package
    ``scipy.linalg``, and removed from sys.modules again so that a later ``import scipy.linalg``
    proceeds as usual (it receives the same function objects: test).  Where that fails (another
    SciPy layout), the plain import."""
    name = "scipy.linalg._flapack"
    try:
        if name in sys.modules:  # scipy.linalg is (being) imported anyway
            raise ImportError
        spec = importlib.util.find_spec("scipy")  # a top-level spec: scipy itself is not imported
        folder = os.path.join(os.path.dirname(spec.origin), "linalg")
        path = next(p for p in (os.path.join(folder, "_flapack" + s) for s in importlib.machinery.EXTENSION_SUFFIXES)
                    if os.path.isfile(p))
        loader = importlib.machinery.ExtensionFileLoader(name, path)
        mod = importlib.util.module_from_spec(importlib.util.spec_from_file_location(name, path, loader=loader))
        loader.exec_module(mod)  # nothing for single-phase init; runs a multi-phase one
        sys.modules.pop(name, None)  # an extension of single-phase init enters itself there
        return mod.dstebz, mod.dstein
    except Exception:  # noqa: BLE001 - any other layout: the documented import
        from scipy.linalg.lapack import dstebz, dstein

        return dstebz, dstein


def eigen_host(model, V: np.ndarray, n: int | None = None):
    """LAPACK tridiagonal eigenpairs on the host: (eps (NX, 3, n), chi (NX, 3, n, NZ)), NumPy arrays."""
    _stebz, _stein = lapack()
    V = np.asarray(V, dtype=float)
    n = model.N_sbn if n is None else n
    NX, NZ = V.shape
    dz = model.dz
    eps = np.empty((NX, K.N_VALLEYS, n))
    chi = np.zeros((NX, K.N_VALLEYS, n, NZ))
    scale = 1.0 / np.sqrt(dz)
    for nu in range(K.N_VALLEYS):
        kd, ko = _kinetic(model, nu)
        diag = kd[None, :] - V[:, 1:-1] - model.V_c[None, 1:-1]
        for i in range(NX):
            # stebz: bisection for the n lowest (il..iu, 1-based), tol 0 = LAPACK's default;
            # stein: inverse iteration for their eigenvectors (what eigh_tridiagonal(select='i') does)
            m, w, iblock, isplit, info = _stebz(diag[i], ko, 2, 0.0, 0.0, 1, n, 0.0, b"E")
            if info != 0 or m != n:
                raise np.linalg.LinAlgError(f"LAPACK dstebz failed at i = {i}, nu = {nu} (info {info}, {m} of {n} eigenvalues)")
            v, info = _stein(diag[i], ko, w[:n], iblock, isplit)
            if info != 0:
                raise np.linalg.LinAlgError(f"LAPACK dstein failed at i = {i}, nu = {nu} (info {info})")
            eps[i, nu] = w[:n]
            chi[i, nu, :, 1:-1] = v.T * scale
    chi = fix_sign(chi, axis=-1)
    return eps, chi


def eigen(model, backend, V, levels=None):
    """The N_sbn lowest eigenpairs for every (i, nu): (eps (NX, 3, N_sbn), chi (NX, 3, N_sbn, NZ)).

    The reference CPU method (LAPACK stebz/stein) on the host; results as backend arrays.
    A backend's fast path (``kernels.lookup(..., "eigen")``) replaces it where one exists.
    ``levels`` (NX, 3, N_sbn): eigenvalues of a nearby potential (the previous Newton iterate's),
    the warm start of an iterative fast path (numerics.eigen = newton); the reference does not
    use it.
    """
    fast = _kernels.lookup(model, backend, "eigen")
    if fast is not None:
        return fast(model, backend, V, levels)
    eps, chi = eigen_host(model, backend.to_numpy(V))
    return backend.asarray(eps), backend.asarray(chi)


def sturm_count(diag, off, xi):
    """Number of eigenvalues below ``xi`` of the symmetric tridiagonal matrix (diag, off).

    Sturm sequence (LDL^T pivots) q_1 = d_1 - xi, q_k = d_k - xi - e_{k-1}^2 / q_{k-1}; the count
    is the number of negative pivots.  ``diag`` (..., n), ``off`` (..., n-1) and ``xi`` broadcast
    over leading dimensions (for Fig. 4 of paper 001: sigma(xi) over a bracket); returns ints.
    """
    xp = array_module(diag)
    diag = xp.asarray(diag)
    off = xp.asarray(off)
    xi = xp.asarray(xi, dtype=diag.dtype)
    n = diag.shape[-1]
    # pivmin as in LAPACK dstebz: guards against a zero pivot
    pivmin = np.finfo(float).tiny * max(1.0, float(xp.max(off**2)) if off.size else 1.0)
    e2 = off**2
    q = diag[..., 0] - xi
    q = xp.where(xp.abs(q) < pivmin, -pivmin, q)
    count = (q < 0).astype(np.int64)
    for k in range(1, n):
        q = diag[..., k] - xi - e2[..., k - 1] / q
        q = xp.where(xp.abs(q) < pivmin, -pivmin, q)
        count = count + (q < 0)
    return count


def deps_dx(model, eps):
    """d eps/dx on the dimensionless x mesh (NX, 3, N_sbn): central inside, one-sided first order at the ends."""
    xp = array_module(eps)
    dx = model.dx
    d = xp.empty_like(eps)
    d[1:-1] = (eps[2:] - eps[:-2]) / (2.0 * dx)
    d[0] = (eps[1] - eps[0]) / dx
    d[-1] = (eps[-1] - eps[-2]) / dx
    return d


def deps_dx_max(model, backend, eps, V):
    """The tail of an RK stage's ITER (phase ``deps_dx``): (d eps/dx as deps_dx, its largest
    magnitude A_eps (the CFL's and the flux splitting's host scalar), whether V is finite), with
    one host read.  A backend's fast path (``kernels.lookup(..., "deps_dx")``) forms all three in
    one launch."""
    fast = _kernels.lookup(model, backend, "deps_dx")
    if fast is not None:
        return fast(model, backend, eps, V)
    xp = backend.xp
    d = deps_dx(model, eps)
    vals = backend.to_numpy(xp.stack([xp.abs(d).max(), xp.isfinite(xp.sum(V))]))
    return d, float(vals[0]), bool(vals[1])
