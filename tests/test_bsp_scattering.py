"""Phonon scattering (physics.md §6, §10): overlap integrals, gain and loss against a scalar
implementation of the formulas, conservation of the elastic intrasubband term, the inelastic
imbalance bound and its shrinking with NW, detailed balance of the Bose-Einstein equilibrium."""
import math

import numpy as np
import pytest

from solver.backend import get_backend
from solver.bsp import dens, scattering
from solver.bsp.model import Model, load

NP_BE = get_backend("numpy")


def model(NX=9, NS=2, NW=12, NPHI=4, NZ=17, extra=()):
    return Model(load(None, [f"mesh.NX={NX}", f"mesh.N_sbn={NS}", f"mesh.NW={NW}", f"mesh.NPHI={NPHI}",
                             f"mesh.NZ={NZ}", *extra]))


def sine_chi(m):
    chi = np.zeros((m.NX, 3, m.N_sbn, m.NZ))
    for p in range(m.N_sbn):
        chi[:, :, p, :] = np.sin((p + 1) * math.pi * m.z)
    chi /= np.sqrt(m.dz * (chi**2).sum(-1, keepdims=True))
    return chi


def equilibrium(m, levels):
    """Global Maxwellian: rho_{nu,p} = sqrt(m_x m_y) e^{-eps}, Phi = s_nu(w) rho M_nu(w), isotropic."""
    eps = np.broadcast_to(levels, (m.NX, 3, m.N_sbn)).copy()
    rho = m.sqrt_mxmy[None, :, None] * np.exp(-eps)
    Phi = rho[..., None, None] * (m.s_w * m.maxwellian)[None, :, None, :, None] * np.ones(m.NPHI)
    return eps, Phi


LEVELS = np.array([[0.0, 2.5, 7.0], [0.0, 2.5, 7.0], [-1.2, 0.9, 4.4]])  # flat levels (3, 3)


# ---------------------------------------------------------------------------- overlap
def test_overlap_sines_known_answer():
    """chi_p = sqrt(2) sin((p+1) pi z) (discretely normalised): W = 1 (p != p'), 3/2 (p = p')."""
    m = model(NS=3)
    W = scattering.overlap(m, NP_BE, sine_chi(m))
    ref = np.ones((3, 3, 3, 3))
    for nu in range(3):
        for nu2 in range(3):
            ref[nu, :, nu2, :] += 0.5 * np.eye(3)
    np.testing.assert_allclose(W, np.broadcast_to(ref, W.shape), rtol=1e-13)


def test_overlap_uses_interior_nodes(rng):
    m = model(NS=2)
    chi = rng.standard_normal((m.NX, 3, 2, m.NZ))
    W = scattering.overlap(m, NP_BE, chi)
    c = chi[..., 1:-1] ** 2
    ref = m.dz * np.einsum("inpj,imqj->inpmq", c, c)
    np.testing.assert_allclose(W, ref, rtol=1e-13)


# ---------------------------------------------------------------------------- scalar reference
def occupation_ref(m, mu, kind, ordered):
    x = m.phonon_x[mu]
    be = 1.0 / math.expm1(x)
    if kind != "f":
        return be
    if not ordered:
        return np.full((3, 3), be)
    k = m.sqrt_mxmy * (1 + 2 * m.alpha)
    R = k[:, None] / k[None, :]
    ex = math.exp(x)
    return (R * ex + 1) / ((ex + 1) * (ex - 1))


