#!/usr/bin/env bash
# Issue #13, docs/performance.md §19: the standard step spreads ~9 % from process to process (3.08 / 3.28 / 3.35 ms
# on one quiet H200).  One GPU, <= 170 s wall.  Run from the repository root:
#     OUT=... bash tools/bsp/spread_probe.sh            (optional: SPREAD_SEQ="base graph ...", SPREAD_LIMIT_S=170)
# 1. nvidia-smi in the background for the whole call (clocks.sm, clocks.mem, power.draw, temperature.gpu, the
#    throttle / clock-event reasons; every 100 ms, SPREAD_SMI_MS) into smi.csv; nvidia-smi -q before and after.
#    Work files in a temporary folder; $OUT/spread/ gets 5 files: spread.tgz (everything), table.txt, table_full.txt,
#    procs.csv, device.txt (the device call brings back at most 8 files).
# 2. A sequence of separate processes (tools/bsp/spread_probe.py child), back to back like `bsp bench`, each the
#    bench's case 6x65x65x300x48:cupy:1:200:5 of config/bsp/dgmosfet.yaml (thread variables 1, prewarm), then
#    a step-level placement test in the same process (graph: 3 StageGraphs, the run's and 2 fresh ones, swapped in,
#    2 interleaved rounds of 5 + 60 steps; base/shift: 60 steps after holding 0 / 4 / 8 more Phi-sized pool arrays),
#    then its kernel pass (the BTE kernels on 3 fresh buffer sets in the same process, interleaved).  Kinds:
#      base      the bench exactly (numerics.bte_graph is false in this config: the BTE kernels launched from Python)
#      graph     the same with numerics.bte_graph=true (the BTE stage replayed from a CUDA graph: few host launches)
#      shiftN    base after an N MiB dummy taken from the CuPy pool first (every later address shifts)
#      hash0     base with PYTHONHASHSEED=0 (the host's Python: one hash seed and dict layout in every such process)
#      pin       base pinned by taskset to one CPU (SPREAD_PIN_CPU, default the last CPU of the call's affinity)
#    Default order (interleaved so that drift over the call hits every kind; 13 base, 4 graph, 3 each of shift,
#    hash0, pin; what does not start by 145 s is listed as not started):
#      base graph base shift1 base hash0 base pin base graph base shift7 base hash0 base pin base graph base
#      shift129 base hash0 base pin base graph
#    A process that fails or times out (30 s; the first 60 s: compiles) is recorded and the next one runs; no
#    process starts after 145 s.
# 3. `spread_probe.py summary`: $OUT/spread/procs.csv (one row per process), table_full.txt and a short table last
#    (table.txt, ~5 kB for 26 processes): per process the step
#    median [p10-p90], BTE, ITER, host gap (wall - GPU step), nvidia-smi SM clock / power / temperature / reasons in
#    the process's timed window, the spin kernel's SM clock, per-kernel device times, CPU, virtual layout; then the
#    correlation of the step median with each, and the in-process placement test (set-to-set vs process-to-process).
set -uo pipefail
export PYTHONUNBUFFERED=1
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
export MPLBACKEND=Agg
for v in OMP_NUM_THREADS OPENBLAS_NUM_THREADS MKL_NUM_THREADS NUMBA_NUM_THREADS; do export $v=1; done  # as bsp bench
: "${OUT:?set OUT}"
D=$OUT/spread; mkdir -p $D  # what comes back (<= 8 files a call): spread.tgz, table.txt, table_full.txt, procs.csv, device.txt
R=$(mktemp -d /tmp/spread_probe.XXXXXX)  # the work folder (a JSON and a log per process, smi.csv, ...), packed at the end
PY=python3
LIMIT=${SPREAD_LIMIT_S:-170}
LAST_START=$((LIMIT - 25))   # no process starts later (a process takes ~5-8 s; 15 s stay for the summary)
SEQ=${SPREAD_SEQ:-"base graph base shift1 base hash0 base pin base graph base shift7 base hash0 base pin base graph base shift129 base hash0 base pin base graph"}
PINCPU=${SPREAD_PIN_CPU:-$($PY -c "import os; print(sorted(os.sched_getaffinity(0))[-1])")}
GPU=${CUDA_VISIBLE_DEVICES:-0}; GPU=${GPU%%,*}
{ nvidia-smi -i $GPU --query-gpu=name,driver_version,clocks.max.sm,clocks.applications.graphics,power.limit,persistence_mode,compute_mode --format=csv,noheader
  git rev-parse --short HEAD 2>/dev/null; echo "nproc $(nproc); affinity $(taskset -pc $$ 2>/dev/null | sed 's/.*: //')"
  echo "sequence: $SEQ; pin CPU $PINCPU"; } > $R/device.txt 2>&1
