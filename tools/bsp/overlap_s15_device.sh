#!/usr/bin/env bash
# Issue #13, docs/performance-bte-kernels.md §15: bsp_overlap staged (this tree) against a7e270b's one-thread-per-pair
# kernel (old, the text kept in tools/bsp/old_kernels/scattering_a7e270b.cu), one GPU, <= 120 s.
# Run from the repository root:  OUT=... bash tools/bsp/overlap_s15_device.sh
#  1. gpu tests: tests/test_bsp_kernels_cuda_overlap.py (new == old == the host's in-order sum, bit for bit; standard,
#     fine, NZ = 257, odd NB, chunked) and the overlap gpu test of tests/test_bsp_kernels_cuda_bte_graph.py;
#  2. ktime (tools/bsp/overlap_s15.py ktime): standard 6x65x65 and fine 6x129x129, 300 launches each of old and new,
#     interleaved, CUDA events; L2 flushed (256 MB memset) before each launch, and warm (a spin kernel before each);
#  3. ncu once per kernel on the standard mesh (if present and time is left; gpu__time_duration, caches flushed);
#  4. two 10-step standard cupy runs of THIS tree (config/standard.yaml, time.steps=10), the phase overlap set to the
#     old kernel in one and to the new in the other (tools/bsp/overlap_s15.py run old|new: the same process layout,
#     only the W kernel differs; run folders under /tmp); profiles.csv, profiles_t0.csv and scalars.csv compared
#     byte for byte (cmp), the CSVs and run.json kept under $OUT;
#  5. prints a short table last.  Logs and CSVs under $OUT/overlap_s15/.
set -uo pipefail
export PYTHONUNBUFFERED=1
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
export MPLBACKEND=Agg
: "${OUT:?set OUT}"
R=$OUT/overlap_s15; mkdir -p $R
PY=python3
left() { local l=$((115 - SECONDS)); echo $(( l > 1 ? l : 1 )); }
cap() { local l=$(left); echo $(( l < $1 ? l : $1 )); }
{ nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader; git rev-parse --short HEAD 2>/dev/null; } > $R/device.txt 2>&1
timeout $(cap 30) $PY -m pytest -m gpu -q -p no:cacheprovider tests/test_bsp_kernels_cuda_overlap.py \
  "tests/test_bsp_kernels_cuda_bte_graph.py::test_gpu_overlap_kernel_matches_matmul" > $R/pytest_gpu.log 2>&1
echo "pytest gpu rc $? ($SECONDS s)" >> $R/device.txt
echo "mesh,mode,variant,median_us,p10_us,p90_us,min_us,n,bitwise_old,rel_numpy" > $R/ktime.csv
for mesh in 6x65x65 6x129x129; do
  timeout $(cap 20) $PY tools/bsp/overlap_s15.py ktime $mesh 300 >> $R/ktime.csv 2>> $R/ktime.err
  echo "ktime $mesh rc $? ($SECONDS s)" >> $R/device.txt
done
T=$(mktemp -d /tmp/overlap_s15.XXXXXX)  # the run folders (the final state is large); CSVs and run.json copied to $R
for v in old new; do
  timeout $(cap 30) $PY tools/bsp/overlap_s15.py run $v run config/standard.yaml --set time.steps=10 \
    --set time.t_end_ps=null --backend cupy --no-progress --out $T/run_$v > $R/run_$v.log 2>&1
  echo "run $v rc $? ($SECONDS s): $(grep -h 'overlap_s15 run' $R/run_$v.log | tail -1)" >> $R/device.txt
  mkdir -p $R/run_$v; cp $T/run_$v/*.csv $T/run_$v/run.json $R/run_$v/ 2>/dev/null
done
for f in profiles.csv profiles_t0.csv scalars.csv; do
  if [ -f $T/run_old/$f ] && [ -f $T/run_new/$f ]; then
    cmp -s $T/run_old/$f $T/run_new/$f && echo "cmp $f: identical" >> $R/device.txt || echo "cmp $f: DIFFERENT" >> $R/device.txt
  else
    echo "cmp $f: missing" >> $R/device.txt
  fi
done
rm -rf $T
if command -v ncu >/dev/null && [ $(left) -gt 25 ]; then
  timeout $(cap 25) ncu --kernel-name regex:"bsp_overlap" --metrics gpu__time_duration.sum \
    --csv $PY tools/bsp/overlap_s15.py ktime 6x65x65 0 > $R/ncu.csv 2> $R/ncu.err
  echo "ncu rc $? ($SECONDS s)" >> $R/device.txt
fi
$PY - "$R" <<'PY' | tee $R/table.txt
import csv, os, sys
R = sys.argv[1]
print(open(os.path.join(R, "device.txt")).read().strip())
p = os.path.join(R, "pytest_gpu.log")
tail = [l for l in open(p).read().splitlines() if l.strip()][-1:] if os.path.exists(p) else ["(not run)"]
print(f"pytest_gpu.log: {tail[0] if tail else '(empty)'}")
p = os.path.join(R, "ncu.csv")
if os.path.exists(p):
    rows = [l for l in open(p).read().splitlines() if "gpu__time_duration" in l]
    print("ncu gpu__time_duration (standard, caches flushed; launch order: new, old):")
    for l in rows:
        c = [x.strip('"') for x in l.split('","')]
        print("  " + " ".join(c[i] for i in (4, 7, 8, -1, -2) if i < len(c)))  # kernel, block, grid, value, unit
rows = list(csv.DictReader(open(os.path.join(R, "ktime.csv"))))
print("bsp_overlap us per launch (CUDA events): median [p10-p90] min n; bitwise new == old; new vs NumPy (elementwise)")
for r in rows:
    print(f"  {r['mesh']:9s} {r['mode']:7s} {r['variant']:3s} {float(r['median_us']):7.2f} "
          f"[{float(r['p10_us']):.2f}-{float(r['p90_us']):.2f}] {float(r['min_us']):.2f} {r['n']}  {r['bitwise_old']} {r['rel_numpy']}")
for mesh in sorted({r["mesh"] for r in rows}):
    for mode in ("flushed", "warm"):
        t = {r["variant"]: float(r["median_us"]) for r in rows if (r["mesh"], r["mode"]) == (mesh, mode)}
        if len(t) == 2:
            print(f"  {mesh:9s} {mode:7s} new/old = {t['new'] / t['old']:.3f} ({t['old']:.1f} -> {t['new']:.1f} us; "
                  f"x3 per step: {3 * (t['new'] - t['old']) / 1e3:+.4f} ms)")
PY
