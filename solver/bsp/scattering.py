"""Electron-phonon scattering: overlap integrals, gain and loss (physics.md §6; phases
``overlap``, ``scat_gain``, ``scat_loss``).

Every mechanism mu and valley pair (nu -> nu') contributes *branches* with an energy offset
sigma (Gamma = w + eps_{nu,p} - eps_{nu',p'} + sigma), a loss weight and a gain weight:

| kind     | nu'          | prefactor | branches (sigma, loss weight, gain weight)                          |
|----------|--------------|-----------|---------------------------------------------------------------------|
| acoustic | nu           | C_0       | (0, 1, 1)                                                           |
| g        | nu           | C_mu      | (+x_mu, N, N + 1), (-x_mu, N + 1, N)                                 |
| f        | each nu'!=nu | 2 C_mu    | (+x_mu, N^{nu->nu'}, N^{nu'->nu} + 1), (-x_mu, N^{nu->nu'} + 1, N^{nu'->nu}) |

    loss coefficient  Lc_{nu,p}(x, w) = 2 pi sum_branches pref * lw sum_{p'} W_{np,n'p'} s_nu'(Gamma) H(Gamma)
    gain              G_{nu,p}(x, w)  = s_nu(w) sum_branches pref * gw sum_{p'} W_{np,n'p'} PhiHat_{nu',p'}(Gamma)

and the BTE source is G - Lc Phi (loss without upper cut-off; gain isotropic in phi).

PhiHat at an off-grid energy: with r = Gamma/dw - 1/2 (computed as l + (Gamma - w_l)/dw so that
on-grid energies are hit exactly), l_d = trunc(r) toward zero, linear interpolation between
l_d and l_d + 1 (extrapolation from w_0, w_1 for 0 <= Gamma < w_0); zero if Gamma < 0 or
l_d > NW - 2.  One deliberate detail: an energy that lands *exactly* on the top node w_{NW-1}
(r = NW - 1 exactly; in practice only the elastic intrasubband term) takes PhiHat(w_{NW-1}),
which keeps the elastic intrasubband term exactly conservative as physics.md §6 states.

Shapes: chi (NX, 3, N_sbn, NZ); W (NX, 3, N_sbn, 3, N_sbn); eps (NX, 3, N_sbn);
PhiHat (NX, 3, N_sbn, NW); Phi (NX, 3, N_sbn, NW, NPHI).  Work is vectorised over
(i, p, p', l); Python loops run over valleys and mechanism branches (about 57).
"""
from __future__ import annotations

import math

from solver.bsp import kernels as _kernels

N_VALLEYS = 3


# ---------------------------------------------------------------------------- overlap
def overlap(model, backend, chi):
    """W_{(nu,p),(nu',p')}(x) = dz sum_{j=1}^{NZ-2} chi_{nu,p}^2 chi_{nu',p'}^2, (NX, 3, N_sbn, 3, N_sbn).
    The fast path (phase key ``overlap``; cupy with numerics.bte_kernels fast, also inside
    numerics.bte_graph's stage) forms it by one kernel (kernels/cuda/scattering.py: one launch
    instead of CuPy's matmul and two elementwise passes; equal to rounding: the sum over z in the
    order j = 1 .. NZ-2 instead of the BLAS's)."""
    fast = _kernels.lookup(model, backend, "overlap")
    if fast is not None:
        return fast(model, backend, chi)
    xp = backend.xp
    NX, NV, NS, NZ = chi.shape
    c2 = chi[..., 1:NZ - 1] ** 2
    c2 = c2.reshape(NX, NV * NS, NZ - 2)
    W = xp.matmul(c2, xp.swapaxes(c2, 1, 2))
    W *= model.dz
    return W.reshape(NX, NV, NS, NV, NS)


# ---------------------------------------------------------------------------- branch table
def branches(model, mechanisms=None):
    """Host table: for each target valley nu, a list of (mu, nu', sigma, pref * loss weight,
    pref * gain weight).  ``mechanisms``: subset of mechanism indices (None = all)."""
    C = model.phonon_C
    x = model.phonon_x
    out = {nu: [] for nu in range(N_VALLEYS)}
    for mu, ph in enumerate(model.phonons):
        if mechanisms is not None and mu not in mechanisms:
            continue
        kind = ph["kind"]
        for nu in range(N_VALLEYS):
            if kind == "acoustic":
                out[nu].append((mu, nu, 0.0, C[mu], C[mu]))
            elif kind == "g":
                N = float(model.occupation(mu))
                out[nu].append((mu, nu, x[mu], C[mu] * N, C[mu] * (N + 1.0)))
                out[nu].append((mu, nu, -x[mu], C[mu] * (N + 1.0), C[mu] * N))
            elif kind == "f":
                occ = model.occupation(mu)  # [a, b] = N^{a->b}
                for nu2 in range(N_VALLEYS):
                    if nu2 == nu:
                        continue
                    Nl, Ng = float(occ[nu, nu2]), float(occ[nu2, nu])
                    c = 2.0 * C[mu]
                    out[nu].append((mu, nu2, x[mu], c * Nl, c * (Ng + 1.0)))
                    out[nu].append((mu, nu2, -x[mu], c * (Nl + 1.0), c * Ng))
            else:  # pragma: no cover - the schema forbids it
                raise ValueError(f"unknown phonon kind {kind!r}")
    return out


