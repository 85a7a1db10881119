import math, sys, numpy as np, json
from scipy.special import erf
from solver.backend import get_backend
from solver.collision.coeffs import load_or_build
from solver.collision.operator import CollisionOperator, VelocityGrid, maxwellian, hs_frequency_exact
from solver.collision.relax import paper_grid
be = get_backend("numba")
N, h, T = int(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3])
u = (0.25, 0.25, 0.0)
g = paper_grid(N, h)
op = CollisionOperator(g, "hard_spheres", be, table=load_or_build(N, "/tmp/cw/cache"))
def avg1(a):
    x = g.axis(a); lo, hi = x - h/2, x + h/2
    return (erf((hi-u[a])/math.sqrt(T)) - erf((lo-u[a])/math.sqrt(T))) / (2*h)
fa = np.einsum("i,j,k->ijk", avg1(0), avg1(1), avg1(2))
fc = maxwellian(g, 1.0, u, T)
xq, wq = np.polynomial.legendre.leggauss(6); xq *= h/2; wq /= 2
ex_avg = np.zeros_like(fc); X = g.mesh()
for a, wa in zip(xq, wq):
  for b, wb in zip(xq, wq):
    for c, wc in zip(xq, wq):
      P = [X[0]+a-u[0], X[1]+b-u[1], X[2]+c]
      cc = np.sqrt(P[0]**2+P[1]**2+P[2]**2)
      ex_avg += wa*wb*wc * (math.pi*T)**-1.5*np.exp(-cc**2/T) * hs_frequency_exact(cc, 1.0, T)
cpt = np.sqrt((X[0]-u[0])**2+(X[1]-u[1])**2+X[2]**2)
ex_pt = fc * hs_frequency_exact(cpt, 1.0, T)
sel = fc > 0.1*fc.max()
for name, f, ex in [("point", fc, ex_pt), ("avg", fa, ex_avg), ("avg_in_pt_out", fa, ex_pt)]:
    I, p = op(f, parts=True)
    G, L = p["gain"], p["loss"]
    rg = G/ex-1; rl = L/ex-1
    print(name, json.dumps(dict(gmax=float(abs(rg)[sel].max()), gmean=float(abs(rg)[sel].mean()), gmin_s=float(rg[sel].min()), gmax_s=float(rg[sel].max()),
      lmax=float(abs(rl)[sel].max()), lmean=float(abs(rl)[sel].mean()), res=float(abs(I/ex)[sel].max()))), flush=True)