def reference_gain_loss(m, PhiHat, eps, W, ordered=True):
    """Literal physics.md §6 with Python scalars: (G, Lc), each (NX, 3, N_sbn, NW)."""
    NX, NS, NW, dw = m.NX, m.N_sbn, m.NW, m.dw
    s = lambda nu, G: m.sqrt_mxmy[nu] * (1 + 2 * m.alpha * G)  # noqa: E731
    H = lambda G: 1.0 if G >= 0 else 0.0  # noqa: E731

    def PH(i, nu, p, G, l_own):
        if G < 0:
            return 0.0
        r = G / dw - 0.5
        ld = int(r)  # toward zero
        if abs(r - (NW - 1)) < 1e-9:  # exactly on the top node (documented in scattering.py)
            return PhiHat[i, nu, p, NW - 1]
        if ld > NW - 2:
            return 0.0
        t = r - ld
        return (1 - t) * PhiHat[i, nu, p, ld] + t * PhiHat[i, nu, p, ld + 1]

    G_out = np.zeros((NX, 3, NS, NW))
    L_out = np.zeros((NX, 3, NS, NW))
    C, X = m.phonon_C, m.phonon_x
    for i in range(NX):
        for nu in range(3):
            for p in range(NS):
                for l in range(NW):
                    w = m.w[l]
                    loss = gain = 0.0
                    for mu, ph in enumerate(m.phonons):
                        kind, x = ph["kind"], X[mu]
                        if kind == "f":
                            occ = occupation_ref(m, mu, "f", ordered)
                        elif kind == "g":
                            N = occupation_ref(m, mu, "g", ordered)
                        for p2 in range(NS):
                            if kind == "acoustic":
                                G0 = w + eps[i, nu, p] - eps[i, nu, p2]
                                Wv = W[i, nu, p, nu, p2]
                                loss += 2 * math.pi * C[mu] * Wv * s(nu, G0) * H(G0)
                                gain += C[mu] * Wv * PH(i, nu, p2, G0, l)
                            elif kind == "g":
                                G0 = w + eps[i, nu, p] - eps[i, nu, p2]
                                Wv = W[i, nu, p, nu, p2]
                                loss += 2 * math.pi * C[mu] * Wv * (N * s(nu, G0 + x) * H(G0 + x)
                                                                    + (N + 1) * s(nu, G0 - x) * H(G0 - x))
                                gain += C[mu] * Wv * ((N + 1) * PH(i, nu, p2, G0 + x, l) + N * PH(i, nu, p2, G0 - x, l))
                            else:
                                for nu2 in range(3):
                                    if nu2 == nu:
                                        continue
                                    Gp = w + eps[i, nu, p] - eps[i, nu2, p2]
                                    Wv = W[i, nu, p, nu2, p2]
                                    Nl, Ng = occ[nu, nu2], occ[nu2, nu]
                                    loss += 2 * math.pi * 2 * C[mu] * Wv * (
                                        Nl * s(nu2, Gp + x) * H(Gp + x) + (Nl + 1) * s(nu2, Gp - x) * H(Gp - x))
                                    gain += 2 * C[mu] * Wv * ((Ng + 1) * PH(i, nu2, p2, Gp + x, l)
                                                              + Ng * PH(i, nu2, p2, Gp - x, l))
                    G_out[i, nu, p, l] = s(nu, w) * gain
                    L_out[i, nu, p, l] = loss
    return G_out, L_out


@pytest.mark.parametrize("occupation", ["reference", "bose_einstein"])
def test_gain_and_loss_match_scalar_reference(rng, occupation):
    m = model(NX=9, NS=2, NW=12, NPHI=4, extra=[f"physics.occupation={occupation}"])
    eps = rng.uniform(-4, 4, (m.NX, 3, 2))
    chi = rng.standard_normal((m.NX, 3, 2, m.NZ))
    W = scattering.overlap(m, NP_BE, chi)
    Phi = rng.random(m.shape)
    _, PhiHat = dens.dens(m, NP_BE, Phi)
    Gr, Lr = reference_gain_loss(m, PhiHat, eps, W, ordered=occupation == "reference")
    G = scattering.scat_gain(m, NP_BE, PhiHat, eps, W)
    Lc = scattering.scat_loss(m, NP_BE, eps, W)
    np.testing.assert_allclose(G, Gr, rtol=1e-12, atol=1e-14 * np.abs(Gr).max())
    np.testing.assert_allclose(Lc, Lr, rtol=1e-12)
    S = scattering.scattering(m, NP_BE, Phi, PhiHat, eps, W)
    np.testing.assert_allclose(S, Gr[..., None] - Lr[..., None] * Phi, rtol=1e-12, atol=1e-13 * np.abs(S).max())
    np.testing.assert_allclose(scattering.loss(m, NP_BE, Phi, eps, W), Lr[..., None] * Phi, rtol=1e-12)


