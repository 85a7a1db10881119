"""The Schroedinger-Poisson block (phase ITER): Newton-Raphson with the Frechet derivative
(physics.md §7-§8; papers 000 §2.5 and 001 §2) for the three problems

- INITCOND: homogeneous Neumann at x = 0, 1; 2-D Fermi-Dirac densities; start V = 1; tol 1e-12.
- THERMEQUIL: Dirichlet V_b(z) at x = 0, 1; Boltzmann densities with one constant A; start V_b.
- POTENTIAL: Dirichlet V_b at x = 0, V_b + V_DS at x = 1; densities rho from the BTE held fixed;
  start: the previous V, or the caller's prediction (numerics.iter_start); tol 1e-6; Gummel fallback.

Every Newton iteration solves, at the interior nodes (1 <= i <= NX-2, 1 <= j <= NZ-2),

    -eta^2 d_x(eps_r d_x V_new) - d_z(eps_r d_z V_new) + c_p dz sum_j' F_i(j, j') V_new(i, j')
        = -c_p (N_old - N_D) + c_p dz sum_j' F_i(j, j') V_old(i, j')

(5-point stencil, eps_r at half nodes = arithmetic mean; F = dN/dV per column from first-order
perturbation of the eigenpairs), with unit-diagonal boundary rows: Dirichlet (gates, contact
columns) or first-order Neumann (boundary value = neighbour).  Every row is divided by its
diagonal (row equilibration) and the system is solved with a sparse LU (SuperLU, on the host for
every backend; natural ordering: with k = i NZ + j the matrix is block tridiagonal with dense
NZ-blocks, i.e. banded, and the natural order keeps the band).  Then the eigenpairs and N are recomputed at the new iterate.

Convergence: the L-inf and L2 (sqrt(dx dz sum over all nodes)) norms of the changes of V and N,
all four below the tolerance (POTENTIAL with numerics.iter_stop = estimate: or the error left in the iterate,
estimated from the ratio of consecutive changes, below half of it; converged_by_estimate).  Stagnation guard: when for 3 consecutive iterations none of the four
norms reached a new minimum and all four are below 1e-10, the iteration stops and the result says
so (``stagnated=True``, plus a warning).  No-progress guard: when the largest of the four norms has
not halved within the last ``STALL_WINDOW`` iterations (a limit cycle or a crawl: with few
subbands the truncated Frechet kernel makes Newton a quasi-Newton that can cycle, e.g. N_sbn = 2 on
13 x 13), the iteration stops unconverged at once (``stalled=True``) instead of running to its
limit; INITCOND and THERMEQUIL then restart from their initial guess with damped updates
V <- V + omega (V_Newton - V), omega = 0.5 then 0.25 (converged when the norms of the change are
below omega x tol, i.e. the undamped step is below tol); POTENTIAL does the same from V_prev and
then falls back to Gummel.
The guard never triggers on a Newton that converges (quadratically or linearly faster than
halving per 25 iterations), so converging runs are unchanged.  Limits: ``max_iter_startup`` (fatal) for INITCOND and
THERMEQUIL; ``max_iter_potential`` for POTENTIAL, after which (or on NaN/Inf or a failed linear
solve) a Gummel iteration restarts from the current iterate (F replaced by the pointwise N_old),
and if that fails too, ``ConvergenceError``.

Phases (nested inside whatever phase the caller opened, e.g. ITER): ``eigen`` (eigenpairs and
densities), ``Frechet``, ``construct_linsys``, ``solve_linsys``; none inside a kept-Jacobian iteration
that runs as one ``newton_iteration`` call (numerics.iter_graph on cupy: one CUDA graph replay, timed
only as part of the caller's ITER).
"""
from __future__ import annotations

import math
import warnings
from contextlib import nullcontext
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from solver.bsp import schrodinger
from solver.bsp import kernels as _kernels

STAGNATION_FLOOR = 1e-10
STAGNATION_ITERS = 3
STALL_WINDOW = 25  # no-progress guard: the largest norm must halve within this many iterations
STALL_FACTOR = 0.5
RELAXATION = (0.5, 0.25)  # INITCOND/THERMEQUIL retries with damped updates after a stall
NORM_KEYS = ("dV_inf", "dV_l2", "dN_inf", "dN_l2")
THETA_MAX = 0.1  # converged_by_estimate: only for iterations that shrink the change >= 10x each time
THETA_MAX_AGE = 9  # ... with a ratio measured within the last 9 solves (3 steps), else one is measured
KEEP_MAX_NEWTON = 4  # ... and kept into the next step only after a step of at most 3 stages x 1 iteration + 1
THETA_REFRESH = 0.5  # numerics.iter_jacobian = step: a kept Jacobian is evaluated afresh when an iteration
#                      shrinks the change by less than this
ESTIMATE_SAFETY = 0.5  # ... and the estimated error below half the tolerance


class ConvergenceError(RuntimeError):
    """A Schroedinger-Poisson iteration did not converge (message names the problem and norms)."""


@dataclass
class IterResult:
    """Outcome of one Schroedinger-Poisson solve (arrays on the backend).

    V (NX, NZ); eps (NX, 3, N_sbn); chi (NX, 3, N_sbn, NZ); rho (NX, 3, N_sbn): the densities
    that produced N (Fermi-Dirac for INITCOND, rho^eq for THERMEQUIL, the given BTE rho for
    POTENTIAL); N (NX, NZ) = 2 sum rho chi^2 at the final iterate; iterations: Newton (+ Gummel)
    updates; norms: the last {dV_inf, dV_l2, dN_inf, dN_l2}; history: norms per iteration;
    method: 'newton' or 'gummel'; A: the THERMEQUIL constant (None otherwise); contraction: the
    last measured ratio of two consecutive changes (the largest over the four norms), or the one
    this solve started with when it measured none (numerics.iter_stop = estimate);
    contraction_age: solves since it was measured (0: by this one); jacobian: (F, A), the
    Frechet blocks and the Newton matrix of the last factorization of this system, to be kept by
    the step's next stages (numerics.iter_jacobian = step; None otherwise); tail: (d eps/dx, A_eps,
    all finite V) of V and eps, as schrodinger.deps_dx_max gives them, where the last iteration's norms
    formed them in the same host read (potential's ``tail``, a fast path of ``norms_tail``; None
    otherwise: the caller forms them).
    """
    problem: str
    V: object
    eps: object
    chi: object
    rho: object
    N: object
    iterations: int
    norms: dict
    history: list = field(default_factory=list)
    converged: bool = True
    stagnated: bool = False
    method: str = "newton"
    A: float | None = None
    gummel_iterations: int = 0
    stalled: bool = False
    omega: float = 1.0
    contraction: float | None = None
    contraction_age: int = 0
    jacobian: tuple | None = None
    tail: tuple | None = None


