#!/bin/bash
# One device call for paper 004 (collision): gpu tests, Fig-1 run, Maxwellian check, BKW,
# speedup table and mesh sweep.  Results under $OUT/res (tarred), log printed.
export PYTHONUNBUFFERED=1
pip install -q -e . --no-deps >/dev/null 2>&1 || true
R=$OUT/res; C=/tmp/collision_cache; mkdir -p $R $C
S="python -m solver collision"
nvidia-smi --query-gpu=name --format=csv,noheader
python -c "from solver.provenance import machine_tag; print('TAG', machine_tag())"
timeout 120 python -m pytest -q -m gpu tests/test_collision.py 2>&1 | tail -4 | tee $R/pytest_gpu.txt
timeout 100 $S relax --backend cupy --N 20 --h 0.5 --t-end 0.1 --scheme euler --out $R --name relax_euler --cache $C > $R/relax_euler.log 2>&1; tail -16 $R/relax_euler.log
$S figure --input $R/relax_euler_snapshots.h5 --output $R/fig1_bimaxwellian.png
timeout 40 $S maxwellian --backend cupy --N 20 --h 0.5 --T 1.0,2.5 --out $R --cache $C 2>&1 | tail -3
timeout 60 $S bkw --backend cupy --N 20 --h 0.6 --t-end 15 --out $R --cache $C > $R/bkw.log 2>&1; tail -12 $R/bkw.log
timeout 150 $S bench --backends cupy --dtypes float64,float32 --meshes 16,20,24,28,32 --repeat 1 --out $R --name bench_gpu --cache $C 2>&1 | cut -c1-200
timeout 90 $S bench --backends numba,numba:1 --sample 16 --meshes 16,20 --repeat 1 --out $R --name bench_cpu --cache $C 2>&1 | cut -c1-200
timeout 120 $S relax --backend cupy --N 20 --h 0.5 --t-end 0.1 --scheme rk2 --snapshots 0 --out $R --name relax_rk2 --cache $C > $R/relax_rk2.log 2>&1; tail -16 $R/relax_rk2.log
rm -f $R/*.h5.tmp; mkdir -p $OUT/h5; mv $R/*.h5 $OUT/h5/ 2>/dev/null
tar czf $OUT/collision_results.tar.gz -C $R .
ls -la $R
