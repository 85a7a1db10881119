#!/bin/bash
# Second device call for paper 004 (collision): mesh convergence of the three checks that do not
# pass on the paper's 20^3 mesh (docs/performance-collision.md), plus the GPU tests.
#   1. BKW (Maxwell molecules) on finer meshes: max |m4 error| over the run (domains +-5 and +-6).
#   2. Maxwellian gain/loss table (new columns) on 20^3 at T = 1, 2.5, 4 and on 24^3..32^3 (+-5).
#   3. Chapman-Enskog: late-time decay rate of T_x - T (rk2 relax, paper_grid +-5) on 20^3, 24^3, 28^3
#      and the near-equilibrium rate (`rates`, vs p/mu_1) on 20^3..36^3; h^2 extrapolation of both.
#   4. pytest -m gpu.
# Cost estimate from results/nvidia-h100/collision/bench_gpu.csv (f64 gain: 20^3 0.037 s, 24^3 0.17 s,
# 28^3 0.57 s, 32^3 1.7 s, 36^3 ~4.4 s): BKW 4 runs x 60 evaluations ~ 60 s; relax 3 runs x ~124
# evaluations ~ 100 s; rates ~ 45 s; Maxwellian ~ 15 s; tables + start-up ~ 60 s.  Total ~ 5 min.
# SMALL=1 runs the same sequence on tiny meshes with numba (CPU dry run of the script).
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/collision_gpu2_out}
R=$OUT/res; C=${CACHE:-/tmp/collision_cache}; mkdir -p $R $C
S="python -m solver collision"
if [ "${SMALL:-0}" = 1 ]; then
  BE=numba; MX20="6 1.6667"; MXS="8:1.25"; RM="6,8"; RM2="10"; BKW="6:5 8:5 6:6 8:6"; RLX="6 8"; HW=5
else
  pip install -q -e . --no-deps >/dev/null 2>&1 || true
  BE=cupy; MX20="20 0.5"; MXS="24:0.4166666666666667 28:0.35714285714285715 32:0.3125"; RM="20,24,28,32"; RM2="36"
  BKW="20:5 24:5 20:6 24:6 28:6"; RLX="20 24 28"; HW=5
  nvidia-smi --query-gpu=name --format=csv,noheader
  timeout 150 python -m pytest -q -m gpu tests/test_collision*.py 2>&1 | tail -4 | tee $R/pytest_gpu.txt
fi
python -c "from solver.provenance import machine_tag; print('TAG', machine_tag())"
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
set -- $MX20
el maxwellian; timeout 60 $S maxwellian --backend $BE --N $1 --h $2 --T 1.0,2.5,4.0 --out $R --cache $C > $R/maxwellian.log 2>&1
for p in $MXS; do N=${p%%:*}; h=${p##*:}
  timeout 60 $S maxwellian --backend $BE --N $N --h $h --T 1.0,2.5,4.0 --out $R --name maxwellian_N$N --cache $C >> $R/maxwellian.log 2>&1
done
el rates; timeout 90 $S rates --backend $BE --meshes $RM --half-width $HW --T 2.5 --bkw-half-width 6 --out $R --cache $C > $R/rates.log 2>&1
for p in $BKW; do N=${p%%:*}; w=${p##*:}; h=$(python -c "print(2*$w/$N)")
  el bkw N=$N hw=$w; timeout 90 $S bkw --backend $BE --N $N --h $h --t-end 15 --out $R --name bkw_N${N}_hw$w --cache $C > $R/bkw_N${N}_hw$w.log 2>&1
  tail -1 $R/bkw_N${N}_hw$w.log
done
for N in $RLX; do h=$(python -c "print(2*$HW/$N)")
  el relax N=$N; timeout 150 $S relax --backend $BE --N $N --h $h --t-end 0.1 --scheme rk2 --snapshots 0 --out $R --name relax_rk2_N$N --cache $C > $R/relax_rk2_N$N.log 2>&1
  tail -3 $R/relax_rk2_N$N.log
done
el rates $RM2; cp $R/rates.csv $R/rates_a.csv 2>/dev/null
timeout 100 $S rates --backend $BE --meshes $RM2 --half-width $HW --T 2.5 --bkw-half-width 6 --out $R --name rates_b --cache $C > $R/rates_b.log 2>&1
python - "$R" <<'EOF'
import sys, pandas as pd
from pathlib import Path
R = Path(sys.argv[1]); parts = [pd.read_csv(p) for p in (R / "rates_a.csv", R / "rates_b.csv") if p.is_file()]
if parts:
    pd.concat(parts, ignore_index=True).to_csv(R / "rates.csv", index=False)
EOF
el convergence; $S convergence --input $R --figure $R/fig_convergence.png > $R/convergence.log 2>&1
rm -f $R/*.h5 $R/*.tmp
tar czf $OUT/collision2_results.tar.gz -C $R .
el done; cat $R/convergence.log | cut -c1-150
