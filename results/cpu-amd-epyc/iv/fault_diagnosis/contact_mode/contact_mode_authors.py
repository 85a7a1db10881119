"""docs/iv.md §9.1: the authors' inflow factor r - 1 = rho_eq/rho - 1 per (valley, subband) at both contacts, from
their coarse outputs (../shared/reference/dgmosfet-coarse: at t = 0 Phi = s_w rho_eq M, so N_s(t=0) is rho_eq).
    python contact_mode_authors.py [REFERENCE_DIR]"""
import sys
import numpy as np
import pandas as pd

ref = sys.argv[1] if len(sys.argv) > 1 else "../shared/reference/dgmosfet-coarse"
a = pd.read_csv(f"{ref}/profiles_t0ps.csv")
b = pd.read_csv(f"{ref}/profiles_t0.1ps.csv")
np.set_printoptions(precision=4, linewidth=200)
for i, name in ((0, "source x_0"), (-1, "drain x_L")):
    print(name)
    for nu in range(3):
        r = [a[f"Ns_nu{nu}_p{p}_m-2"].iloc[i] / b[f"Ns_nu{nu}_p{p}_m-2"].iloc[i] - 1 for p in range(6)]
        print(f"  valley {nu}: r - 1 by subband 0..5:", np.array(r))