def _phase(timer, name):
    return timer.phase(name) if timer is not None else nullcontext()


# ---------------------------------------------------------------------- densities and Frechet kernel
# _scalar_ops: on CuPy, ``array / 3.0`` (an array, then a Python scalar; also * + - **) is handed to
# numpy.true_divide and comes back through cupy.ndarray.__array_ufunc__, whose first call imports
# cupyx.scipy.special, hence cupyx, cupyx.scipy.sparse and the host scipy.sparse (0.25 s on the
# H200; docs/performance-startup.md, round 3).  ``xp.divide(array, 3.0)`` is the call that
# __array_ufunc__ makes (the same kernel and operands, so bitwise the same) without the detour;
# ``3.0 * array`` goes to CuPy directly.  The start-up's only such operations were the two below.
def fermi_dirac_rho(model, xp, eps):
    """INITCOND densities rho = (1/pi) sqrt(m_x m_y) ln(1 + e^{-eps}) (NX, 3, N_sbn)."""
    s = xp.asarray(model.sqrt_mxmy)[None, :, None]
    return xp.divide(s, math.pi) * xp.logaddexp(0.0, -eps)  # divide: see _scalar_ops


def fermi_dirac_drho(model, xp, eps):
    """-d rho/d eps = (1/pi) sqrt(m_x m_y) e^{-eps}/(1 + e^{-eps})."""
    s = xp.asarray(model.sqrt_mxmy)[None, :, None]
    return xp.divide(s, math.pi) / (1.0 + xp.exp(eps))


def boltzmann_rho(model, xp, eps, A):
    """THERMEQUIL densities rho = A sqrt(m_x m_y) e^{-eps}."""
    s = xp.asarray(model.sqrt_mxmy)[None, :, None]
    return A * s * xp.exp(-eps)


def density(xp, rho, chi):
    """N(x, z) = 2 sum_{nu,p} rho chi^2 (NX, NZ); zero at j = 0, NZ-1 because chi is."""
    return 2.0 * xp.einsum("ivp,ivpz->iz", rho, chi * chi)


def volume_density(model, backend, rho, chi):
    """N(x, z) = 2 sum_{nu,p} rho chi^2 (NX, NZ) on the backend (for DENS / outputs)."""
    return density(backend.xp, rho, chi)


def frechet(model, backend, eps, chi, rho, drho=None):
    """Frechet kernel F_i(j, j') = dN(x_i, z_j)/dV(x_i, z_j') at the interior columns and nodes.

    Shape (NX-2, NZ-2, NZ-2) for i = 1..NX-2, j, j' = 1..NZ-2 (zero elsewhere by definition).
    F = sum_nu [ sum_p 2 drho_p chi_p^2(z) chi_p^2(z')
               + sum_{p<p'} 4 (rho_p - rho_p')/(eps_p' - eps_p) (chi_p chi_p')(z) (chi_p chi_p')(z') ]
    with drho = -d rho/d eps (INITCOND: Fermi-Dirac; THERMEQUIL: rho itself) or None (POTENTIAL:
    rho held fixed).  The unordered-pair form is the papers' ordered double sum p != p' summed
    pairwise; it equals the three variants of physics.md §8.  Evaluated as one batched matmul
    B^T diag(c) B per column, B = the (3 (N_sbn + N_sbn (N_sbn-1)/2), NZ-2) products.
    A backend's fast path (``kernels.lookup(..., "Frechet")``) may compute it directly.
    """
    fast = _kernels.lookup(model, backend, "Frechet")
    if fast is not None:
        return fast(model, backend, eps, chi, rho, drho)
    xp = backend.xp
    n = eps.shape[-1]
    ch = chi[1:-1, :, :, 1:-1]  # (NXi, 3, n, nz)
    e = eps[1:-1]
    r = rho[1:-1]
    pa, pb = (xp.asarray(a) for a in np.triu_indices(n, k=1))
    prod = ch[:, :, pa, :] * ch[:, :, pb, :]  # (NXi, 3, npair, nz)
    coef = 4.0 * (r[:, :, pa] - r[:, :, pb]) / (e[:, :, pb] - e[:, :, pa])  # (NXi, 3, npair)
    B = [prod]
    C = [coef]
    if drho is not None:
        B.append(ch * ch)
        C.append(2.0 * drho[1:-1])
    B = xp.concatenate(B, axis=2)
    C = xp.concatenate(C, axis=2)
    NXi, nz = B.shape[0], B.shape[-1]
    B = B.reshape(NXi, -1, nz)
    C = C.reshape(NXi, -1)
    return xp.matmul(xp.swapaxes(B * C[:, :, None], 1, 2), B)