nvidia-smi -i $GPU -q -d CLOCK,PERFORMANCE,POWER,TEMPERATURE > $R/smi_q_before.txt 2>&1
SMI=""
for reasons in clocks_throttle_reasons.active clocks_event_reasons.active pstate; do
  F="timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,$reasons"
  if nvidia-smi -i $GPU --query-gpu=$F --format=csv,noheader,nounits > /dev/null 2>&1; then
    echo "smi fields: $F" >> $R/device.txt
    SB=""; command -v stdbuf > /dev/null && SB="stdbuf -oL"  # a line per sample on disk, even when stopped
    $SB nvidia-smi -i $GPU --query-gpu=$F --format=csv,noheader,nounits -lms ${SPREAD_SMI_MS:-100} > $R/smi.csv 2> $R/smi.err &
    SMI=$!
    break
  fi
done
[ -z "$SMI" ] && echo "smi: no sampler (nvidia-smi query failed)" >> $R/device.txt
i=0
for kind in $SEQ; do
  if [ $SECONDS -ge $LAST_START ]; then echo "proc $i ($kind): not started, $SECONDS s" >> $R/device.txt; break; fi
  extra=(); dummy=0; pre=(env)
  case $kind in
    base) ;;
    graph) extra=(--set numerics.bte_graph=true) ;;
    shift*) dummy=${kind#shift} ;;
    hash0) pre=(env PYTHONHASHSEED=0) ;;
    pin) pre=(taskset -c $PINCPU) ;;
    *) echo "unknown kind $kind" >> $R/device.txt; continue ;;
  esac
  per=30; [ $i -eq 0 ] && per=60
  left=$((LIMIT - 15 - SECONDS)); [ $left -lt $per ] && per=$left; [ $per -lt 5 ] && per=5
  t0=$SECONDS
  timeout $per "${pre[@]}" $PY tools/bsp/spread_probe.py child --out $R/proc_$i.json --label $kind --dummy-mib $dummy \
    ${extra[@]+"${extra[@]}"} > $R/proc_$i.log 2>&1
  rc=$?
  echo "proc $i ($kind, dummy $dummy MiB): rc $rc, $((SECONDS - t0)) s (at $SECONDS s)" >> $R/device.txt
  [ -f $R/proc_$i.json ] || echo "{\"label\": \"$kind\", \"dummy_mib\": $dummy, \"ok\": false, \"error\": \"rc $rc, no record: $(tail -1 $R/proc_$i.log | tr -d '\"\\' | cut -c1-150)\"}" > $R/proc_$i.json
  i=$((i + 1))
done
[ -n "$SMI" ] && { kill -INT $SMI 2>/dev/null; sleep 0.3; kill $SMI 2>/dev/null; }
echo "smi samples: $(wc -l < $R/smi.csv 2>/dev/null)" >> $R/device.txt
nvidia-smi -i $GPU -q -d CLOCK,PERFORMANCE,POWER,TEMPERATURE > $R/smi_q_after.txt 2>&1
cat $R/device.txt
timeout 12 $PY tools/bsp/spread_probe.py summary $R --full $R/table_full.txt 2> $R/summary.err > $R/table.txt
tar czf $D/spread.tgz -C $R . 2>/dev/null
cp $R/table.txt $R/table_full.txt $R/procs.csv $R/device.txt $D/ 2>/dev/null
rm -rf $R
cat $D/table.txt
echo "spread_probe: $SECONDS s ($D: $(ls $D | tr '\n' ' '))"
