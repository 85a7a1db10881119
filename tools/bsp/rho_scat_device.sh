#!/usr/bin/env bash
# Issue #13 (docs/performance-bte-kernels.md §14): bsp_rho, bsp_scat_gain, bsp_scat_loss of a7e270b (old) vs this
# tree (new) on one GPU, <= 120 s.  Run from the repository root with $OUT set:  bash tools/bsp/rho_scat_device.sh
#  1. ktime (tools/bsp/rho_scat_ktime.py): standard 6x65x65x300x48 (100 launches each) and fine 6x129x129x600x96
#     (30), old and new alternating, CUDA events, L2 flushed before each launch and warm; new == old bit for bit on
#     the device, new vs NumPy (standard);
#  2. ncu (if present, <= 30 s): gpu__time_duration of each kernel once on the standard mesh, caches flushed,
#     base clocks (ncu's defaults), launch order old, new;
#  3. gpu tests of the changed files (tests/test_bsp_kernels_cuda_{rho_scat,scattering}.py, then the rk file and,
#     with the time left, the bte_graph file);
#  4. prints a short table last.  Logs and CSVs under $OUT/rho_scat/.
set -uo pipefail
export PYTHONUNBUFFERED=1
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
: "${OUT:?set OUT}"
R=$OUT/rho_scat; mkdir -p $R
left() { local l=$((115 - SECONDS)); echo $(( l > 1 ? l : 1 )); }
{ nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader; git rev-parse --short HEAD 2>/dev/null; } > $R/device.txt 2>&1
echo "mesh,kernel,mode,variant,median_us,p10_us,p90_us,min_us,n,bitwise_old,rel_numpy" > $R/ktime.csv
timeout 35 python3 tools/bsp/rho_scat_ktime.py 6x65x65x300x48 100 >> $R/ktime.csv 2>> $R/ktime.err
echo "ktime standard rc $? ($SECONDS s)" >> $R/device.txt
timeout 25 python3 tools/bsp/rho_scat_ktime.py 6x129x129x600x96 30 >> $R/ktime.csv 2>> $R/ktime.err
echo "ktime fine rc $? ($SECONDS s)" >> $R/device.txt
if command -v ncu >/dev/null && [ $(left) -gt 60 ]; then
  timeout 30 ncu --kernel-name regex:"bsp_rho|bsp_scat_gain|bsp_scat_loss" --metrics gpu__time_duration.sum \
    --csv python3 tools/bsp/rho_scat_ktime.py 6x65x65x300x48 0 > $R/ncu.csv 2> $R/ncu.err
  echo "ncu rc $? ($SECONDS s)" >> $R/device.txt
fi
timeout $(( $(left) > 40 ? 40 : $(left) )) python3 -m pytest -m gpu -q -p no:cacheprovider \
  tests/test_bsp_kernels_cuda_rho_scat.py tests/test_bsp_kernels_cuda_scattering.py > $R/pytest_changed.log 2>&1
echo "pytest changed files rc $? ($SECONDS s)" >> $R/device.txt
timeout $(left) python3 -m pytest -m gpu -q -p no:cacheprovider tests/test_bsp_kernels_cuda_rk.py > $R/pytest_rk.log 2>&1
echo "pytest rk rc $? ($SECONDS s; cut by the time limit if 124)" >> $R/device.txt
if [ $(left) -gt 10 ]; then
  timeout $(left) python3 -m pytest -m gpu -q -p no:cacheprovider tests/test_bsp_kernels_cuda_bte_graph.py > $R/pytest_bte_graph.log 2>&1
  echo "pytest bte_graph rc $? ($SECONDS s; cut by the time limit if 124)" >> $R/device.txt
fi
python3 - "$R" <<'PY' | tee $R/table.txt
import csv, os, sys
R = sys.argv[1]
print(open(os.path.join(R, "device.txt")).read().strip())
for f in ("pytest_changed.log", "pytest_rk.log", "pytest_bte_graph.log"):
    p = os.path.join(R, f)
    tail = [l for l in open(p).read().splitlines() if l.strip()][-1:] if os.path.exists(p) else ["(not run)"]
    print(f"{f}: {tail[0] if tail else '(empty)'}")
p = os.path.join(R, "ncu.csv")
if os.path.exists(p):
    rows = [l for l in open(p).read().splitlines() if "gpu__time_duration" in l]
    print("ncu gpu__time_duration (standard, order old/new per kernel):")
    for l in rows:
        c = [x.strip('"') for x in l.split('","')]
        print("  " + " ".join(c[i] for i in (4, 7, 8, -1, -2) if i < len(c)))  # kernel, block, grid, value, unit
rows = list(csv.DictReader(open(os.path.join(R, "ktime.csv"))))
print("us per launch (CUDA events): median [p10-p90] min; bitwise new == old; new vs NumPy")
for r in rows:
    print(f"  {r['mesh']:17s} {r['kernel']:4s} {r['mode']:7s} {r['variant']:3s} {float(r['median_us']):8.2f} "
          f"[{float(r['p10_us']):.2f}-{float(r['p90_us']):.2f}] {float(r['min_us']):.2f}  {r['bitwise_old']} {r['rel_numpy']}")
for mesh in sorted({r["mesh"] for r in rows}):
    for k in ("rho", "gain", "loss"):
        for mode in ("flushed", "warm"):
            t = {r["variant"]: float(r["median_us"]) for r in rows if (r["mesh"], r["kernel"], r["mode"]) == (mesh, k, mode)}
            if len(t) == 2:
                print(f"  {mesh:17s} {k:4s} {mode:7s} new/old = {t['new'] / t['old']:.3f} ({t['old']:.1f} -> {t['new']:.1f} us)")
PY