# ---------------------------------------------------------------------- the Newton system
class NewtonSystem:
    """Sparsity pattern, Laplacian coefficients and boundary rows of one problem's linear system.

    ``x_bc``: 'neumann' (INITCOND) or 'dirichlet' (THERMEQUIL, POTENTIAL).  Unknown k = i NZ + j.
    Built once per (model, x_bc) with vectorised index arrays; ``matrix(F)`` then assembles the
    row-equilibrated CSC matrix by one bincount onto the fixed pattern.
    """

    def __init__(self, model, x_bc: str):
        if x_bc not in ("neumann", "dirichlet"):
            raise ValueError(f"x_bc must be 'neumann' or 'dirichlet', not {x_bc!r}")
        self.x_bc = x_bc
        NX, NZ = model.NX, model.NZ
        self.NX, self.NZ = NX, NZ
        self.n = n = NX * NZ
        dx, dz, eta = model.dx, model.dz, model.eta
        self.cp_dz = model.cp * dz
        idx = np.arange(n).reshape(NX, NZ)
        er = np.asarray(model.eps_r, dtype=float)
        ex = 0.5 * (er[1:] + er[:-1])  # (NX-1, NZ): i+1/2
        ez = 0.5 * (er[:, 1:] + er[:, :-1])  # (NX, NZ-1): j+1/2
        aW = eta**2 * ex[:-1, 1:-1] / dx**2
        aE = eta**2 * ex[1:, 1:-1] / dx**2
        aS = ez[1:-1, :-1] / dz**2
        aN = ez[1:-1, 1:] / dz**2
        lap_diag = aW + aE + aS + aN  # (NX-2, NZ-2)
        r = idx[1:-1, 1:-1]
        rows = [r, r, r, r, r]
        cols = [r, idx[:-2, 1:-1], idx[2:, 1:-1], idx[1:-1, :-2], idx[1:-1, 2:]]
        vals = [lap_diag, -aW, -aE, -aS, -aN]
        # boundary rows: unit diagonal, -1 at the neighbour for Neumann
        diag = np.ones(n)
        diag[r.ravel()] = lap_diag.ravel()
        dirichlet = np.zeros((NX, NZ), dtype=bool)
        bnd_rows, bnd_nb = [], []
        ii = np.arange(1, NX - 1)
        gate = np.asarray(model.gate_x)[1:-1]
        for j, jn in ((0, 1), (NZ - 1, NZ - 2)):
            dirichlet[ii[gate], j] = True
            bnd_rows.append(idx[ii[~gate], j])
            bnd_nb.append(idx[ii[~gate], jn])
        jj = np.arange(NZ)
        if x_bc == "dirichlet":
            dirichlet[0, :] = dirichlet[-1, :] = True
        else:
            bnd_rows += [idx[0, jj], idx[-1, jj]]
            bnd_nb += [idx[1, jj], idx[-2, jj]]
        self.dirichlet = dirichlet
        self.dirichlet_flat = np.flatnonzero(dirichlet.ravel())
        bnd_rows = np.concatenate(bnd_rows)
        bnd_nb = np.concatenate(bnd_nb)
        self.neumann_rows, self.neumann_nb = bnd_rows, bnd_nb
        rows += [self.dirichlet_flat, bnd_rows, bnd_rows]
        cols += [self.dirichlet_flat, bnd_rows, bnd_nb]
        vals += [np.ones(self.dirichlet_flat.size), np.ones(bnd_rows.size), -np.ones(bnd_rows.size)]
        # the dense Frechet blocks of the interior columns
        rF = np.broadcast_to(r[:, :, None], r.shape + (NZ - 2,))
        cF = np.broadcast_to(r[:, None, :], r.shape + (NZ - 2,))
        rows_s = np.concatenate([np.ravel(a) for a in rows])
        cols_s = np.concatenate([np.ravel(a) for a in cols])
        self.vals_static = np.concatenate([np.ravel(a) for a in vals])
        self.n_static = self.vals_static.size
        all_rows = np.concatenate([rows_s, rF.ravel()])
        all_cols = np.concatenate([cols_s, cF.ravel()])
        # CSC pattern: unique (col, row) keys, the map of every entry onto it
        keys = all_cols.astype(np.int64) * n + all_rows
        ukeys, self.inverse = np.unique(keys, return_inverse=True)
        self.indices = (ukeys % n).astype(np.int32)
        ucols = ukeys // n
        self.indptr = np.searchsorted(ucols, np.arange(n + 1)).astype(np.int32)
        self.nnz = ukeys.size
        self.all_rows = all_rows
        self.diag_static = diag
        self.interior = r.ravel()
        self.lap_diag = lap_diag
        self.gate = gate

    def matrix(self, F_blocks: np.ndarray):
        """Row-equilibrated CSC matrix and the row scale (1/diagonal) for host blocks (NX-2, nz, nz)."""
        Fv = self.cp_dz * F_blocks
        d = self.diag_static.copy()
        d[self.interior] += np.einsum("ijj->ij", Fv).ravel()
        s = 1.0 / d
        data = np.concatenate([self.vals_static, Fv.ravel()]) * s[self.all_rows]
        csc = np.bincount(self.inverse, weights=data, minlength=self.nnz)
        import scipy.sparse as sp  # here, not at import: start-up (docs/performance-startup.md)

        A = sp.csc_matrix((csc, self.indices, self.indptr), shape=(self.n, self.n))
        return A, s

    def dense_static(self) -> np.ndarray:
        """The static part (Laplacian, boundary rows) as an unscaled dense host matrix (n, n):
        ``matrix(F)`` equals diag(s) (dense_static() + the blocks cp dz F on the block diagonal)."""
        n, m = self.n, self.n_static
        ucols = np.repeat(np.arange(n), np.diff(self.indptr))  # column of each pattern entry
        cols = ucols[self.inverse[:m]]
        A = np.zeros(n * n)
        np.add.at(A, self.all_rows[:m].astype(np.int64) * n + cols, self.vals_static)
        return A.reshape(n, n)

    def boundary_values(self, model, V_left=None, V_right=None) -> np.ndarray:
        """Right-hand side of the boundary rows (NX, NZ): gate voltages, contact columns, 0 for Neumann."""
        b = np.zeros((self.NX, self.NZ))
        VGb, VGt = model.V_G
        ii = np.arange(1, self.NX - 1)[self.gate]
        b[ii, 0] = VGb
        b[ii, -1] = VGt
        if self.x_bc == "dirichlet":
            b[0, :] = V_left
            b[-1, :] = V_right
        return b


