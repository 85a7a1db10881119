#!/usr/bin/env bash
# Issue #13, round 8 (docs/performance-bte-kernels.md §12): numerics.bte_kernels fast vs fast2 on one GPU, <= 150 s.
# Run from the repository root with $OUT set:   bash tools/bsp/bte_s12_device.sh
#  1. ktime: the fused kernel bsp_wphi_rk (stage 1, scattering) of both variants, alternating rounds of CUDA-event
#     timings on the synthetic stage (standard 6x65x65x300x48 and fine 6x129x129x600x96), output hashes, rel. diff;
#  2. gpu tests of fast2: test_gpu_stage_update_fast2_matches_numpy_and_host_build (rk file) and two bitwise-equal
#     10-step runs of fast2 (test_bsp_kernels.py), <= 45 s;
#  3. bench: python -m solver bsp bench, 60 steps after 5, standard and fine, one process per variant (BTE + DENS);
#     then the other gpu tests of test_bsp_kernels_cuda_{rk,weno}.py with the time left (cut at 145 s);
#  4. prints a short table last.  Logs and CSVs under $OUT/s12/.
set -uo pipefail
export PYTHONUNBUFFERED=1
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}  # tools/*.py scripts import solver from this tree
: "${OUT:?set OUT}"
R=$OUT/s12; mkdir -p $R
left() { local l=$((145 - SECONDS)); echo $(( l > 1 ? l : 1 )); }
{ nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader; git rev-parse --short HEAD 2>/dev/null; } > $R/device.txt 2>&1
echo "mesh,variant,median_ms,min_ms,p10_ms,p90_ms,n,sha1,repeat_equal,rel_vs_fast" > $R/ktime.csv
timeout 25 python3 tools/bsp/bte_s12_ktime.py 6x65x65x300x48 10 6 >> $R/ktime.csv 2>> $R/ktime.err
timeout 25 python3 tools/bsp/bte_s12_ktime.py 6x129x129x600x96 5 4 >> $R/ktime.csv 2>> $R/ktime.err
echo "ktime done ($SECONDS s)" >> $R/device.txt
timeout $(( $(left) > 45 ? 45 : $(left) )) python3 -m pytest -m gpu -q -p no:cacheprovider \
  "tests/test_bsp_kernels_cuda_rk.py::test_gpu_stage_update_fast2_matches_numpy_and_host_build" \
  "tests/test_bsp_kernels.py::test_gpu_run_bitwise_reproducible_and_close_to_numpy[fast2]" > $R/pytest_fast2.log 2>&1
echo "pytest fast2 rc $? ($SECONDS s)" >> $R/device.txt
CS="--case 6x65x65x300x48:cupy:1:60:5 --case 6x129x129x600x96:cupy:1:60:5"
for v in fast fast2; do
  [ $(left) -lt 25 ] && { echo "bench $v skipped (time)" >> $R/device.txt; continue; }
  timeout 25 python3 -m solver bsp bench config/bsp/dgmosfet.yaml $CS --set numerics.bte_kernels=$v --out $R/bench_$v \
    > $R/bench_$v.log 2>&1
  echo "bench $v rc $? ($SECONDS s)" >> $R/device.txt
done
timeout $(left) python3 -m pytest -m gpu -q -p no:cacheprovider tests/test_bsp_kernels_cuda_rk.py \
  tests/test_bsp_kernels_cuda_weno.py --deselect \
  "tests/test_bsp_kernels_cuda_rk.py::test_gpu_stage_update_fast2_matches_numpy_and_host_build" > $R/pytest_rest.log 2>&1
echo "pytest rest rc $? ($SECONDS s; cut by the time limit if 124)" >> $R/device.txt
python3 - "$R" <<'PY' | tee $R/table.txt
import csv, os, sys
R = sys.argv[1]
print(open(os.path.join(R, "device.txt")).read().strip())
for f in ("pytest_fast2.log", "pytest_rest.log"):
    p = os.path.join(R, f)
    tail = [l for l in open(p).read().splitlines() if l.strip()][-1:] if os.path.exists(p) else ["(not run)"]
    print(f"{f}: {tail[0] if tail else '(empty)'}")
print("fused kernel bsp_wphi_rk (stage 1), us per launch: median (min, p10-p90), n; output sha1; equal after the timing; rel. diff vs fast")
rows = list(csv.DictReader(open(os.path.join(R, "ktime.csv"))))
for r in rows:
    print(f"  {r['mesh']:18s} {r['variant']:6s} {float(r['median_ms']) * 1e3:8.1f} us ({float(r['min_ms']) * 1e3:.1f}, "
          f"{float(r['p10_ms']) * 1e3:.1f}-{float(r['p90_ms']) * 1e3:.1f}) n={r['n']}  {r['sha1']} {r['repeat_equal']} {r['rel_vs_fast']}")
for mesh in sorted({r["mesh"] for r in rows}):
    t = {r["variant"]: float(r["median_ms"]) for r in rows if r["mesh"] == mesh}
    if "fast" in t and "fast2" in t:
        print(f"  {mesh}: fast2 / fast = {t['fast2'] / t['fast']:.3f}; per step (3 stages) {3 * (t['fast2'] - t['fast']):+.3f} ms")
print("bench (60 steps after 5), ms per step: BTE + DENS (step)")
for v in ("fast", "fast2"):
    p = os.path.join(R, f"bench_{v}", "steps.csv")
    if not os.path.exists(p):
        print(f"  {v}: no steps.csv"); continue
    for r in csv.DictReader(open(p)):
        print(f"  {r['mesh']:18s} {v:6s} {float(r['bte_ms']) + float(r['dens_ms']):7.3f} ({float(r['step_ms']):.2f})")
PY