def _delta(eps, nu, nu2, sigma):
    """eps_{nu,p} - eps_{nu',p'} + sigma, shape (NX, N_sbn, N_sbn, 1)."""
    return (eps[:, nu, :, None] - eps[:, nu2, None, :] + sigma)[..., None]


# ---------------------------------------------------------------------------- loss
def scat_loss(model, backend, eps, W, mechanisms=None):
    """Lc (NX, 3, N_sbn, NW): the loss is Lc[..., None] * Phi."""
    fast = _kernels.lookup(model, backend, "scat_loss")
    if fast is not None:
        return fast(model, backend, eps, W, mechanisms)
    xp = backend.xp
    NX, NV, NS = eps.shape
    w = model.on(backend, "w")  # (NW,)
    al = model.alpha
    smm = model.sqrt_mxmy
    Lc = xp.zeros((NX, NV, NS, model.NW), dtype=eps.dtype)
    for nu, brs in branches(model, mechanisms).items():
        for mu, nu2, sigma, lw, gw in brs:
            G = _delta(eps, nu, nu2, sigma) + w  # Gamma (NX, p, p', NW)
            sH = xp.where(G >= 0.0, 1.0 + 2.0 * al * G, 0.0)
            coef = (2.0 * math.pi * lw * smm[nu2]) * W[:, nu, :, nu2, :]  # (NX, p, p')
            Lc[:, nu] += xp.einsum("ipq,ipql->ipl", coef, sH)
    return Lc


def loss(model, backend, Phi, eps, W, mechanisms=None):
    """L = Lc Phi, shape of Phi."""
    return scat_loss(model, backend, eps, W, mechanisms)[..., None] * Phi


# ---------------------------------------------------------------------------- gain
def interpolate(model, backend, PH, delta):
    """PhiHat_{p'}(Gamma) for Gamma = w_l + delta[i, p, p'] (physics.md §6 rule).

    PH: (NX, N_sbn, NW) PhiHat of the final valley; delta: (NX, N_sbn, N_sbn, 1).
    Returns (NX, N_sbn(p), N_sbn(p'), NW).
    """
    xp = backend.xp
    NX, NS, NW = PH.shape
    l = xp.arange(NW, dtype=PH.dtype)
    r = delta * (1.0 / model.dw) + l  # Gamma/dw - 1/2
    ld = xp.trunc(r)
    valid = (r >= -0.5) & ((ld <= NW - 2) | (r == NW - 1))
    ldc = xp.clip(ld, 0, NW - 2)
    t = r - ldc
    base = (xp.arange(NX)[:, None, None, None] * NS + xp.arange(NS)[None, None, :, None]) * NW
    idx = base + ldc.astype(xp.int64)
    flat = PH.reshape(-1)
    f0 = flat[idx]
    f1 = flat[idx + 1]
    f1 -= f0
    f1 *= t
    f1 += f0
    return xp.where(valid, f1, 0.0)


def scat_gain(model, backend, PhiHat, eps, W, mechanisms=None):
    """Isotropic gain G (NX, 3, N_sbn, NW); broadcast over phi as G[..., None]."""
    fast = _kernels.lookup(model, backend, "scat_gain")
    if fast is not None:
        return fast(model, backend, PhiHat, eps, W, mechanisms)
    xp = backend.xp
    NX, NV, NS = eps.shape
    s_w = model.on(backend, "s_w")  # (3, NW)
    G = xp.zeros((NX, NV, NS, model.NW), dtype=PhiHat.dtype)
    for nu, brs in branches(model, mechanisms).items():
        for mu, nu2, sigma, lw, gw in brs:
            vals = interpolate(model, backend, PhiHat[:, nu2], _delta(eps, nu, nu2, sigma))
            coef = gw * W[:, nu, :, nu2, :]
            G[:, nu] += xp.einsum("ipq,ipql->ipl", coef, vals)
        G[:, nu] *= s_w[nu]
    return G


# ---------------------------------------------------------------------------- combined
def scattering(model, backend, Phi, PhiHat, eps, W, mechanisms=None):
    """Collision source G - L, shape of Phi."""
    G = scat_gain(model, backend, PhiHat, eps, W, mechanisms)
    Lc = scat_loss(model, backend, eps, W, mechanisms)
    out = Lc[..., None] * Phi
    xp = backend.xp
    xp.subtract(G[..., None], out, out=out)
    return out