def construct_linsys(model, backend, sysm, F, rhs_int, bflat):
    """Phase ``construct_linsys``: the Newton system (A, b) from the Frechet blocks F (NX-2, nz, nz)
    and the interior right-hand side (NX-2, NZ-2), both backend arrays.  Reference: the
    row-equilibrated sparse CSC matrix on the host; a backend's fast path
    (``kernels.lookup(..., "construct_linsys")``) may build its own representation."""
    fast = _kernels.lookup(model, backend, "construct_linsys")
    if fast is not None:
        return fast(model, backend, sysm, F, rhs_int, bflat)
    A, s = sysm.matrix(backend.to_numpy(F))
    b = bflat.copy()
    b[sysm.interior] = backend.to_numpy(rhs_int).ravel()
    b *= s
    return A, b


def linsys_rhs(model, backend, sysm, F, rhs_int, bflat):
    """Phase ``construct_linsys`` with a kept Jacobian (numerics.iter_jacobian = step): b of
    construct_linsys(F, rhs_int, bflat) alone (its rows scaled by the diagonal of the kept matrix,
    built from the same F).  Reference: construct_linsys's b (the matrix is built and dropped); a
    backend's fast path (``kernels.lookup(..., "linsys_rhs")``, CUDA: one launch over NX NZ rows
    instead of the NX NZ^2 block entries) forms b alone, the same values."""
    fast = _kernels.lookup(model, backend, "linsys_rhs")
    if fast is not None:
        return fast(model, backend, sysm, F, rhs_int, bflat)
    return construct_linsys(model, backend, sysm, F, rhs_int, bflat)[1]


def solve_linsys(model, backend, sysm, A, b, reuse=False):
    """Phase ``solve_linsys``: x of A x = b as a flat backend array, Dirichlet entries exact.
    ``reuse``: A is the very object of this system's last solve, whose factorization may be reused
    (numerics.iter_jacobian = step); an implementation that keeps none factors A again.
    Reference: sparse LU (SuperLU, natural order) on the host, the last one kept per system."""
    fast = _kernels.lookup(model, backend, "solve_linsys")
    if fast is not None:
        return fast(model, backend, sysm, A, b, reuse)
    import scipy.sparse.linalg as spla

    key = ("_iter_lu", sysm.x_bc)
    cache = model.device_cache
    if not (reuse and key in cache and cache[key][0] is A):
        cache[key] = (A, spla.splu(A, permc_spec="NATURAL"))
    x = cache[key][1].solve(b)
    x[sysm.dirichlet_flat] = b[sysm.dirichlet_flat]  # Dirichlet rows have unit diagonal: b = the data
    return backend.asarray(x)


def newton_rhs(model, backend, sysm, F, V, N, ND):
    """The right-hand side of the interior rows (NX-2, NZ-2): -c_p (N_old - N_D) + c_p dz F V_old
    (part of phase Frechet).  A backend's fast path (``kernels.lookup(..., "newton_rhs")``) may
    form it in one launch."""
    fast = _kernels.lookup(model, backend, "newton_rhs")
    if fast is not None:
        return fast(model, backend, sysm, F, V, N, ND)
    FV = backend.xp.einsum("ijk,ik->ij", F, V[1:-1, 1:-1])
    return -model.cp * (N[1:-1, 1:-1] - ND[1:-1, 1:-1]) + sysm.cp_dz * FV


def kept_jacobian(model, backend, F):
    """(F, A): POTENTIAL's kept Jacobian (IterResult.jacobian) for the Frechet blocks F (a checkpoint's),
    A built by construct_linsys as _newton_loop builds it (A does not depend on the right-hand side)."""
    sysm = _system(model, "dirichlet")
    rhs = backend.xp.zeros((model.NX - 2, model.NZ - 2))
    return F, construct_linsys(model, backend, sysm, F, rhs, np.zeros(sysm.n))[0]


class LastStep:
    """The last step's POTENTIAL solutions that the prediction of a stage's start needs
    (numerics.iter_start = extrapolate; iter_start): V0 = V^(n-1), V1 = its first stage's V^(1)_o,
    dt_o its time step; ``d_o`` = (V1 - V0) / dt_o, the array formed once (on first use) per step."""

    def __init__(self, V0, V1, dt_o: float):
        self.V0, self.V1, self.dt_o = V0, V1, dt_o

    @cached_property
    def d_o(self):
        return (self.V1 - self.V0) / self.dt_o


def iter_start(model, backend, s: int, V_n, stage_V: list, last: LastStep | None, dt: float):
    """numerics.iter_start = extrapolate: the start of RK stage ``s``'s POTENTIAL Newton, predicted
    from this step's stages ``stage_V`` (V^(1), V^(2)), V^n = ``V_n`` and the last step ``last``
    (None: none); None where there is no prediction (stage 1 without a last step).  The formulas are
    Simulation._iter_start's.  A backend's fast path (``kernels.lookup(..., "iter_start")``, CUDA: one
    launch, the same operations in the same order, no contraction) forms it from the same arguments."""
    fast = _kernels.lookup(model, backend, "iter_start")
    if fast is not None:
        return fast(model, backend, s, V_n, stage_V, last, dt)
    if s == 0:
        return None if last is None else V_n + dt * (2.0 * (V_n - last.V0) / last.dt_o - last.d_o)
    V1 = stage_V[0]
    if s == 1:
        V = 0.5 * (V_n + V1)
    else:
        V = (2.0 / 3.0) * (V1 + stage_V[1]) - (1.0 / 3.0) * V_n
    if last is not None:
        V2nd = ((V1 - V_n) / dt - last.d_o) / last.dt_o
        V = V + (dt * dt / (4.0 if s == 1 else 3.0)) * V2nd
    return V


def _potential_boundary(model, backend, sysm, V_b):
    """POTENTIAL's boundary values (NX NZ,) as a read-only flat host array: V_b at x = 0, V_b + V_DS
    at x = 1, the gate voltages at the gates.  Kept on the model per bias: recomputed (one host read
    of V_b) only when V_b is another array or the bias (V_G, V_DS: Simulation._ramp_bias changes it)
    differs; V_b is never written in place.  Read-only, so that a fast path may keep its device copy
    by identity (kernels/cuda/newton.py)."""
    key = ("_iter_boundary", sysm.x_bc)
    bias = (model.V_G, model.V_DS)
    cache = model.device_cache
    hit = cache.get(key)
    if hit is not None and hit[0] is V_b and hit[1] == bias:
        return hit[2]
    V_b_h = np.asarray(backend.to_numpy(V_b), dtype=float).reshape(model.NZ)
    bflat = sysm.boundary_values(model, V_b_h, V_b_h + bias[1]).ravel()
    bflat.flags.writeable = False
    cache[key] = (V_b, bias, bflat)
    return bflat


