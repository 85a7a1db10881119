"""Exact collision coefficients A_{m,n} of the deterministic method (paper 004, eqs. 6-10).

Units of the cell size h.  For an offset m = i - j (integer 3-vector) the post-collision velocity
xi' runs over the sphere of radius R = |m|/2 centred at c = (xi_i + xi_j)/2; cell k = c + n/2
(n has the parity of m component-wise, so k is integer) receives the part of the sphere inside the
cube [n/2 - 1/2, n/2 + 1/2]^3.  Omega_{m,n} is the solid angle of that part, computed with
Archimedes' hat-box theorem (area element R dz dphi on a sphere):

    Omega = (1/R) int dz Phi(rho(z)),   rho = sqrt(R^2 - z^2),

Phi(rho) = the angle of the circle of radius rho inside the cube's xy-rectangle (closed form by
inclusion-exclusion of quadrant arcs).  The z-integral is split at every point where Phi is not
smooth (cube faces, rho = |face|, rho = corner distance, z = +-R) and each piece is integrated by
Gauss-Legendre after the substitution z = z0 + (z1 - z0)(1 - cos(pi t))/2, which removes the
square-root endpoint behaviour, so Omega is exact to rounding (sum_n Omega = 4 pi to ~1e-14).

Symmetries used: Omega depends on |m|^2 and on |n_x|, |n_y|, |n_z| only (the sphere and the cube
lattice of a given parity are symmetric under reflections), and is invariant under a common
permutation of the components of m and n.  The table is therefore computed for sorted offsets
m_x >= m_y >= m_z >= 0 only, for n >= 0, and expanded to the half set of n (n and -n give the
same product f_k f_l; the representative has its first non-zero component > 0, weight 2 Omega).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

try:  # numba is an installed dependency; the coefficient table is always built with it
    from numba import njit, prange
except ImportError:  # pragma: no cover
    njit = None

GL_ORDER = 20


def _gl(q: int):
    x, w = np.polynomial.legendre.leggauss(q)
    return 0.5 * (x + 1.0), 0.5 * w


if njit is not None:

    @njit(cache=True, inline="always")
    def _quadrant(rho, a, b):
        """Angle of {phi : rho cos phi >= a, rho sin phi >= b} (0 <= result <= 2 pi)."""
        if rho <= 0.0:
            return 2.0 * math.pi if (a <= 0.0 and b <= 0.0) else 0.0
        al = min(1.0, max(-1.0, a / rho))
        be = min(1.0, max(-1.0, b / rho))
        A = math.acos(al)  # arc [-A, A]
        B = math.acos(be)  # arc [pi/2 - B, pi/2 + B]
        tot = 0.0
        for s in (-2.0 * math.pi, 0.0, 2.0 * math.pi):
            lo = max(-A, 0.5 * math.pi - B + s)
            hi = min(A, 0.5 * math.pi + B + s)
            if hi > lo:
                tot += hi - lo
        return tot

    @njit(cache=True)
    def _phi_rect(rho, x0, x1, y0, y1):
        return (_quadrant(rho, x0, y0) - _quadrant(rho, x1, y0)
                - _quadrant(rho, x0, y1) + _quadrant(rho, x1, y1))

    @njit(cache=True)
    def omega_box(R, x0, x1, y0, y1, z0, z1, tq, wq):
        """Solid angle of the part of the sphere |x| = R inside [x0,x1]x[y0,y1]x[z0,z1]."""
        za = max(z0, -R)
        zb = min(z1, R)
        if zb <= za:
            return 0.0
        br = np.empty(20)
        nb = 0
        br[nb] = za
        nb += 1
        br[nb] = zb
        nb += 1
        ds = np.empty(8)
        ds[0] = abs(x0)
        ds[1] = abs(x1)
        ds[2] = abs(y0)
        ds[3] = abs(y1)
        ds[4] = math.sqrt(x0 * x0 + y0 * y0)
        ds[5] = math.sqrt(x0 * x0 + y1 * y1)
        ds[6] = math.sqrt(x1 * x1 + y0 * y0)
        ds[7] = math.sqrt(x1 * x1 + y1 * y1)
        for d in ds:
            if d < R:
                zz = math.sqrt(R * R - d * d)
                for z in (zz, -zz):
                    if za < z < zb:
                        br[nb] = z
                        nb += 1
        pts = np.sort(br[:nb])
        tot = 0.0
        for s in range(nb - 1):
            u0 = pts[s]
            u1 = pts[s + 1]
            L = u1 - u0
            if L <= 0.0:
                continue
            acc = 0.0
            for q in range(tq.shape[0]):
                t = tq[q]
                z = u0 + L * 0.5 * (1.0 - math.cos(math.pi * t))
                dz = L * 0.5 * math.pi * math.sin(math.pi * t)
                rr = R * R - z * z
                rho = math.sqrt(rr) if rr > 0.0 else 0.0
                acc += wq[q] * dz * _phi_rect(rho, x0, x1, y0, y1)
            tot += acc
        return tot / R

    @njit(cache=True, parallel=True)
    def _omega_many(R, nb, tq, wq, out):
        for p in prange(nb.shape[0]):
            cx = 0.5 * nb[p, 0]
            cy = 0.5 * nb[p, 1]
            cz = 0.5 * nb[p, 2]
            out[p] = omega_box(R[p], cx - 0.5, cx + 0.5, cy - 0.5, cy + 0.5, cz - 0.5, cz + 0.5, tq, wq)


def _candidates(m):
    """n >= 0 with the parity of m whose cube [n/2 -+ 1/2] meets the sphere of radius |m|/2."""
    m = np.asarray(m)
    R = 0.5 * math.sqrt(float((m * m).sum()))
    top = int(2 * R + 3)
    axes = [np.arange(int(mi % 2), top + 1, 2) for mi in m]
    g = np.stack(np.meshgrid(*axes, indexing="ij"), -1).reshape(-1, 3)
    c = 0.5 * g
    dmin2 = (np.maximum(c - 0.5, 0.0) ** 2).sum(1)
    dmax2 = ((c + 0.5) ** 2).sum(1)
    keep = (dmin2 < R * R) & (dmax2 > R * R)
    return g[keep]


def _expand_half(n_pos: np.ndarray, w: np.ndarray):
    """n >= 0 entries -> all sign combinations, keep the half with first non-zero component > 0."""
    outs_n, outs_w = [], []
    for sx in (1, -1):
        for sy in (1, -1):
            for sz in (1, -1):
                s = np.array([sx, sy, sz])
                # a sign flip of a zero component is the same point: count it once
                ok = np.ones(len(n_pos), bool)
                for a, sa in enumerate(s):
                    if sa < 0:
                        ok &= n_pos[:, a] != 0
                nn = n_pos[ok] * s
                first = np.where(nn[:, 0] != 0, nn[:, 0], np.where(nn[:, 1] != 0, nn[:, 1], nn[:, 2]))
                keep = first > 0
                outs_n.append(nn[keep])
                outs_w.append(2.0 * w[ok][keep])
    return np.concatenate(outs_n), np.concatenate(outs_w)


@dataclass
class OmegaTable:
    """Half lists of (n, 2 Omega) for every sorted offset a >= b >= c >= 0, a < N.

    ``ptr[s]:ptr[s+1]`` are the entries of sorted offset ``s``; ``sorted_index[a, b, c]`` gives s.
    ``n`` is int8 (|n| <= 2|m| + 2 < 128 for N <= 36), ``w`` = 2 Omega (float64)."""

    N: int
    msorted: np.ndarray   # (S, 3)
    sorted_index: np.ndarray  # (N, N, N) int32, -1 where not sorted
    ptr: np.ndarray       # (S + 1,) int64
    n: np.ndarray         # (nnz, 3) int8
    w: np.ndarray         # (nnz,) float64

    @property
    def nnz(self) -> int:
        return int(self.ptr[-1])


def build_table(N: int, gl_order: int = GL_ORDER) -> OmegaTable:
    if N > 36:
        raise ValueError(f"collision coefficients: N={N} > 36 is not supported (int8 n)")
    ms = np.array([(a, b, c) for a in range(N) for b in range(a + 1) for c in range(b + 1)], dtype=np.int64)
    sidx = -np.ones((N, N, N), np.int32)
    sidx[ms[:, 0], ms[:, 1], ms[:, 2]] = np.arange(len(ms))
    cands, Rs, owner = [], [], []
    for s, m in enumerate(ms):
        if s == 0:  # m = 0: g = 0, no collisions
            cands.append(np.zeros((0, 3), np.int64))
            continue
        c = _candidates(m)
        cands.append(c)
        Rs.append(np.full(len(c), 0.5 * math.sqrt(float((m * m).sum()))))
        owner.append(np.full(len(c), s))
    allc = np.concatenate(cands[1:]) if len(ms) > 1 else np.zeros((0, 3), np.int64)
    allR = np.concatenate(Rs) if Rs else np.zeros(0)
    om = np.empty(len(allc))
    tq, wq = _gl(gl_order)
    if len(allc):
        _omega_many(allR, allc.astype(np.float64), tq, wq, om)
    ptr = [0]
    ns, ws = [], []
    pos = 0
    for s in range(len(ms)):
        k = len(cands[s])
        if k == 0:
            ptr.append(ptr[-1])
            continue
        npos, wpos = cands[s], om[pos:pos + k]
        pos += k
        keep = wpos > 0.0
        nh, wh = _expand_half(npos[keep], wpos[keep])
        ns.append(nh)
        ws.append(wh)
        ptr.append(ptr[-1] + len(nh))
    return OmegaTable(N=N, msorted=ms, sorted_index=sidx, ptr=np.array(ptr, np.int64),
                      n=np.concatenate(ns).astype(np.int8) if ns else np.zeros((0, 3), np.int8),
                      w=np.concatenate(ws) if ws else np.zeros(0))


def load_or_build(N: int, cache_dir=None, gl_order: int = GL_ORDER) -> OmegaTable:
    """The table for an N^3 mesh, from ``cache_dir/omega_N{N}_q{q}.h5`` when present (else built
    and written there atomically)."""
    if cache_dir is None:
        return build_table(N, gl_order)
    import h5py

    from solver.io import write_hdf5

    path = Path(cache_dir) / f"omega_N{N}_q{gl_order}.h5"
    if path.is_file():
        with h5py.File(path, "r") as f:
            ms = f["msorted"][...]
            sidx = -np.ones((N, N, N), np.int32)
            sidx[ms[:, 0], ms[:, 1], ms[:, 2]] = np.arange(len(ms))
            return OmegaTable(N=N, msorted=ms, sorted_index=sidx, ptr=f["ptr"][...], n=f["n"][...], w=f["w"][...])
    t = build_table(N, gl_order)
    write_hdf5(path, {"msorted": t.msorted, "ptr": t.ptr, "n": t.n, "w": t.w},
               attrs={"N": N, "gl_order": gl_order,
                      "meaning": "half lists (n, 2*Omega_{m,n}) per sorted offset m, cell units"},
               units={"w": "sr"})
    return t
