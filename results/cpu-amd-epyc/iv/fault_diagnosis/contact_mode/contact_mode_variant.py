"""Diagnosis only (docs/iv.md §9): contact_mode_diag.py with the inflow ghosts of weno_x changed.
    PYTHONPATH=. python contact_mode_variant.py VARIANT MESH V_G T_END_PS OUT.csv
VARIANT  r1:       ghosts a1 Phi(x_0) on inflow lines (the factor rho_eq/rho set to 1; nothing pins rho)
         additive: ghosts a1 [Phi(x_0) + (rho_eq - rho) s_w M] (the density deficit injected with the
                   start-up (Maxwellian) shape instead of rescaling every inflow line by rho_eq/rho)
         additive_clip: the same with the ghost Phi value clipped at 0
         hybrid:   a1 [min(r, 1) Phi(x_0) + max(rho_eq - rho, 0) s_w M]: an excess is removed by the authors'
                   factor (r < 1 damps), a deficit is injected with the start-up shape (no gain)
r1 calls the numba kernel with rho = rho_eq (factor 1); the additive variants use the NumPy reference
operator (weno.weno5_faces) with their own ghosts."""
import runpy, sys
import numpy as np
from solver.bsp import weno

VARIANT = sys.argv.pop(1)
orig = weno.weno_x


def weno_x_variant(model, backend, Phi, rho_eq0, rho_eqL, rho0, rhoL, closed=False, eps=None):
    if closed or VARIANT == "control":
        return orig(model, backend, Phi, rho_eq0, rho_eqL, rho0, rhoL, closed=closed, eps=eps)
    if VARIANT == "r1":
        return orig(model, backend, Phi, rho_eq0, rho_eqL, rho_eq0, rho_eqL, closed=closed, eps=eps)
    # additive: reference NumPy operator with modified ghosts
    xp = np
    eps_ = weno._eps(model) if eps is None else eps
    Phi = np.asarray(Phi)
    NX = Phi.shape[0]
    a1 = model.a1
    in_l, in_r, left = weno._phi_masks(model)
    shape = model.s_w * model.maxwellian  # (3, NW)
    d0 = np.asarray(rho_eq0) - np.asarray(rho0)
    dL = np.asarray(rho_eqL) - np.asarray(rhoL)
    out = np.empty_like(Phi)
    for nu in range(Phi.shape[1]):
        gp = np.empty((NX + 6,) + Phi.shape[2:])
        g = gp[3:NX + 3]
        np.multiply(Phi[:, nu], a1[nu], out=g)
        pl = Phi[0, nu] + d0[nu][:, None, None] * shape[nu][None, :, None]  # ghost Phi (N_sbn, NW, NPHI)
        pr = Phi[-1, nu] + dL[nu][:, None, None] * shape[nu][None, :, None]
        if VARIANT == "hybrid":
            r0 = np.minimum(np.asarray(rho_eq0) / np.asarray(rho0), 1.0)[nu][:, None, None]
            rL = np.minimum(np.asarray(rho_eqL) / np.asarray(rhoL), 1.0)[nu][:, None, None]
            pl = r0 * Phi[0, nu] + np.maximum(d0[nu], 0.0)[:, None, None] * shape[nu][None, :, None]
            pr = rL * Phi[-1, nu] + np.maximum(dL[nu], 0.0)[:, None, None] * shape[nu][None, :, None]
        if VARIANT == "additive_clip":
            pl, pr = np.maximum(pl, 0.0), np.maximum(pr, 0.0)
        gp[0:3] = np.where(in_l[nu][None], a1[nu][None] * pl, g[0])
        gp[NX + 3:] = np.where(in_r[nu][None], a1[nu][None] * pr, g[NX - 1])
        f = weno.weno5_faces(np, gp, 0, left[nu], eps_)
        np.subtract(f[1:], f[:-1], out=out[:, nu])
        out[:, nu] /= model.dx
    return out


weno.weno_x = weno_x_variant
sys.argv = [sys.argv[0].replace("contact_mode_variant", "contact_mode_diag")] + sys.argv[1:]
runpy.run_path(sys.argv[0], run_name="__main__")