def _system(model, x_bc):
    key = ("_iter_newton_system", x_bc)  # host structure cached on the model (not a backend array)
    cache = model.device_cache
    if key not in cache:
        cache[key] = NewtonSystem(model, x_bc)
    return cache[key]


# ---------------------------------------------------------------------- the iteration
def norms(xp, model, V_new, V_old, N_new, N_old):
    w = math.sqrt(model.dx * model.dz)
    dV = V_new - V_old
    dN = N_new - N_old
    vals = xp.stack([xp.max(xp.abs(dV)), w * xp.sqrt(xp.sum(dV * dV)),
                     xp.max(xp.abs(dN)), w * xp.sqrt(xp.sum(dN * dN))])
    vals = np.asarray(vals.get() if hasattr(vals, "get") else vals, dtype=float)
    return dict(zip(NORM_KEYS, vals.tolist()))


def norms_tail(model, backend, V_new, V_old, N_new, N_old, x, eps):
    """(norms, all(isfinite(x)), schrodinger.deps_dx_max(eps, V_new)): the Newton norms of an iteration
    and the tail of the stage's ITER for its new iterate (eps: the levels of V_new).  A fast path
    (``kernels.lookup(..., "newton_norms_tail")``, CUDA: one kernel, one host read) lets a converging
    POTENTIAL iteration bring the tail along (IterResult.tail); this array form is its reference
    (_newton_loop's own path calls norms and leaves the tail to the caller)."""
    xp = backend.xp
    finite_x = bool(xp.all(xp.isfinite(x)))
    return norms(xp, model, V_new, V_old, N_new, N_old), finite_x, schrodinger.deps_dx_max(model, backend, eps, V_new)


def newton_iteration(model, backend, sysm, jac, V, N, eps, rho, bflat, levels=None, before_read=None):
    """One simplified-Newton iteration of POTENTIAL (numerics.iter_jacobian = step) with the kept
    Jacobian ``jac`` = (F, A), A's factorization held by solve_linsys, the densities ``rho`` held
    fixed: the iterate V with its density N and levels eps (``N`` None: from V, its eigenpairs
    warm-started from ``levels``, as _newton_loop's start), the rhs, b alone, the resolve, the new
    iterate's eigenpairs and density, the norms and the stage tail: (V_new, eps_new, chi_new, N_new,
    norms, all(isfinite(x)), (d eps/dx, A_eps, all finite V_new)); None where a fast path cannot run
    it (the caller then runs the iteration itself).  The array code of _newton_loop's kept iteration
    (its reference; _newton_loop runs its own statements where the backend has no fast path); the
    cupy fast path (``kernels.lookup(..., "newton_iteration")``, numerics.iter_graph) replays the
    same kernels from a CUDA graph with one host read (kernels/cuda/iter_graph.py).  ``before_read``: called as
    ``before_read(eps_new, chi_new, d eps/dx, A_eps)`` once the iteration's work is enqueued, before the host reads
    its norms (cupy: A_eps a 0-d device array; what it launches runs after the iteration on the device;
    numerics.bte_speculate); here, with everything computed, just before the return."""
    xp = backend.xp
    if N is None:
        eps, chi = schrodinger.eigen(model, backend, V, levels)
        N = density(xp, rho, chi)
    F, A = jac
    rhs_int = newton_rhs(model, backend, sysm, F, V, N, model.on(backend, "N_D"))
    b = linsys_rhs(model, backend, sysm, F, rhs_int, bflat)
    x = solve_linsys(model, backend, sysm, A, b, True)
    V_new = x.reshape(model.NX, model.NZ)
    eps_new, chi_new = schrodinger.eigen(model, backend, V_new, eps)
    N_new = density(xp, rho, chi_new)
    nrm, finite_x, tail = norms_tail(model, backend, V_new, V, N_new, N, x, eps_new)
    if before_read is not None:
        before_read(eps_new, chi_new, tail[0], tail[1])
    return V_new, eps_new, chi_new, N_new, nrm, finite_x, tail


def iter_prologue(model, backend, jacobian, levels):
    """numerics.iter_overlap: the prologue of a stage's first kept-Jacobian Newton iteration (the
    eigenpairs of its start, warm-started from ``levels``, the last stage's) launched early, while
    the stage's BTE runs; called before the BTE's launches.  The reference launches nothing early:
    None (ITER forms the start and its eigenpairs itself).  A fast path (cupy: kernels/cuda/iter_graph.py
    ``iter_prologue``) returns a handle (``Early``: ``launch(start, levels, timer)`` -> the start,
    formed by ``start()``, after the BTE's launches; ``join()`` before ITER; ``close()`` after it)
    or None where the stage's ``newton_iteration`` would not take it; the run's values are the same
    bits either way."""
    fast = _kernels.lookup(model, backend, "iter_prologue")
    return None if fast is None else fast(model, backend, jacobian, levels)


def converged_by_estimate(nrm, contraction, tol) -> bool:
    """The stopping test of Hairer & Wanner (Solving ODEs II, section IV.8) for a contracting
    iteration: with theta the ratio of consecutive changes, the error left in the iterate is
    about theta / (1 - theta) times its last change; True when that is below ESTIMATE_SAFETY x
    ``tol`` for all four norms (theta < THETA_MAX only: a slow or diverging iteration waits for the change test)."""
    if contraction is None or not contraction < THETA_MAX:
        return False
    f = contraction / (1.0 - contraction)
    return all(f * v < ESTIMATE_SAFETY * tol for v in nrm.values())


class _LinearSolveFailed(RuntimeError):
    """A failed linear solve or non-finite iterate; ``V`` is the last finite iterate, ``iterations``
    the ones made (the failed one included)."""

    def __init__(self, msg, V=None, iterations=0):
        super().__init__(msg)
        self.V = V
        self.iterations = iterations


