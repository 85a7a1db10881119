"""The discrete collision integral (paper 004, eq. 10 with the correction of eqs. 11-13).

    I_i = sum_m sum_n A_{m,n} f_{i+(n-m)/2} f_{i-(n+m)/2}  -  f_i P(xi_i) sum_j B_{i-j} f_j

with m = i - j, A_{m,n} = h^3 k(g_m) Omega_{m,n} / (4 pi), B_m = h^3 k(g_m), g_m = |m| h and
k(g) = pi g (hard spheres, b in [0, 1]: total cross-section pi) or k = 1 (Maxwell molecules,
constant kernel, normalised as in the BKW solution).  P = a0 + a.c + a2 c^2 (c = xi - centre of
the grid) is the conservative correction: its five coefficients make the five moments of I vanish.

Gain-term evaluation (the N^{8/3} part): f lives in a zero-padded array (pad N on each side), so
post-collision cells outside the mesh contribute zero without a branch; the flat offsets of cells
k and l from i are (S_n - M)/2 and -(S_n + M)/2 with S_n = n . strides, M = m . strides.  The
sparse table of (n, 2 Omega) is stored per *sorted* |m| (coeffs.py); a signed m reads it through
the permutation that sorts |m| (permuted strides).

Backends: ``numpy`` (reference ``gain_reference``, vectorised per offset m over (n, i)); the fast
paths of ``solver.collision.kernels`` (one dispatch table per backend): ``numba`` (prange over i,
sum over j and n; 1 or all cores), ``cupy`` (RawKernel of ``kernels/gain.cu``: one block per (m,
tile of n), the tile of (S_n, weight) in shared memory, threads over the cells i with j = i - m
inside the mesh, one atomicAdd per (i, m, tile)).  float32 (as the paper) and float64.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from solver.collision.coeffs import OmegaTable, load_or_build
from solver.collision.kernels import REGISTRY

KERNELS = ("hard_spheres", "maxwell")


@dataclass
class VelocityGrid:
    """N^3 cubic cells of side h; centres xi_a = lower_a + (i + 1/2) h."""

    N: int
    h: float
    lower: tuple

    @classmethod
    def centred(cls, N, h, centre=(0.0, 0.0, 0.0)):
        return cls(N, h, tuple(c - 0.5 * N * h for c in centre))

    def axis(self, a):
        return self.lower[a] + (np.arange(self.N) + 0.5) * self.h

    def mesh(self):
        return np.meshgrid(self.axis(0), self.axis(1), self.axis(2), indexing="ij")

    @property
    def cell_volume(self):
        return self.h ** 3

    def describe(self):
        return {"N": self.N, "h": self.h, "lower": list(self.lower),
                "upper": [lo + self.N * self.h for lo in self.lower]}


# ----------------------------------------------------------------------------- the operator
class CollisionOperator:
    """I(f) on a VelocityGrid for one kernel and backend; arrays are (N, N, N) of ``dtype``."""

    def __init__(self, grid: VelocityGrid, kernel: str = "hard_spheres", backend=None, dtype="float64",
                 table: OmegaTable | None = None, cache_dir=None):
        from solver.backend import get_backend

        if kernel not in KERNELS:
            raise ValueError(f"kernel {kernel!r}: allowed {KERNELS}")
        self.grid, self.kernel = grid, kernel
        self.backend = backend or get_backend("numpy")
        self.xp = self.backend.xp
        self.dtype = np.dtype(dtype)
        N = grid.N
        self.N, self.P = N, N
        self.table = table if table is not None else load_or_build(N, cache_dir)
        if self.table.N < N:
            raise ValueError(f"coefficient table for N={self.table.N} is too small for N={N}")
        h = grid.h
        K = 2 * N - 1
        r = np.arange(-(N - 1), N)
        mx, my, mz = np.meshgrid(r, r, r, indexing="ij")
        mabs = np.stack([np.abs(mx), np.abs(my), np.abs(mz)], -1).reshape(-1, 3)
        order = np.argsort(-mabs, axis=1, kind="stable")
        ms = np.take_along_axis(mabs, order, 1)
        self.sidx_m = self.table.sorted_index[ms[:, 0], ms[:, 1], ms[:, 2]].astype(np.int32)
        Np = N + 2 * self.P
        strides = np.array([Np * Np, Np, 1], np.int64)
        self.ps = strides[order].astype(np.int32)
        self.Mflat = (np.stack([mx, my, mz], -1).reshape(-1, 3) @ strides).astype(np.int64)
        g = h * np.sqrt((mabs.astype(float) ** 2).sum(1))
        kg = math.pi * g if kernel == "hard_spheres" else np.where(g > 0, 1.0, 0.0)
        self.coef = h ** 3 * kg / (4 * math.pi)  # A_{m,n} = coef_m * Omega_{m,n}; table w = 2 Omega
        Bm = (h ** 3 * kg).reshape(K, K, K)
        self.max_half_nnz = int(np.diff(self.table.ptr).max())
        # FFT of B for the loss term (circular convolution of length 2N holds offsets |m| < N)
        L = 2 * N
        Bc = np.zeros((L, L, L))
        idx = np.arange(-(N - 1), N) % L
        Bc[np.ix_(idx, idx, idx)] = Bm
        xp = self.xp
        self._Bhat = xp.fft.rfftn(xp.asarray(Bc))
        # correction basis phi = 1, c_x, c_y, c_z, |c|^2 about the mesh centre
        X = grid.mesh()
        cen = [lo + 0.5 * N * h for lo in grid.lower]
        C = [X[a] - cen[a] for a in range(3)]
        phi = np.stack([np.ones_like(C[0]), C[0], C[1], C[2], C[0] ** 2 + C[1] ** 2 + C[2] ** 2])
        self.phi = xp.asarray(phi.reshape(5, -1))
        self.xi = [xp.asarray(x) for x in X]
        self.device_cache = {}  # arrays of the fast paths, per backend

    # -- pieces ---------------------------------------------------------------------------
    def pad(self, f):
        xp, P, N = self.xp, self.P, self.N
        fp = xp.zeros((N + 2 * P,) * 3, dtype=self.dtype)
        fp[P:P + N, P:P + N, P:P + N] = f
        return fp.reshape(-1)

    def gain(self, f):
        """sum_{m,n} A_{m,n} f_k f_l (uncorrected gain), same backend as f: the backend's fast
        path (solver.collision.kernels) or the reference."""
        f = self.xp.asarray(f, dtype=self.dtype)
        fast = REGISTRY.lookup(self.backend.name, "gain")
        return fast(self, f) if fast is not None else self.gain_reference(f)

    def gain_reference(self, f):
        """The gain in NumPy, vectorised per offset m over (n, i)."""
        N, P = self.N, self.P
        Np = N + 2 * P
        fp = self.pad(f)
        out = np.zeros((N, N, N), dtype=self.dtype)
        t = self.table
        K = 2 * N - 1
        r = np.arange(-(N - 1), N)
        for mi in range(K ** 3):
            s = self.sidx_m[mi]
            if s == 0:
                continue
            m = (r[mi // (K * K)], r[(mi // K) % K], r[mi % K])
            sl = tuple(slice(max(0, ma), min(N, N + ma)) for ma in m)
            ax = [np.arange(q.start, q.stop) + P for q in sl]
            ip = ((ax[0][:, None, None] * Np + ax[1][None, :, None]) * Np + ax[2][None, None, :]).reshape(-1)
            e0, e1 = t.ptr[s], t.ptr[s + 1]
            Sn = t.n[e0:e1].astype(np.int64) @ self.ps[mi].astype(np.int64)
            M = self.Mflat[mi]
            fk = fp[ip[None, :] + ((Sn - M) // 2)[:, None]]
            fl = fp[ip[None, :] - ((Sn + M) // 2)[:, None]]
            val = (t.w[e0:e1].astype(self.dtype) @ (fk * fl)) * self.dtype.type(self.coef[mi])
            out[sl] += val.reshape(out[sl].shape)
        return out

    def frequency(self, f):
        """nu_i = sum_j B_{i-j} f_j (FFT convolution, same backend as f)."""
        xp, N = self.xp, self.N
        L = 2 * N
        F = xp.fft.rfftn(xp.asarray(f, dtype=xp.float64), s=(L, L, L), axes=(0, 1, 2))
        nu = xp.fft.irfftn(F * self._Bhat, s=(L, L, L), axes=(0, 1, 2))[:N, :N, :N]
        return nu.astype(self.dtype)

    def correction(self, G, Lo):
        """The five coefficients (a0, ax, ay, az, a2) of eqs. 11-13 for gain G and loss f nu."""
        xp = self.xp
        g = G.reshape(-1).astype(xp.float64)
        lo = Lo.reshape(-1).astype(xp.float64)
        rhs = self.phi @ g
        Mat = (self.phi * lo[None, :]) @ self.phi.T
        a = np.linalg.solve(self.backend.to_numpy(Mat), self.backend.to_numpy(rhs))
        return a

    def __call__(self, f, corrected=True, parts=False):
        """I(f); with ``parts`` also the gain, the loss f nu, nu and the correction."""
        xp = self.xp
        f = xp.asarray(f, dtype=self.dtype)
        G = self.gain(f)
        nu = self.frequency(f)
        Lo = f * nu
        if corrected:
            a = self.correction(G, Lo)
            poly = (xp.asarray(a) @ self.phi).reshape(f.shape).astype(self.dtype)
            I = G - Lo * poly
        else:
            a = np.array([1.0, 0, 0, 0, 0])
            I = G - Lo
        if parts:
            return I, {"gain": G, "loss": Lo, "nu": nu, "a": a}
        return I

    # -- diagnostics --------------------------------------------------------------------------
    def moments(self, f):
        """Density, mean velocity, temperature T (M ~ exp(-c^2/T)), T_x, fourth moment
        sum |c|^4 f / n, entropy H = sum f ln f, all times the cell volume."""
        xp = self.xp
        f = xp.asarray(f, dtype=xp.float64)
        dv = self.grid.cell_volume
        n = float(f.sum()) * dv
        u = [float((f * x).sum()) * dv / n for x in self.xi]
        c2 = [(x - ua) ** 2 for x, ua in zip(self.xi, u)]
        Tx = [2.0 * float((f * c).sum()) * dv / n for c in c2]
        T = sum(Tx) / 3.0
        cc = c2[0] + c2[1] + c2[2]
        m4 = float((f * cc * cc).sum()) * dv / n
        pos = f > 0
        H = float(xp.where(pos, f * xp.log(xp.where(pos, f, 1.0)), 0.0).sum()) * dv
        fmin = float(f.min())
        return {"n": n, "ux": u[0], "uy": u[1], "uz": u[2], "T": T, "Tx": Tx[0], "Ty": Tx[1], "Tz": Tx[2],
                "m4": m4, "H": H, "fmin": fmin,
                "energy": float((f * (self.xi[0] ** 2 + self.xi[1] ** 2 + self.xi[2] ** 2)).sum()) * dv}

    def invariants(self, f):
        """sum phi_beta f dv with phi = 1, xi_x, xi_y, xi_z, xi^2 (float64 numpy)."""
        xp = self.xp
        f = xp.asarray(f, dtype=xp.float64)
        dv = self.grid.cell_volume
        X = self.xi
        return np.array([float(f.sum()), float((f * X[0]).sum()), float((f * X[1]).sum()),
                         float((f * X[2]).sum()), float((f * (X[0] ** 2 + X[1] ** 2 + X[2] ** 2)).sum())]) * dv


def maxwellian(grid: VelocityGrid, n=1.0, u=(0.0, 0.0, 0.0), T=1.0):
    """n (pi T)^{-3/2} exp(-|xi - u|^2 / T) at the cell centres (the paper's convention)."""
    X = grid.mesh()
    c2 = sum((X[a] - u[a]) ** 2 for a in range(3))
    return n * (math.pi * T) ** -1.5 * np.exp(-c2 / T)


def hs_frequency_exact(c, n=1.0, T=1.0):
    """nu(c) = pi n sqrt(T) [exp(-x^2)/sqrt(pi) + (x + 1/(2x)) erf(x)], x = |c|/sqrt(T)."""
    from scipy.special import erf

    x = np.maximum(np.asarray(c, float) / math.sqrt(T), 1e-12)
    return math.pi * n * math.sqrt(T) * (np.exp(-x * x) / math.sqrt(math.pi) + (x + 0.5 / x) * erf(x))