def test_interpolation_rule_edges():
    """l_d = trunc(Gamma/dw - 1/2): extrapolation below w_0, zero for Gamma < 0 and l_d > NW - 2."""
    m = model(NX=9, NS=1, NW=8)
    NW, dw = m.NW, m.dw
    PH = np.tile(np.arange(NW, dtype=float) ** 2, (m.NX, 1, 1))  # (NX, 1, NW)
    deltas = np.array([-m.w[0] - 0.25 * dw,  # Gamma < 0 at l = 0
                       -0.25 * dw,  # Gamma = w_0 - dw/4 at l = 0: extrapolation
                       0.3 * dw,
                       dw])
    vals = []
    for d in deltas:
        v = scattering.interpolate(m, NP_BE, PH, np.full((m.NX, 1, 1, 1), d))
        vals.append(v[0, 0, 0])
    vals = np.array(vals)
    # delta = -w_0 - dw/4: l = 0 gives Gamma < 0 -> 0; l = 1: Gamma = 3 dw/4, r = 1/4 -> 0 + (1/4)(1 - 0)
    assert vals[0, 0] == 0.0
    assert vals[0, 1] == pytest.approx(0.25)
    # extrapolation at l = 0: r = -0.25, PH = 0 + (-0.25)(1 - 0)
    assert vals[1, 0] == pytest.approx(-0.25)
    # delta = 0.3 dw at l = NW - 2: r = NW - 1.7 -> between NW - 2 and NW - 1; at l = NW - 1: r > NW - 1 -> l_d = NW - 1 -> 0
    assert vals[2, NW - 2] == pytest.approx((NW - 2) ** 2 + 0.3 * ((NW - 1) ** 2 - (NW - 2) ** 2))
    assert vals[2, NW - 1] == 0.0
    # delta = dw: node shift; l = NW - 2 lands on the top node exactly
    np.testing.assert_allclose(vals[3, :NW - 1], np.arange(1, NW) ** 2.0, rtol=1e-12)


# ---------------------------------------------------------------------------- conservation
def _mass(m, X):
    return X.sum() * m.dw * m.dphi


def test_elastic_intrasubband_conserves_mass(rng):
    m = model(NX=9, NS=3, NW=40, NPHI=16)
    eps = rng.uniform(-3, 3, (m.NX, 3, 3))
    W = scattering.overlap(m, NP_BE, sine_chi(m))
    Wd = np.zeros_like(W)
    for nu in range(3):
        for p in range(3):
            Wd[:, nu, p, nu, p] = W[:, nu, p, nu, p]
    Phi = rng.random(m.shape)  # anisotropic, rough, nonzero up to w_max
    _, PH = dens.dens(m, NP_BE, Phi)
    S = scattering.scattering(m, NP_BE, Phi, PH, eps, Wd, mechanisms=[0])
    L = scattering.loss(m, NP_BE, Phi, eps, Wd, mechanisms=[0])
    # per (x, valley, subband): the elastic intrasubband term only redistributes in angle
    per_sub = S.sum(axis=(3, 4)) / L.sum(axis=(3, 4))
    assert np.abs(per_sub).max() < 1e-14, np.abs(per_sub).max()
    assert np.abs(S).max() > 1e-2 * np.abs(L).max()  # it does act


def inelastic_imbalance(NW, mechanisms=range(1, 7)):
    """Relative imbalance |sum G - sum L| / sum L per inelastic mechanism on the equilibrium."""
    m = model(NX=9, NS=3, NW=NW, NPHI=4, extra=["physics.occupation=bose_einstein"])
    eps, Phi = equilibrium(m, LEVELS)
    W = scattering.overlap(m, NP_BE, sine_chi(m))
    _, PH = dens.dens(m, NP_BE, Phi)
    out = []
    for mu in mechanisms:
        G = scattering.scat_gain(m, NP_BE, PH, eps, W, [mu])
        Lc = scattering.scat_loss(m, NP_BE, eps, W, [mu])
        gm = G.sum() * m.NPHI
        lm = (Lc[..., None] * Phi).sum()
        out.append(abs(gm - lm) / lm)
    return np.array(out), m.dw