def _stalled(history) -> bool:
    """True when the largest norm has not dropped below STALL_FACTOR x its best value of the
    iterations before the last STALL_WINDOW ones (no progress: a limit cycle or a crawl)."""
    if len(history) <= STALL_WINDOW:
        return False
    m = [max(h.values()) for h in history]
    return min(m[-STALL_WINDOW:]) >= STALL_FACTOR * min(m[:-STALL_WINDOW])


def _newton_loop(model, backend, problem, V, sysm, bvals, rho_fn, drho_fn, tol, max_iter,
                 timer, gummel=False, eigs=None, omega=1.0, levels=None, contraction=None, age=0,
                 jacobian=None, keep=False, tail=False, fixed_rho=None, before_read=None):
    """Run Newton (or Gummel) updates from V; return an IterResult (converged or not) or raise
    _LinearSolveFailed / FloatingPointError through the caller's handling.  ``eigs``: the
    eigenpairs of V, if known; else they are computed, warm-started from ``levels`` if given.
    ``contraction`` (numerics.iter_stop = estimate; None = off): the ratio of consecutive changes
    to assume until this loop measures one, ``age`` solves old; see converged_by_estimate.
    ``keep`` (numerics.iter_jacobian = step): simplified Newton, the Jacobian (F, A) of the first
    iteration (or ``jacobian``, kept from an earlier solve of the step) used by the later ones, its
    factorization reused, and evaluated afresh after an iteration that shrinks the change by less
    than THETA_REFRESH; the result carries it.  ``tail``: where ``newton_norms_tail`` has a fast
    path, each iteration's norms also form the stage tail of its new iterate (one host read) and the
    result carries the last one (IterResult.tail).  ``fixed_rho``: the densities rho_fn returns
    whatever the levels (POTENTIAL); with ``keep``, ``jacobian`` and ``tail`` it lets the iterations
    with that kept Jacobian run as one ``newton_iteration`` each where it has a fast path
    (numerics.iter_graph: one CUDA graph replay; the start's eigenpairs and density go into the
    first one when they are to be computed from ``levels``); those iterations time no sub-phase.
    ``before_read``: handed to the first such ``newton_iteration`` only (numerics.bte_speculate)."""
    xp = backend.xp
    NX, NZ = model.NX, model.NZ
    ND = model.on(backend, "N_D")
    graph = None
    if (keep and jacobian is not None and tail and fixed_rho is not None and not gummel and omega == 1.0
            and drho_fn is None):
        graph = _kernels.lookup(model, backend, "newton_iteration")
    if graph is not None and eigs is None and levels is not None:
        eps = chi = N = None  # the start's eigenpairs and density: in the first replay
        rho = fixed_rho
    else:
        with _phase(timer, "eigen"):
            if eigs is None:
                eps, chi = schrodinger.eigen(model, backend, V, levels)
            else:
                eps, chi = eigs
            rho = rho_fn(eps)
            N = density(xp, rho, chi)
    bflat = bvals if bvals.ndim == 1 else bvals.ravel()  # potential's: kept per bias (_potential_boundary)
    # optional fused glue (kernels.lookup; None on the reference path): the norms + the finite
    # check of x in one reduction with one host read
    norms_fast = _kernels.lookup(model, backend, "newton_norms")
    tail_fast = _kernels.lookup(model, backend, "newton_norms_tail") if tail and norms_fast is not None else None
    last_tail = None
    history = []
    best = {k: math.inf for k in NORM_KEYS}
    flat = 0
    stagnated = False
    jac = jacobian if keep else None
    for it in range(1, max_iter + 1):
        out = None
        if graph is not None and jac is jacobian:  # the kept Jacobian's iteration in one call
            out = graph(model, backend, sysm, jac, V, N, eps, fixed_rho, bflat, levels if N is None else None,
                        **({} if before_read is None else {"before_read": before_read}))
            before_read = None
            if out is None:
                graph = None
        if out is not None:
            V_new, eps, chi, N_new, nrm, finite_x, last_tail = out
            if not finite_x:
                raise _LinearSolveFailed(f"{problem}: non-finite Newton update in iteration {it}", V, it)
        else:
            if N is None:  # the start deferred to a replay that did not run
                with _phase(timer, "eigen"):
                    eps, chi = schrodinger.eigen(model, backend, V, levels)
                    rho = rho_fn(eps)
                    N = density(xp, rho, chi)
            with _phase(timer, "Frechet"):
                if jac is not None:  # the kept Jacobian: the rhs with its F keeps the Newton form
                    F = jac[0]
                elif gummel:
                    F = xp.zeros((NX - 2, NZ - 2, NZ - 2))
                    ar = xp.arange(NZ - 2)
                    F[:, ar, ar] = N[1:-1, 1:-1] / model.dz
                else:
                    F = frechet(model, backend, eps, chi, rho, drho_fn(eps, rho) if drho_fn else None)
                rhs_int = newton_rhs(model, backend, sysm, F, V, N, ND)
            reuse = jac is not None  # the kept matrix (built from the same F) and its factorization
            with _phase(timer, "construct_linsys"):
                if reuse:  # b alone
                    A, b = jac[1], linsys_rhs(model, backend, sysm, F, rhs_int, bflat)
                else:
                    A, b = construct_linsys(model, backend, sysm, F, rhs_int, bflat)
            if not reuse and keep:
                jac = (F, A)
            with _phase(timer, "solve_linsys"):
                try:
                    x = solve_linsys(model, backend, sysm, A, b, reuse)
                except (RuntimeError, ValueError, np.linalg.LinAlgError) as exc:
                    raise _LinearSolveFailed(f"{problem}: linear solve failed in iteration {it}: {exc}", V, it) from exc
                if norms_fast is None and not bool(xp.all(xp.isfinite(x))):
                    raise _LinearSolveFailed(f"{problem}: non-finite Newton update in iteration {it}", V, it)
                V_new = x.reshape(NX, NZ)
                if omega != 1.0:
                    V_new = V + omega * (V_new - V)
            with _phase(timer, "eigen"):  # the levels of V: the warm start of an iterative eigen
                eps, chi = schrodinger.eigen(model, backend, V_new, eps)
                rho = rho_fn(eps)
                N_new = density(xp, rho, chi)
            if norms_fast is None:  # the reference: the finite check of x above, then norms
                nrm = norms(xp, model, V_new, V, N_new, N)
            else:  # the finite check of x deferred to the one host read of this iteration
                if tail_fast is not None:  # ... which also brings the stage tail of V_new along
                    nrm, finite_x, last_tail = tail_fast(model, backend, V_new, V, N_new, N, x, eps)
                else:
                    nrm, finite_x = norms_fast(model, backend, V_new, V, N_new, N, x)
                if not finite_x:
                    raise _LinearSolveFailed(f"{problem}: non-finite Newton update in iteration {it}", V, it)
        history.append(nrm)
        if not all(math.isfinite(v) for v in nrm.values()):
            raise _LinearSolveFailed(f"{problem}: non-finite norms in iteration {it}: {nrm}", V, it)
        V, N = V_new, N_new
        if len(history) >= 2:
            ratio = max(nrm[k] / history[-2][k] if history[-2][k] > 0 else 0.0 for k in NORM_KEYS)
            if contraction is not None:
                contraction, age = ratio, 0
            if keep and ratio > THETA_REFRESH:
                jac = None
        if all(v < omega * tol for v in nrm.values()) or converged_by_estimate(nrm, contraction, omega * tol):
            return IterResult(problem, V, eps, chi, rho, N, it, nrm, history, True, False,
                              "gummel" if gummel else "newton", omega=omega, contraction=contraction,
                              contraction_age=age, jacobian=jac, tail=last_tail)
        improved = False
        for k in NORM_KEYS:
            if nrm[k] < best[k]:
                best[k] = nrm[k]
                improved = True
        flat = 0 if improved else flat + 1
        if flat >= STAGNATION_ITERS and all(v < STAGNATION_FLOOR for v in nrm.values()):
            stagnated = True
            warnings.warn(f"{problem}: Newton stagnated after {it} iterations at norms "
                          + ", ".join(f"{k}={v:.3e}" for k, v in nrm.items())
                          + f" (tolerance {tol:g}; all below {STAGNATION_FLOOR:g}): accepted",
                          RuntimeWarning, stacklevel=3)
            return IterResult(problem, V, eps, chi, rho, N, it, nrm, history, True, True,
                              "gummel" if gummel else "newton", omega=omega, tail=last_tail)
        if _stalled(history):
            return IterResult(problem, V, eps, chi, rho, N, it, nrm, history, False, False,
                              "gummel" if gummel else "newton", stalled=True, omega=omega, tail=last_tail)
    return IterResult(problem, V, eps, chi, rho, N, max_iter, history[-1], history, False, False,
                      "gummel" if gummel else "newton", omega=omega, tail=last_tail)


