"""(a) brute-force checks of the discrete gain."""
import math, numpy as np, sys
from solver.backend import get_backend
from solver.collision.coeffs import load_or_build
from solver.collision.operator import CollisionOperator, VelocityGrid, maxwellian, hs_frequency_exact
be = get_backend("numba")
rng = np.random.default_rng(1)

def fib(nq):
    k = np.arange(nq) + 0.5
    z = 1 - 2 * k / nq; r = np.sqrt(1 - z * z); ph = math.pi * (1 + 5 ** 0.5) * k
    return np.stack([r * np.cos(ph), r * np.sin(ph), z], 1)

def fpc(grid, farr, v):
    idx = np.floor((v - np.array(grid.lower)) / grid.h).astype(int)
    ok = np.all((idx >= 0) & (idx < grid.N), axis=1)
    out = np.zeros(len(v)); ii = idx[ok]
    out[ok] = farr[ii[:, 0], ii[:, 1], ii[:, 2]]
    return out

# 1) A_{m,n} against a fine sphere quadrature with xi1 at the cell centres (what A means), tiny grid
N = 6; g = VelocityGrid.centred(N, 0.7, (0.1, -0.2, 0.05)); tab = load_or_build(N, "/tmp/cw/cache")
f = rng.random((N, N, N)) + 0.2
op = CollisionOperator(g, backend=be, table=tab)
G = op.gain(f)
X = np.stack(g.mesh(), -1).reshape(-1, 3); fl = f.reshape(-1)
S = fib(400000)
for ci in [0, 43, 107, 215]:
    xi = X[ci]; tot = 0.0
    for j in range(N ** 3):
        gv = xi - X[j]; gg = np.linalg.norm(gv)
        if gg == 0: continue
        c = 0.5 * (xi + X[j]); p = c + 0.5 * gg * S; p1 = 2 * c - p
        tot += g.h ** 3 * gg / 4 * 4 * math.pi * np.mean(fpc(g, f, p) * fpc(g, f, p1))
    print(f"A check cell {ci}: discrete {G.reshape(-1)[ci]:.10e} sphere-quadrature {tot:.10e} rel {G.reshape(-1)[ci]/tot-1:.2e}", flush=True)