def test_inelastic_imbalance_bound_shrinks_with_NW():
    """physics.md §6: O(dw) boundary effects, 1e-3 to 1e-2 of each inelastic flux at the standard
    dw (NW = 300); bound: <= 1e-2 there, and the worst mechanism shrinks at least ~ dw as NW doubles."""
    res = {NW: inelastic_imbalance(NW) for NW in (75, 150, 300)}
    worst = np.array([res[NW][0].max() for NW in (75, 150, 300)])
    assert worst[-1] <= 1e-2, worst
    assert (res[300][0] <= res[75][0]).all(), res
    assert worst[1] <= 0.6 * worst[0] and worst[2] <= 0.6 * worst[1], worst


def test_equilibrium_collision_residual_shrinks_bose_einstein():
    """Detailed balance: the Bose-Einstein Maxwellian is stationary up to the energy mesh error."""
    resid = []
    for NW in (40, 80, 160, 320):
        m = model(NX=9, NS=3, NW=NW, NPHI=4, extra=["physics.occupation=bose_einstein"])
        eps, Phi = equilibrium(m, LEVELS)
        W = scattering.overlap(m, NP_BE, sine_chi(m))
        _, PH = dens.dens(m, NP_BE, Phi)
        S = scattering.scattering(m, NP_BE, Phi, PH, eps, W)
        L = scattering.loss(m, NP_BE, Phi, eps, W)
        resid.append(np.abs(S).max() / np.abs(L).max())
    resid = np.array(resid)
    assert (np.diff(resid) < 0).all(), resid
    assert resid[-1] < 0.05 * resid[0], resid
    # the reference's valley-ordered f-type occupations break detailed balance
    m = model(NX=9, NS=3, NW=320, NPHI=4)
    eps, Phi = equilibrium(m, LEVELS)
    W = scattering.overlap(m, NP_BE, sine_chi(m))
    _, PH = dens.dens(m, NP_BE, Phi)
    S = scattering.scattering(m, NP_BE, Phi, PH, eps, W)
    L = scattering.loss(m, NP_BE, Phi, eps, W)
    assert np.abs(S).max() / np.abs(L).max() > 10 * resid[-1]


# ---------------------------------------------------------------------------- GPU
@pytest.mark.gpu
def test_cupy_matches_numpy_scattering(cupy_backend, rng):
    cp = cupy_backend.xp
    m = model(NX=17, NS=3, NW=40, NPHI=16)
    eps = rng.uniform(-4, 4, (m.NX, 3, 3))
    chi = rng.standard_normal((m.NX, 3, 3, m.NZ))
    Phi = rng.random(m.shape)
    W = scattering.overlap(m, NP_BE, chi)
    Wg = scattering.overlap(m, cupy_backend, cp.asarray(chi))
    np.testing.assert_allclose(cp.asnumpy(Wg), W, rtol=1e-12)
    _, PH = dens.dens(m, NP_BE, Phi)
    ge, gPH, gPhi = cp.asarray(eps), cp.asarray(PH), cp.asarray(Phi)
    a = scattering.scat_gain(m, NP_BE, PH, eps, W)
    b = scattering.scat_gain(m, cupy_backend, gPH, ge, Wg)
    np.testing.assert_allclose(cp.asnumpy(b), a, rtol=1e-12, atol=1e-14 * np.abs(a).max())
    a = scattering.scat_loss(m, NP_BE, eps, W)
    b = scattering.scat_loss(m, cupy_backend, ge, Wg)
    np.testing.assert_allclose(cp.asnumpy(b), a, rtol=1e-12)
    a = scattering.scattering(m, NP_BE, Phi, PH, eps, W)
    b = scattering.scattering(m, cupy_backend, gPhi, gPH, ge, Wg)
    np.testing.assert_allclose(cp.asnumpy(b), a, rtol=1e-12, atol=1e-13 * np.abs(a).max())