def _startup_loop(model, backend, problem, V0, sysm, bvals, rho_fn, drho_fn, tol, max_iter, timer):
    """Newton from V0; after a stall, again from V0 with each damping of RELAXATION in turn.
    Returns the converged IterResult (iterations: all attempts) or raises ConvergenceError."""
    tries = []
    total = 0
    for omega in (1.0,) + RELAXATION:
        try:
            res = _newton_loop(model, backend, problem, V0, sysm, bvals, rho_fn, drho_fn, tol, max_iter,
                               timer, omega=omega)
        except _LinearSolveFailed as exc:
            raise ConvergenceError(str(exc)) from exc
        total += res.iterations
        if res.converged:
            if omega != 1.0:
                warnings.warn(f"{problem}: plain Newton made no progress; converged with damped updates "
                              f"(omega = {omega:g}) in {res.iterations} iterations", RuntimeWarning, stacklevel=3)
            res.iterations = total
            return res
        what = (f"no progress in {STALL_WINDOW} iterations (largest norm not halved) after {res.iterations}"
                if res.stalled else f"did not reach tol {tol:g} in {max_iter} iterations")
        tries.append(f"omega={omega:g}: {what} (last norms {_fmt(res.norms)})")
        if not res.stalled:
            break
    raise ConvergenceError(f"{problem}: Newton failed: " + "; ".join(tries)
                           + " (too few subbands or too coarse a mesh? try a larger mesh.N_sbn / NZ)")


def _fmt(nrm):
    return ", ".join(f"{k}={v:.3e}" for k, v in nrm.items())


def initcond(model, backend, timer=None, V0=None) -> IterResult:
    """INITCOND: Neumann at x = 0, 1, Fermi-Dirac densities (Fermi level 0), start V = 1."""
    xp = backend.xp
    nm = model.cfg["numerics"]
    sysm = _system(model, "neumann")
    V = xp.ones((model.NX, model.NZ)) if V0 is None else backend.asarray(V0)
    bvals = sysm.boundary_values(model)
    return _startup_loop(model, backend, "INITCOND", V, sysm, bvals,
                         lambda e: fermi_dirac_rho(model, xp, e),
                         lambda e, r: fermi_dirac_drho(model, xp, e),
                         nm["tol_startup"], nm["max_iter_startup"], timer)


def equilibrium_constant(model, eps0) -> float:
    """A = int N_D(0, z) dz / sum_{nu,p} 2 sqrt(m_x m_y)_nu e^{-eps_{nu,p}(0)} (eps0: (3, N_sbn), host)."""
    eps0 = np.asarray(eps0)
    return float(model.int_ND_contact / (2.0 * (model.sqrt_mxmy[:, None] * np.exp(-eps0)).sum()))


