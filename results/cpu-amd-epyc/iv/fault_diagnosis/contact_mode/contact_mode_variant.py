"""Diagnosis only (docs/iv.md §9): contact_mode_diag.py with the inflow ghosts of weno_x changed.
    PYTHONPATH=. python contact_mode_variant.py VARIANT MESH V_G T_END_PS OUT.csv
VARIANT  r1:       ghosts a1 Phi(x_0) on inflow lines (the factor rho_eq/rho set to 1; nothing pins rho)
         additive: ghosts a1 [Phi(x_0) + (rho_eq - rho) s_w M] (the density deficit injected with the
                   start-up (Maxwellian) shape instead of rescaling every inflow line by rho_eq/rho)
The numba kernel is called with rho = rho_eq (factor 1) and, for `additive`, the extra ghost term is
added through a one-sided correction of the two boundary faces computed by the NumPy reference."""
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
        add0 = a1[nu][None] * d0[nu][:, None, None] * shape[nu][None, :, None]
        addL = a1[nu][None] * dL[nu][:, None, None] * shape[nu][None, :, None]
        gp[0:3] = np.where(in_l[nu][None], g[0] + add0, g[0])
        gp[NX + 3:] = np.where(in_r[nu][None], g[NX - 1] + addL, g[NX - 1])
        f = weno.weno5_faces(np, gp, 0, left[nu], eps_)
        np.subtract(f[1:], f[:-1], out=out[:, nu])
        out[:, nu] /= model.dx
    return out


weno.weno_x = weno_x_variant
sys.argv = [sys.argv[0].replace("contact_mode_variant", "contact_mode_diag")] + sys.argv[1:]
runpy.run_path(sys.argv[0], run_name="__main__")
