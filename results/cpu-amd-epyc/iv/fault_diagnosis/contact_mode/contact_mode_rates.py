"""docs/iv.md §9: growth rate of the contact mode from contact_mode_diag.py tables.  The amplitude is the
most negative Phi on the inflow lines phi = 0 (source) / NPHI/2 (drain) of valley 2, subband 1 (over w and
both contacts); the rate is a least-squares fit of ln(amplitude) over the rows where the amplitude lies in
[LO, HI] and grows (after its last value below LO); LO is 5x the floor (the median amplitude over
0.2-0.6 ps, the level of the ordinary WENO undershoots), at least 1e-9; HI = 3e-4.  Prints one row per table."""
import sys
import numpy as np
import pandas as pd

HI = 3e-4
print(f"{'table':34s} {'t_end ps':>8s} {'fault':>5s} {'window ps':>13s} {'rate /ps':>8s} {'e-fold ps':>9s} {'r-1 (2,1) src/drn':>18s} {'floor':>8s}")
for f in sys.argv[1:]:
    d = pd.read_csv(f)
    amp = -np.minimum(d[["min_src_v2", "min_drn_v2"]].min(axis=1), 0.0)
    floor = float(np.median(amp[(d.t_ps >= 0.2) & (d.t_ps <= 0.6)]))
    LO = max(5 * floor, 1e-9)
    below = np.where(amp < LO)[0]
    start = below[-1] + 1 if len(below) else 0
    sel = np.zeros(len(d), bool)
    sel[start:] = True
    sel &= (amp >= LO) & (amp <= HI)
    mid = len(d) // 2
    r = f"{d.r1_src_v2.iloc[mid]:+.4f}/{d.r1_drn_v2.iloc[mid]:+.4f}"
    fault = bool((d.tag == "fault").any()) if "tag" in d else False
    if sel.sum() >= 3:
        p = np.polyfit(d.t_ps[sel], np.log(amp[sel]), 1)
        w = f"{d.t_ps[sel].min():.2f}-{d.t_ps[sel].max():.2f}"
        print(f"{f.split('/')[-1]:34s} {d.t_ps.iloc[-1]:8.3f} {str(fault):>5s} {w:>13s} {p[0]:8.1f} {1 / p[0]:9.3f} {r:>18s} {floor:8.1e}")
    else:
        print(f"{f.split('/')[-1]:34s} {d.t_ps.iloc[-1]:8.3f} {str(fault):>5s} {'(no growth)':>13s} {'':8s} {'':9s} {r:>18s} {floor:8.1e}  max amp {amp.max():.1e}")