def thermequil(model, backend, V_b, timer=None, eps0=None) -> IterResult:
    """THERMEQUIL: Dirichlet V_b(z) at x = 0 and 1, Boltzmann densities A sqrt(m_x m_y) e^{-eps},
    start V(x, z) = V_b(z).  ``eps0`` (3, N_sbn): INITCOND levels at x = 0 (recomputed from V_b,
    the same column, when not given).  Result: rho = rho^eq, A."""
    xp = backend.xp
    nm = model.cfg["numerics"]
    V_b_h = np.asarray(backend.to_numpy(V_b), dtype=float).reshape(model.NZ)
    if eps0 is None:
        with _phase(timer, "eigen"):
            eps0 = schrodinger.eigen_host(model, V_b_h[None, :])[0][0]
    A = equilibrium_constant(model, backend.to_numpy(eps0))
    sysm = _system(model, "dirichlet")
    bvals = sysm.boundary_values(model, V_b_h, V_b_h)
    V = backend.asarray(np.broadcast_to(V_b_h, (model.NX, model.NZ)).copy())
    res = _startup_loop(model, backend, "THERMEQUIL", V, sysm, bvals,
                        lambda e: boltzmann_rho(model, xp, e, A),
                        lambda e, r: r,
                        nm["tol_startup"], nm["max_iter_startup"], timer)
    res.A = A
    return res


def potential(model, backend, V_prev, rho, V_b, timer=None, state=None, tol=None,
              max_iter=None, gummel_max_iter=None, V_start=None, jacobian=None, tail=False,
              before_read=None) -> IterResult:
    """POTENTIAL: densities ``rho`` (NX, 3, N_sbn) from the BTE held fixed; Dirichlet V_b(z) at
    x = 0 and V_b(z) + V_DS at x = 1; start ``V_prev``.  ``state``: optional previous IterResult
    whose eps/chi are the eigenpairs of ``V_prev`` (saves the first eigen solve).  Newton up to
    ``max_iter_potential`` iterations, then (or on a failed solve / non-finite values) Gummel from
    the current iterate (at most ``gummel_max_iter``, default ``max_iter_potential``, updates);
    ConvergenceError if that fails too.  ``tol``/``max_iter`` override the config values.
    ``V_start``: a prediction of the solution to start from instead of ``V_prev`` (Newton and its
    damped restarts; numerics.iter_start); its eigenpairs are computed, warm-started from the
    levels of ``state``.  numerics.iter_jacobian = step: simplified Newton (_newton_loop's ``keep``)
    from ``jacobian`` (the result's ``jacobian`` of the step's last solve; None = evaluated here);
    if that fails in any way, plain Newton from the start.  ``tail``: the result may carry the stage
    tail (IterResult.tail, _newton_loop's ``tail``); None where no fast path formed it.  ``before_read``: see
    newton_iteration; called at most once, by the first kept-Jacobian iteration where it runs as one call."""
    xp = backend.xp
    nm = model.cfg["numerics"]
    tol = nm["tol_potential"] if tol is None else tol
    max_iter = nm["max_iter_potential"] if max_iter is None else max_iter
    gummel_max_iter = nm["max_iter_potential"] if gummel_max_iter is None else gummel_max_iter
    sysm = _system(model, "dirichlet")
    bvals = _potential_boundary(model, backend, sysm, V_b)
    rho = backend.asarray(rho)
    V0 = backend.asarray(V_prev if V_start is None else V_start)
    V = V0
    eigs = (state.eps, state.chi) if state is not None and V_start is None else None
    levels = state.eps if state is not None and V_start is not None else None
    contraction, age = None, 0
    if nm["iter_stop"] == "estimate":  # as the previous solve left it; 1.0 (no stop by estimate) = measure one
        contraction = 1.0
        if state is not None and state.contraction is not None and state.contraction_age < THETA_MAX_AGE:
            contraction, age = state.contraction, state.contraction_age + 1
    rho_fn = lambda e: rho  # noqa: E731
    reason = None
    n_newton = 0
    keep = nm["iter_jacobian"] == "step"
    if keep and jacobian is not None:
        try:
            res = _newton_loop(model, backend, "POTENTIAL", V0, sysm, bvals, rho_fn, None, tol, max_iter,
                               timer, eigs=eigs, levels=levels, contraction=contraction, age=age,
                               jacobian=jacobian, keep=True, tail=tail, fixed_rho=rho, before_read=before_read)
            n_newton = res.iterations
            if res.converged:
                return res
        except _LinearSolveFailed as exc:
            n_newton = exc.iterations
    for omega in (1.0,) + RELAXATION:  # damped restarts from the start only after a stall
        try:
            res = _newton_loop(model, backend, "POTENTIAL", V0, sysm, bvals, rho_fn, None,
                               tol, max_iter, timer, eigs=eigs, omega=omega, levels=levels,
                               contraction=contraction, age=age, keep=keep and omega == 1.0, tail=tail)
        except _LinearSolveFailed as exc:
            reason = str(exc)
            V = exc.V if exc.V is not None else V0  # the last finite iterate
            break
        n_newton += res.iterations
        if res.converged:
            if omega != 1.0:
                warnings.warn(f"POTENTIAL: plain Newton made no progress; converged with damped updates "
                              f"(omega = {omega:g})", RuntimeWarning, stacklevel=2)
            res.iterations = n_newton
            return res
        V = res.V
        reason = (f"Newton (omega = {omega:g}) made no progress in {STALL_WINDOW} iterations (largest norm not "
                  f"halved; stopped after {res.iterations}, last norms {_fmt(res.norms)})" if res.stalled else
                  f"Newton did not reach tol {tol:g} in {max_iter} iterations (last norms {_fmt(res.norms)})")
        if not res.stalled:
            break
    warnings.warn(f"POTENTIAL: {reason}; falling back to Gummel", RuntimeWarning, stacklevel=2)
    try:
        g = _newton_loop(model, backend, "POTENTIAL(Gummel)", V, sysm, bvals, rho_fn, None,
                         tol, gummel_max_iter, timer, gummel=True, tail=tail)
    except _LinearSolveFailed as exc:
        raise ConvergenceError(f"POTENTIAL: {reason}; Gummel fallback failed: {exc}") from exc
    if not g.converged:
        what = (f"made no progress in {STALL_WINDOW} iterations (stopped after {g.iterations})" if g.stalled
                else f"did not reach tol {tol:g} in {gummel_max_iter} iterations")
        raise ConvergenceError(f"POTENTIAL: {reason}; Gummel fallback {what} (last norms {_fmt(g.norms)})")
    g.gummel_iterations = g.iterations
    g.iterations += n_newton
    return g
