"""docs/iv.md §9.3: r - 1 of the NZ = 17 run (3x33x17x24x8, V_G = 0.5 V) from its final Phi (saved by §8 in /tmp/ivfix) and a fresh start-up for rho_eq."""
import numpy as np
from solver.bsp.model import load
from solver.bsp.simulation import Simulation
sets = ["mesh.N_sbn=3", "mesh.NX=33", "mesh.NZ=17", "mesh.NW=24", "mesh.NPHI=8", "bias.V_G=0.5", "bias.V_DS=0.05", "numerics.backend=numpy"]
sim = Simulation(load("config/bsp/dgmosfet.yaml", sets), progress=False); sim._timer_rows = []; sim.startup()
m = sim.model; req = np.asarray(sim.eq.rho_eq)
Phi = np.load("/tmp/ivfix/phi_3x33x17x24x8_0.5_0.0.npy")
rho = m.dw * m.dphi * Phi.sum(axis=(-1, -2))
np.set_printoptions(precision=4)
print("NZ=17 end state r-1 x0 (nu,p)\n", req[0] / rho[0] - 1, "\n xL\n", req[-1] / rho[-1] - 1)
print("eps at x0\n", np.asarray(sim.state.eps)[0])
