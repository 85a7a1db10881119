#!/usr/bin/env bash
# Issue #13 (docs/performance-bte-kernels.md §19): WENO_x by the tile kernel bsp_weno_dx_tile (numerics.wenox_kernel:
# tile) against fast2's walk bsp_weno_dx, on one GPU, <= 150 s.  Run from the repository root with $OUT set:
#   OUT=/some/dir bash tools/bsp/wenox_tile_device.sh
#  1. ktime (tools/bsp/wenox_ktime.py --pair walk-tile): both kernels in alternating rounds of CUDA-event timings on a
#     synthetic stage, standard 6x65x65x300x48 (6 rounds x 10 launches each) and fine 6x129x129x600x96 (4 x 5);
#     median, p10-p90, output hashes, repeat equality, walk == tile bit for bit, rel. difference to the array code
#     (standard);
#  2. gpu tests: the tile test first (tile == walk bit for bit on the device, repeat-equal, within 1e-12 of NumPy),
#     then every other gpu test of tests/test_bsp_kernels_cuda_weno.py (cut at 145 s);
#  3. prints a short table last.  Logs and CSVs under $OUT/wenox_tile/.
set -uo pipefail
export PYTHONUNBUFFERED=1
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}  # tools/*.py scripts import solver from this tree
: "${OUT:?set OUT}"
R=$OUT/wenox_tile; mkdir -p $R
left() { local l=$((145 - SECONDS)); echo $(( l > 1 ? l : 1 )); }
{ nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader; git rev-parse --short HEAD 2>/dev/null; } > $R/device.txt 2>&1
echo "mesh,variant,median_us,min_us,p10_us,p90_us,n,hash,repeat_equal,rel_vs_walk,rel_vs_array,eq_tile" > $R/ktime.csv
timeout 40 python3 tools/bsp/wenox_ktime.py 6x65x65x300x48 10 6 --pair walk-tile >> $R/ktime.csv 2>> $R/ktime.err
echo "ktime standard rc $? ($SECONDS s)" >> $R/device.txt
timeout 40 python3 tools/bsp/wenox_ktime.py 6x129x129x600x96 5 4 --pair walk-tile >> $R/ktime.csv 2>> $R/ktime.err
echo "ktime fine rc $? ($SECONDS s)" >> $R/device.txt
NEW="tests/test_bsp_kernels_cuda_weno.py::test_gpu_weno_x_tile_equals_walk"
timeout $(( $(left) > 40 ? 40 : $(left) )) python3 -m pytest -m gpu -q -s -p no:cacheprovider "$NEW" > $R/pytest_tile.log 2>&1
echo "pytest tile rc $? ($SECONDS s)" >> $R/device.txt
timeout $(left) python3 -m pytest -m gpu -q -p no:cacheprovider tests/test_bsp_kernels_cuda_weno.py --deselect "$NEW" \
  > $R/pytest_rest.log 2>&1
echo "pytest rest rc $? ($SECONDS s; cut by the time limit if 124)" >> $R/device.txt
python3 - "$R" <<'PY' | tee $R/table.txt
import csv, os, sys
R = sys.argv[1]
print(open(os.path.join(R, "device.txt")).read().strip())
for f in ("pytest_tile.log", "pytest_rest.log"):
    p = os.path.join(R, f)
    lines = [l for l in open(p).read().splitlines() if l.strip()] if os.path.exists(p) else []
    print(f"{f}: {lines[-1] if lines else '(not run or empty)'}")
    if f == "pytest_tile.log":
        for l in lines:
            if l.startswith("WENO_x tile"):
                print("  " + l)
err = os.path.join(R, "ktime.err")
if os.path.exists(err) and os.path.getsize(err):
    print("ktime.err (last lines):", *open(err).read().splitlines()[-6:], sep="\n  ")
print("WENO_x, us per launch: median (min, p10-p90), n; output hash; equal after the timing; rel. diff vs walk; "
      "vs array code; values equal tile's")
rows = list(csv.DictReader(open(os.path.join(R, "ktime.csv"))))
for r in rows:
    print(f"  {r['mesh']:18s} {r['variant']:5s} {float(r['median_us']):8.1f} ({float(r['min_us']):.1f}, "
          f"{float(r['p10_us']):.1f}-{float(r['p90_us']):.1f}) n={r['n']}  {r['hash']} {r['repeat_equal']} "
          f"{r['rel_vs_walk']} {r['rel_vs_array']} {r['eq_tile']}")
for mesh in sorted({r["mesh"] for r in rows}):
    t = {r["variant"]: float(r["median_us"]) for r in rows if r["mesh"] == mesh}
    same = all(r["eq_tile"] == "True" for r in rows if r["mesh"] == mesh)
    if "walk" in t and "tile" in t:
        print(f"  {mesh}: tile / walk = {t['tile'] / t['walk']:.3f} ({100 * (t['tile'] / t['walk'] - 1):+.1f} %); "
              f"per step (3 stages) {3e-3 * (t['tile'] - t['walk']):+.3f} ms; walk == tile bit for bit: {same}")
PY
