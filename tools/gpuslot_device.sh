#!/usr/bin/env bash
# Check of `python -m solver --gpu exclusive` (solver/gpuslot.py) on a host with several GPUs, in
# about a minute (no Snakemake on the device; what the workflow's GPU rules run).
#   A: 2 x NGPU processes started at once, each `--gpu exclusive` then ~3 s of DGEMM on its device 0:
#      expected: every GPU used, at most NGPU at a time, no two overlapping on one PCI bus id, the
#      second wave waiting ~3 s (wait_s);
#   B: two `--gpu auto` processes hold GPUs 0 and 1 for 6 s; then an exclusive one starts: expected on
#      a GPU without them (2 or more with >= 3 GPUs; with 2 GPUs it waits until one ends);
#   C: one tiny cupy solver run with --gpu exclusive: run.json's gpu_slot, CUDA_VISIBLE_DEVICES and
#      device.pci_bus_id.
#   usage (repository root): SOLVER_SOURCE_COMMIT=<commit> bash tools/gpuslot_device.sh
# Writes $OUT/gpuslot_{a,b}.jsonl, $OUT/run_c/run.json; prints a short table last.
set -u
export PYTHONUNBUFFERED=1
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}  # tools/*.py scripts import solver from this tree
OUT=${OUT:-/tmp/gpuslot_out}; mkdir -p "$OUT"
export TMPDIR=$(mktemp -d)   # a registry of this check only
NGPU=${NGPU:-$(ls /dev/nvidia[0-9]* 2>/dev/null | wc -l)}
echo "== $NGPU GPUs, $(nproc) cores; registry under $TMPDIR"
nvidia-smi --query-gpu=index,pci.bus_id,name --format=csv,noheader || true
cat > "$TMPDIR/worker.py" <<'EOF'
import json, os, sys, time
from solver import gpuslot
mode, seconds, tag = sys.argv[1], float(sys.argv[2]), sys.argv[3]
t0 = time.time()
gpuslot.select(mode)
import cupy as cp
bus = cp.cuda.runtime.deviceGetPCIBusId(0)
a = cp.ones((4096, 4096))
start = time.time()
while time.time() - start < seconds:
    a = a @ a * (1.0 / 4096)
    cp.cuda.Device().synchronize()
print(json.dumps({"tag": tag, "mode": mode, "cvd": os.environ.get("CUDA_VISIBLE_DEVICES"), "bus": bus,
                  "slot": json.loads(os.environ.get("SOLVER_GPU_SLOT", "null")), "launched": t0, "start": start,
                  "end": time.time()}))
EOF
echo "== A: $((2 * NGPU)) exclusive processes at once"
for i in $(seq 1 $((2 * NGPU))); do
  python3 "$TMPDIR/worker.py" exclusive 3 "a$i" >> "$OUT/gpuslot_a.jsonl" 2> "$OUT/gpuslot_a_$i.err" &
done
wait
echo "== B: auto on two GPUs, then exclusive"
python3 "$TMPDIR/worker.py" auto 6 b_auto1 >> "$OUT/gpuslot_b.jsonl" 2>&1 &
python3 "$TMPDIR/worker.py" auto 6 b_auto2 >> "$OUT/gpuslot_b.jsonl" 2>&1 &
sleep 2
python3 "$TMPDIR/worker.py" exclusive 2 b_excl >> "$OUT/gpuslot_b.jsonl" 2>&1
wait
echo "== C: a solver run with --gpu exclusive"
python3 -m solver --gpu exclusive run config/bsp/dgmosfet.yaml --out "$OUT/run_c" --backend cupy --no-progress \
  --set mesh.N_sbn=3 --set mesh.NX=9 --set mesh.NZ=9 --set mesh.NW=12 --set mesh.NPHI=8 \
  --set time.steps=3 --set time.t_end_ps=null 2>&1 | tail -1
python3 - "$OUT" "$NGPU" <<'EOF'
import json, sys
from pathlib import Path
out, n = Path(sys.argv[1]), int(sys.argv[2])
def load(name):
    return [json.loads(l) for l in (out / name).read_text().splitlines() if l.startswith("{")]
a = load("gpuslot_a.jsonl")
over = [(r["tag"], s["tag"]) for i, r in enumerate(a) for s in a[i + 1:]
        if r["bus"] == s["bus"] and r["start"] < s["end"] and s["start"] < r["end"]]
moments = sorted(x for r in a for x in (r["start"], r["end"]))
conc = max(sum(r["start"] <= m < r["end"] for r in a) for m in moments)
print("\nA  tag  CUDA_VISIBLE_DEVICES  pci_bus_id     wait_s  start  end (s after the first launch)")
t0 = min(r["launched"] for r in a)
for r in sorted(a, key=lambda r: r["start"]):
    print(f"   {r['tag']:4s} {str(r['cvd']):>4s}  {r['bus']}  {(r['slot'] or {}).get('wait_s', 0):6.2f}  "
          f"{r['start'] - t0:5.1f}  {r['end'] - t0:5.1f}")
print(f"A: {len(a)} runs, {len({r['bus'] for r in a})} GPUs used of {n}, at most {conc} at once, "
      f"overlaps on one GPU: {over or 'none'}")
b = {r["tag"]: r for r in load("gpuslot_b.jsonl")}
print("B: " + ", ".join(f"{t} GPU {r['cvd']} ({(r['slot'] or {}).get('wait_s', 0):.1f} s waited)" for t, r in sorted(b.items())))
if not (out / "run_c" / "run.json").is_file():
    sys.exit("C: no run.json")
rec = json.loads((out / "run_c" / "run.json").read_text())
print(f"C: gpu_slot {rec.get('gpu_slot')}, CUDA_VISIBLE_DEVICES {rec['threads'].get('CUDA_VISIBLE_DEVICES')}, "
      f"device {rec['device'].get('device')} pci_bus_id {rec['device'].get('pci_bus_id')}")
EOF
