import math, numpy as np, time
from solver.backend import get_backend
from solver.collision.coeffs import load_or_build
from solver.collision.operator import CollisionOperator, maxwellian, hs_frequency_exact
from solver.collision.relax import paper_grid
from mc import fpc
be = get_backend("numba"); rng = np.random.default_rng(2)
N, h, T, u = 16, 0.5, 1.0, np.array([0.25, 0.25, 0.0])
g = paper_grid(N, h); tab = load_or_build(N, "/tmp/cw/cache")
op = CollisionOperator(g, backend=be, table=tab)
M = maxwellian(g, 1.0, u, T)
t0 = time.time(); G = op.gain(M); print("gain", time.time() - t0, flush=True)
Xs = g.mesh(); c = np.sqrt(sum((Xs[a] - u[a]) ** 2 for a in range(3)))
ex = M * hs_frequency_exact(c, 1.0, T)
sel = M > 0.1 * M.max()
r = G / ex - 1
print(f"16^3 h=0.5 T=1 bulk cells {sel.sum()} gain err max {np.abs(r[sel]).max():.4f} mean {np.abs(r[sel]).mean():.4f} "
      f"min {r[sel].min():.4f} maxsigned {r[sel].max():.4f}; L1 rel sum|G-ex|/sum ex {np.abs(G-ex).sum()/ex.sum():.4f}; total sumG/sum ex-1 {G.sum()/ex.sum()-1:.4f}")
def Mex(v): return (math.pi * T) ** -1.5 * np.exp(-((v - u) ** 2).sum(1) / T)
def cont_gain(xi, F, ns=4_000_000, s=1.0):
    acc = []
    for _ in range(8):
        x1 = u + s * rng.standard_normal((ns // 8, 3))
        q = (2 * math.pi * s * s) ** -1.5 * np.exp(-((x1 - u) ** 2).sum(1) / (2 * s * s))
        gv = xi - x1; gg = np.linalg.norm(gv, axis=1)
        w = rng.standard_normal((len(x1), 3)); w /= np.linalg.norm(w, axis=1)[:, None]
        cc = 0.5 * (xi + x1); p = cc + 0.5 * gg[:, None] * w; p1 = 2 * cc - p
        acc.append(gg / 4 * 4 * math.pi * F(p) * F(p1) / q)
    a = np.concatenate(acc); return a.mean(), a.std() / math.sqrt(len(a))
Fpc = lambda v: fpc(g, M, v)
ic = N // 2  # cell centred on u
for k in [0, 1, 2, 3]:
    idx = (ic + k, ic, ic); xi = np.array([Xs[a][idx] for a in range(3)])
    ce, se = cont_gain(xi, Mex); cp, sp = cont_gain(xi, Fpc)
    print(f"|c|={c[idx]:.2f}: exact M nu {ex[idx]:.5e} | MC cont. exact-M {ce:.5e}+-{se/ce:.1e} | MC cont.-xi1 pc-M {cp:.5e}+-{sp/cp:.1e} "
          f"(rel to exact {cp/ex[idx]-1:+.4f}) | discrete {G[idx]:.5e} (rel {G[idx]/ex[idx]-1:+.4f})", flush=True)
