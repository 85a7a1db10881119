import math, sys, time, json, numpy as np
from solver.backend import get_backend
from solver.collision.coeffs import load_or_build
from solver.collision.operator import CollisionOperator, VelocityGrid
from solver.collision.relax import anisotropy_rate, bkw_m4_rate, maxwellian_check, paper_grid
be = get_backend("numba"); C = "/tmp/cw/cache"
what = sys.argv[1]
def op(g, k="hard_spheres"): return CollisionOperator(g, k, be, table=load_or_build(g.N, C))
if what == "b":
    for N, h in [(12, 0.5), (12, 0.7), (16, 0.5), (16, 0.35)]:
        t0 = time.time(); r = anisotropy_rate(op(VelocityGrid.centred(N, h)), 1.0, 1.0)
        print(json.dumps(dict(N=N, h=h, rel=r["rate"] / r["p_over_mu1"] - 1, **r, s=time.time() - t0)), flush=True)
if what == "c":
    t0b = -6 * math.log(0.4)
    for N, h in [(12, 1.0), (12, 0.8), (16, 0.75), (16, 0.6), (16, 0.5)]:
        t0 = time.time(); r = bkw_m4_rate(op(VelocityGrid.centred(N, h), "maxwell"), t0b)
        print(json.dumps(dict(N=N, h=h, rel=r["dm4dt"] / r["exact"] - 1, **r, s=time.time() - t0)), flush=True)
if what == "a":
    N, h = int(sys.argv[2]), float(sys.argv[3])
    o = op(paper_grid(N, h))
    for T in [float(x) for x in sys.argv[4].split(",")]:
        r = maxwellian_check(o, 1.0, (0.25, 0.25, 0.0), T); r.update(N=N, h=h); print(json.dumps(r), flush=True)
