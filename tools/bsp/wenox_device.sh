#!/usr/bin/env bash
# Issue #13 (docs/performance-bte-kernels.md §13): the x kernel bsp_weno_dx, numerics.bte_kernels fast vs fast2, on one
# GPU, <= 150 s.  Run from the repository root with $OUT set:   bash tools/bsp/wenox_device.sh
#  1. ktime (tools/bsp/wenox_ktime.py): bsp_weno_dx of both variants in alternating rounds of CUDA-event timings on a
#     synthetic stage, standard 6x65x65x300x48 (60 launches each) and fine 6x129x129x600x96 (20 each); median,
#     p10-p90, output hashes, repeat equality, rel. difference fast2 vs fast (and vs the array code, standard); also
#     (the A/B build fast2up of section 13.4 became fast2 itself);
#  2. gpu tests: the new fast2 x test first, the graph-vs-launches stages (default fast2: bte_graph's x_into), the
#     10-step bitwise-run test with fast2, then every other gpu test of
#     tests/test_bsp_kernels_cuda_weno.py and tests/test_bsp_contact_rule.py (cut at 145 s);
#  3. prints a short table last.  Logs and CSVs under $OUT/wenox/.
set -uo pipefail
export PYTHONUNBUFFERED=1
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}  # tools/*.py scripts import solver from this tree
: "${OUT:?set OUT}"
R=$OUT/wenox; mkdir -p $R
left() { local l=$((145 - SECONDS)); echo $(( l > 1 ? l : 1 )); }
{ nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader; git rev-parse --short HEAD 2>/dev/null; } > $R/device.txt 2>&1
echo "mesh,variant,median_us,min_us,p10_us,p90_us,n,hash,repeat_equal,rel_vs_fast,rel_vs_array,eq_fast2" > $R/ktime.csv
timeout 35 python3 tools/bsp/wenox_ktime.py 6x65x65x300x48 10 6 >> $R/ktime.csv 2>> $R/ktime.err
echo "ktime standard rc $? ($SECONDS s)" >> $R/device.txt
timeout 35 python3 tools/bsp/wenox_ktime.py 6x129x129x600x96 5 4 >> $R/ktime.csv 2>> $R/ktime.err
echo "ktime fine rc $? ($SECONDS s)" >> $R/device.txt
NEW="tests/test_bsp_kernels_cuda_weno.py::test_gpu_weno_x_fast2_matches_numpy_and_host_build"
GRAPH="tests/test_bsp_kernels_cuda_bte_graph.py::test_gpu_graph_stages_equal_launches"  # x_into captured = launched
RUN="tests/test_bsp_kernels.py::test_gpu_run_bitwise_reproducible_and_close_to_numpy[fast2]"
timeout $(( $(left) > 60 ? 60 : $(left) )) python3 -m pytest -m gpu -q -s -p no:cacheprovider "$NEW" "$GRAPH" "$RUN" \
  > $R/pytest_fast2.log 2>&1
echo "pytest fast2 rc $? ($SECONDS s)" >> $R/device.txt
timeout $(left) python3 -m pytest -m gpu -q -p no:cacheprovider tests/test_bsp_kernels_cuda_weno.py \
  tests/test_bsp_contact_rule.py --deselect "$NEW" > $R/pytest_rest.log 2>&1
echo "pytest rest rc $? ($SECONDS s; cut by the time limit if 124)" >> $R/device.txt
python3 - "$R" <<'PY' | tee $R/table.txt
import csv, os, sys
R = sys.argv[1]
print(open(os.path.join(R, "device.txt")).read().strip())
for f in ("pytest_fast2.log", "pytest_rest.log"):
    p = os.path.join(R, f)
    lines = [l for l in open(p).read().splitlines() if l.strip()] if os.path.exists(p) else []
    print(f"{f}: {lines[-1] if lines else '(not run or empty)'}")
    if f == "pytest_fast2.log":
        for l in lines:
            if l.startswith("WENO_x fast2"):
                print("  " + l)
err = os.path.join(R, "ktime.err")
if os.path.exists(err) and os.path.getsize(err):
    print("ktime.err (last lines):", *open(err).read().splitlines()[-4:], sep="\n  ")
print("bsp_weno_dx, us per launch: median (min, p10-p90), n; output hash; equal after the timing; rel. diff vs fast; "
      "vs array code; values equal fast2's")
rows = list(csv.DictReader(open(os.path.join(R, "ktime.csv"))))
for r in rows:
    print(f"  {r['mesh']:18s} {r['variant']:6s} {float(r['median_us']):8.1f} ({float(r['min_us']):.1f}, "
          f"{float(r['p10_us']):.1f}-{float(r['p90_us']):.1f}) n={r['n']}  {r['hash']} {r['repeat_equal']} "
          f"{r['rel_vs_fast']} {r['rel_vs_array']} {r['eq_fast2']}")
for mesh in sorted({r["mesh"] for r in rows}):
    t = {r["variant"]: float(r["median_us"]) for r in rows if r["mesh"] == mesh}
    for v in ("fast2",):
        if "fast" in t and v in t:
            print(f"  {mesh}: {v} / fast = {t[v] / t['fast']:.3f} ({100 * (t[v] / t['fast'] - 1):+.1f} %); "
                  f"per step (3 stages) {3e-3 * (t[v] - t['fast']):+.3f} ms")
PY
