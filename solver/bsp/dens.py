"""DENS: densities of the distribution (physics.md §4, §9; phase DENS).

Plain rectangle sums over the NW half-shifted energy nodes (weight dw) and the NPHI angles
(weight dphi):

    PhiHat_{nu,p}(x, w_l) = dphi sum_m Phi            (NX, 3, N_sbn, NW)
    rho_{nu,p}(x)         = dw dphi sum_{l,m} Phi     (NX, 3, N_sbn)
    j(x)                  = 2 sum_{nu,p} dw dphi sum_{l,m} a1 Phi   (NX,)

The volume density N(x, z) = 2 sum rho chi^2 lives with the Schroedinger-Poisson block
(``poisson.volume_density``).
"""
from __future__ import annotations

from solver.bsp import kernels as _kernels


def dens(model, backend, Phi):
    """(rho (NX, 3, N_sbn), PhiHat (NX, 3, N_sbn, NW)) of ``Phi`` (NX, 3, N_sbn, NW, NPHI)."""
    PhiHat = Phi.sum(axis=-1)
    PhiHat *= model.dphi
    rho = PhiHat.sum(axis=-1)
    rho *= model.dw
    return rho, PhiHat


def current_subband(model, backend, Phi):
    """Subband currents dw dphi sum_{l,m} a1 Phi, shape (NX, 3, N_sbn) (no valley factor 2)."""
    xp = backend.xp
    a1 = model.on(backend, "a1")  # (3, NW, NPHI)
    NX, NV, NS, NW, NPHI = Phi.shape
    P = Phi.reshape(NX, NV, NS, NW * NPHI)
    j = xp.einsum("inpk,nk->inp", P, a1.reshape(NV, NW * NPHI))
    return j * (model.dw * model.dphi)


def current(model, backend, Phi):
    """Surface current j(x) = 2 sum_{nu,p} int int a1 Phi dw dphi, shape (NX,)."""
    return 2.0 * current_subband(model, backend, Phi).sum(axis=(1, 2))


def density_probe(model, backend, rho):
    """The two numbers of the stage's density check (Simulation._check_density), on their way to the host
    (Backend.to_host_async; ``.result()``: NumPy [sum_x N_s(x), min_x N_s(x)]), N_s(x) = rho summed over
    valleys and subbands.  A fast path (``kernels.lookup(..., "density_probe")``, CUDA: one launch) gives
    the same numbers to rounding (the sum's order)."""
    fast = _kernels.lookup(model, backend, "density_probe")
    if fast is not None:
        return fast(model, backend, rho)
    xp = backend.xp
    total = rho.sum(axis=(1, 2))
    return backend.to_host_async(xp.stack([xp.sum(total), xp.min(total)]))


def scalars_probe(model, backend, rho, Phi):
    """The numbers of a scalars row and the steady monitor (Simulation.scalar_fields), on the host in one
    transfer: NumPy [rho_x (NX), j_x (NX), min, max], rho_x = rho summed over valleys and subbands, j_x = the
    subband currents (current_subband, Simulation.host_fields' j_sub) summed likewise, and the min and max
    of Phi on the two contact nodes (output.contact_lines).  A fast path (``kernels.lookup(...,
    "scalars_probe")``, CUDA: one launch) gives the same numbers to rounding (the sums' order); the array
    code costs CuPy's host ~0.7 ms per row (einsum, sums, concatenate), the fast path one launch and one read."""
    fast = _kernels.lookup(model, backend, "scalars_probe")
    if fast is not None:
        return fast(model, backend, rho, Phi)
    from solver.bsp import output

    xp = backend.xp
    return backend.to_numpy(xp.concatenate([rho.sum(axis=(1, 2)), current_subband(model, backend, Phi).sum(axis=(1, 2)),
                                            output.contact_lines(xp, Phi)]))
