#!/usr/bin/env bash
# One device call of a session (issues #12-#14): same-call before/after bench of the changed code
# against a base tree, then the correctness checks of the final code.  From the repository root:
#   OUT=... BASE=_dev/base SOLVER_SOURCE_COMMIT=... bash tools/bsp/session_device.sh PART
# PART: lean    a minimal final call (below)
#       ab      base vs this tree, interleaved: cupy standard / 6x65x129 / fine (200 steps after 5),
#               numba 16 threads standard (20 after 2; the first run of each tree fills its JIT cache)
#       checks  every gpu test, the coarse 0.1 ps validation (cupy, defaults), two 10-step runs each of
#               the coarse, 6x65x129 and standard meshes compared byte for byte
#       final   a lean call for the final code: gpu tests (FINAL_TESTS=0: none), validation, bitwise, start-up, the cupy bench
#       x4      a final call on a 4-GPU host: the parts above in parallel lanes (below)
#       fast2   numerics.bte_kernels fast2 as a default candidate: kernel A/B, tests, validation, bitwise
#       tile    numerics.wenox_kernel tile against walk (issue #13): the standard mesh 3 rounds (200 after 5) and the
#               fine mesh 2 rounds (100 after 5) interleaved, then with tile the coarse 0.1 ps validation and two
#               10-step standard runs byte for byte (~70 s on an H200, session 21)
#       speculate  numerics.bte_speculate false against true as `tile` does (standard 3 rounds, fine 2), then with it
#               the coarse 0.1 ps validation and two 10-step standard runs byte for byte (session 23)
#       graph_spec  numerics.bte_graph false against true as `tile` does, numerics.bte_speculate on (session 23)
#       hybrid  numerics.contact_rule hybrid on two subthreshold I-V points (HYBRID_S s, one per GPU)
#       bench   the bsp_bench cases of config/gpu.yaml (cupy, 200 after 5; numba 16/8/4/2/1 threads)
#               and the authors' Newton on three meshes, for the same-call comparison
# Logs and tables go to $OUT/<part>/ (packed as $OUT/<part>.tgz); a short table is printed last.
PY=python3; . "$(dirname "$0")/_preamble.sh"  # set -u, env (PYTHONPATH: tools/*.py import solver from this tree), OUT
PART=${1:?part: ab | graph | graph_spec | tile | speculate | checks | bench | final | lean | x4 | fast2 | hybrid}
BASE=${BASE:-_dev/base}
L=/tmp/session_$PART; rm -rf "$L"; mkdir -p "$L"
t0=$SECONDS; left() { echo $(( $1 - (SECONDS - t0) )); }
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > "$L/nvidia_smi.csv"
echo "${SOLVER_SOURCE_COMMIT:-unknown}" > "$L/commit.txt"
CFG=config/bsp/dgmosfet.yaml
STD=6x65x65x300x48; NZ129=6x65x129x300x48; FINE=6x129x129x600x96
# bench TREE NAME ARGS...: python -m solver bsp bench in TREE, output in $L/NAME
bench() {
  local tree=$1 name=$2; shift 2
  local commit=${SOLVER_SOURCE_COMMIT:-unknown}; [ -f "$tree/COMMIT" ] && commit=$(cat "$tree/COMMIT")
  ( cd "$tree" && SOLVER_SOURCE_COMMIT=$commit NUMBA_CACHE_DIR=/tmp/numba_cache_$(basename "$tree") timeout 300 $PY -m solver bsp bench $CFG "$@" \
      --out "$L/$name" > "$L/$name.log" 2>&1 ) || echo "bench $name: exit $?"
}
row() { tail -n +2 "$L/$1/steps.csv" 2>/dev/null | cut -d, -f1-9 | sed "s/^/$1,/"; }
# validate_repeat LIMIT TAG [OPTIONS...]: the coarse 0.1 ps validation (cupy, LIMIT s) and two 10-step standard runs
# compared byte for byte, both with OPTIONS; TAG ("" or a name) names the /tmp folders and the lines of bitwise.txt
validate_repeat() {
  local lim=$1 tag=$2 r f; shift 2
  local v=/tmp/val${tag:+_$tag} rp=/tmp/rep${tag:+_$tag}
  echo "== validation${tag:+ with $tag} ($((SECONDS-t0)) s)"
  timeout "$lim" $PY -m solver run config/coarse.yaml --out "$v" --backend cupy --no-progress "$@" > "$L/validation_run.log" 2>&1
  $PY -m solver bsp validate "$v" --csv "$L/validation_coarse.csv" > "$L/validate.log" 2>&1; tail -7 "$L/validate.log"
  cp "$v/run.json" "$L/validation_run.json"
  echo "== bitwise${tag:+ with $tag} ($((SECONDS-t0)) s)"
  for r in 1 2; do
    timeout 40 $PY -m solver run config/standard.yaml --out "${rp}_$r" --set time.steps=10 --set time.t_end_ps=null \
      --set output.checkpoint_every_steps=0 --no-progress --backend cupy "$@" > "$L/repeat_$r.log" 2>&1
  done
  for f in profiles.csv scalars.csv; do
    cmp "${rp}_1/$f" "${rp}_2/$f" && echo "standard${tag:+ $tag} $f identical"
  done 2>&1 | tee "$L/bitwise.txt"
}
# interleave KEY V1 V2: numerics.KEY = V1 / V2 interleaved, each a process: the standard mesh 3 rounds (200 steps after
# 5), the fine mesh 2 rounds (100 after 5), runs named std_<V>_<round> / fine_<V>_<round>; $L/summary.csv of them
interleave() {
  local key=$1 r v; shift
  for r in 1 2 3; do for v in "$@"; do
    echo "== standard round $r $key $v ($((SECONDS-t0)) s)"
    bench . "std_${v}_$r" --set "numerics.$key=$v" --case $STD:cupy:1:200:5
  done; done
  for r in 1 2; do for v in "$@"; do
    echo "== fine round $r $key $v ($((SECONDS-t0)) s)"
    bench . "fine_${v}_$r" --set "numerics.$key=$v" --case $FINE:cupy:1:100:5
  done; done
  echo "part,mesh,backend,threads,steps,step_ms,bte_ms,dens_ms,iter_ms,newton_per_step" > "$L/summary.csv"
  for d in "$L"/*/; do row "$(basename "$d")" >> "$L/summary.csv"; done
}
case $PART in
ab)
  [ -d "$BASE" ] || { echo "no base tree $BASE"; exit 2; }
  for r in 1 2; do
    for t in base new; do
      tree=.; [ $t = base ] && tree=$BASE
      echo "== round $r $t cupy ($((SECONDS-t0)) s)"
      bench $tree cupy_${t}_$r --case $STD:cupy:1:200:5 --case $NZ129:cupy:1:200:5 --case $FINE:cupy:1:200:5
    done
  done
  for r in 1 2; do
    for t in base new; do
      tree=.; [ $t = base ] && tree=$BASE
      echo "== round $r $t numba 16 ($((SECONDS-t0)) s)"
      bench $tree numba16_${t}_$r --case $STD:numba:16:20:2
    done
  done
  echo "== numba 1 thread new ($((SECONDS-t0)) s)"
  bench . numba1_new --case $STD:numba:1:3:1
  echo "part,mesh,backend,threads,steps,step_ms,bte_ms,dens_ms,iter_ms,newton_per_step" > "$L/summary.csv"
  for d in "$L"/*/; do row "$(basename "$d")" >> "$L/summary.csv"; done
  ;;
graph)
  # numerics.bte_graph false / true interleaved (~2.5 min on an H200): the gpu tests of the files the graph and the
  # scalars touch, the standard mesh 3 rounds (200 steps after 5), the fine mesh 2 rounds (100 after 5), then
  # tools/bsp/iv_step_probe.sh (an I-V point's wall per step; its table last)
  echo "== gpu tests ($((SECONDS-t0)) s)"
  timeout 150 $PY -m pytest -m gpu -q -p no:cacheprovider tests/test_bsp_kernels_cuda_bte_graph.py tests/test_bsp_density_probe.py \
      tests/test_bsp_simulation.py tests/test_bsp_steady.py tests/test_bsp_contact_monitor.py tests/test_bsp_kernels_cuda_weno.py > "$L/pytest_gpu.log" 2>&1
  tail -3 "$L/pytest_gpu.log"
  interleave bte_graph false true
  echo "== iv_step_probe ($((SECONDS-t0)) s)"
  OUT=$L timeout 150 bash tools/bsp/iv_step_probe.sh > "$L/ivp.log" 2>&1
  ;;
tile)
  interleave wenox_kernel walk tile
  validate_repeat 90 tile --set numerics.wenox_kernel=tile
  ;;
speculate)
  interleave bte_speculate false true
  validate_repeat 90 speculate --set numerics.bte_speculate=true
  ;;
graph_spec)
  interleave bte_graph false true  # with numerics.bte_speculate as configured (auto: on)
  ;;
checks)
  echo "== gpu tests ($((SECONDS-t0)) s)"
  timeout $(left 330) $PY -m pytest -m gpu -q -p no:cacheprovider tests > "$L/pytest_gpu.log" 2>&1; tail -3 "$L/pytest_gpu.log"
  echo "== validation ($((SECONDS-t0)) s)"
  timeout $(left 450) $PY -m solver run config/coarse.yaml --out /tmp/val --backend cupy --no-progress > "$L/validation_run.log" 2>&1
  $PY -m solver bsp validate /tmp/val --csv "$L/validation_coarse.csv" > "$L/validate.log" 2>&1; tail -7 "$L/validate.log"
  cp /tmp/val/run.json "$L/validation_run.json"; cp /tmp/val/scalars.csv "$L/validation_scalars.csv"
  echo "== bitwise ($((SECONDS-t0)) s)"
  SC="--set time.steps=10 --set time.t_end_ps=null --set output.checkpoint_every_steps=0 --no-progress --backend cupy"
  for c in coarse:config/coarse.yaml standard:config/standard.yaml "nz129:config/standard.yaml --set mesh.NZ=129"; do
    n=${c%%:*}; a=${c#*:}
    for r in 1 2; do timeout 90 $PY -m solver run $a --out /tmp/rep_${n}_$r $SC > "$L/repeat_${n}_$r.log" 2>&1; done
    for f in profiles.csv scalars.csv; do cmp /tmp/rep_${n}_1/$f /tmp/rep_${n}_2/$f && echo "$n $f identical"; done
  done 2>&1 | tee "$L/bitwise.txt"
  echo "== start-up of the standard mesh: imports and cProfile ($((SECONDS-t0)) s)"
  SU="--set time.steps=1 --set time.t_end_ps=null --set output.checkpoint_every_steps=0 --no-progress --backend cupy"
  for r in 1 2 3; do /usr/bin/time -f "%e s wall" $PY -m solver run config/standard.yaml --out /tmp/su_$r $SU > "$L/startup_$r.log" 2>&1; tail -1 "$L/startup_$r.log"; done
  $PY -X importtime -m solver run config/standard.yaml --out /tmp/su_it $SU 2> "$L/importtime.txt" > /dev/null
  sort -t'|' -k2 -n -r "$L/importtime.txt" | head -25 > "$L/importtime_top.txt"
  $PY -m cProfile -s cumulative -m solver run config/standard.yaml --out /tmp/su_cp $SU 2>&1 | head -70 > "$L/cprofile_startup.txt"
  ;;
bench)
  C=""
  for m in 6x33x33x150x24 $STD 6x129x65x300x48 $NZ129 6x65x65x600x48 6x65x65x300x96 6x97x97x450x72 $FINE 6x33x257x150x24; do
    C="$C --case $m:cupy:1:200:5"
  done
  echo "== cupy bench ($((SECONDS-t0)) s)"
  bench . bench_cupy $C
  echo "== numba bench ($((SECONDS-t0)) s)"
  bench . bench_numba --case $STD:numba:16:20:2 --case $STD:numba:8:10:1 --case $STD:numba:4:5:1 \
      --case $STD:numba:2:3:1 --case $STD:numba:1:3:1
  echo "== the authors' Newton ($((SECONDS-t0)) s)"
  bench . bench_cupy_authors_newton --set numerics.iter_start=previous --set numerics.iter_stop=change \
      --set numerics.iter_jacobian=iteration --case $STD:cupy:1:200:5 --case $NZ129:cupy:1:100:5 --case $FINE:cupy:1:100:5
  echo "part,mesh,backend,threads,steps,step_ms,bte_ms,dens_ms,iter_ms,newton_per_step" > "$L/summary.csv"
  for d in bench_cupy bench_numba bench_cupy_authors_newton; do row $d >> "$L/summary.csv"; done
  ;;
final)
  # one lean call for a session's final code (~8-9 min on an H200): every gpu test, the coarse validation,
  # two 10-step runs each of the coarse and standard meshes byte for byte, the start-up
  # (tools/bsp/startup_device.sh, this tree only), and the cupy bsp_bench cases of config/gpu.yaml
  # (200 after 5) plus the standard mesh with numerics.iter_graph=false for the same-call comparison;
  # FINAL_TESTS=0: without the gpu tests (a caller that ran them in another call: tools/bsp/point_checks_device.sh)
  if [ "${FINAL_TESTS:-1}" != 0 ]; then
    echo "== gpu tests ($((SECONDS-t0)) s)"
    timeout $(left 300) $PY -m pytest -m gpu -q -p no:cacheprovider tests > "$L/pytest_gpu.log" 2>&1; tail -3 "$L/pytest_gpu.log"
  fi
  echo "== validation ($((SECONDS-t0)) s)"
  timeout 90 $PY -m solver run config/coarse.yaml --out /tmp/val --backend cupy --no-progress > "$L/validation_run.log" 2>&1
  $PY -m solver bsp validate /tmp/val --csv "$L/validation_coarse.csv" > "$L/validate.log" 2>&1; tail -7 "$L/validate.log"
  cp /tmp/val/run.json "$L/validation_run.json"; cp /tmp/val/scalars.csv "$L/validation_scalars.csv"
  echo "== bitwise ($((SECONDS-t0)) s)"
  SC="--set time.steps=10 --set time.t_end_ps=null --set output.checkpoint_every_steps=0 --no-progress --backend cupy"
  for c in coarse:config/coarse.yaml standard:config/standard.yaml; do
    n=${c%%:*}; a=${c#*:}
    for r in 1 2; do timeout 60 $PY -m solver run $a --out /tmp/rep_${n}_$r $SC > "$L/repeat_${n}_$r.log" 2>&1; done
    for f in profiles.csv scalars.csv; do cmp /tmp/rep_${n}_1/$f /tmp/rep_${n}_2/$f && echo "$n $f identical"; done
  done 2>&1 | tee "$L/bitwise.txt"
  echo "== start-up ($((SECONDS-t0)) s)"
  OUT=$L ROUNDS=3 timeout 150 bash tools/bsp/startup_device.sh > "$L/startup.log" 2>&1; tail -2 "$L/startup.log"
  echo "== cupy bench ($((SECONDS-t0)) s)"
  C=""
  for m in 6x33x33x150x24 $STD 6x129x65x300x48 $NZ129 6x65x65x600x48 6x65x65x300x96 6x97x97x450x72 $FINE 6x33x257x150x24; do
    C="$C --case $m:cupy:1:200:5"
  done
  bench . bench_cupy $C
  bench . bench_cupy_no_iter_graph --set numerics.iter_graph=false --case $STD:cupy:1:200:5 --case $NZ129:cupy:1:200:5
  echo "part,mesh,backend,threads,steps,step_ms,bte_ms,dens_ms,iter_ms,newton_per_step" > "$L/summary.csv"
  for d in bench_cupy bench_cupy_no_iter_graph; do row $d >> "$L/summary.csv"; done
  ;;
lean)
  # the least a final call can be (~2.5 min on an H200, for a session with little device time left): the
  # gpu tests of $TESTS (default: the files named below), the coarse validation, two 10-step standard
  # runs byte for byte, and the cupy bench of the standard mesh and NZ = 129 (200 after 5)
  echo "== gpu tests ($((SECONDS-t0)) s)"
  timeout 100 $PY -m pytest -m gpu -q -p no:cacheprovider ${TESTS:-tests/test_bsp_kernels_cuda_eigen_tw.py \
      tests/test_bsp_kernels_cuda_precompile.py tests/test_bsp_iter_graph.py \
      tests/test_bsp_kernels_cuda_rk.py::test_gpu_run_with_rk_fast_path_resumes_bitwise} > "$L/pytest_gpu.log" 2>&1
  tail -3 "$L/pytest_gpu.log"
  validate_repeat 60 ""
  echo "== cupy bench ($((SECONDS-t0)) s)"
  bench . bench_cupy --case $STD:cupy:1:200:5 --case $NZ129:cupy:1:200:5
  echo "part,mesh,backend,threads,steps,step_ms,bte_ms,dens_ms,iter_ms,newton_per_step" > "$L/summary.csv"
  row bench_cupy >> "$L/summary.csv"
  ;;
x4)
  # a final call on a host with 4 GPUs (~6 min): five lanes at once, each on its own GPU and cores
  # (taskset), logs in $L/<lane>.log.  gpu0: the bsp_bench cases of config/gpu.yaml (200 after 5; three
  # runs of the goal meshes, one of the rest), then the start-up; gpu1: every gpu test; gpu2: the coarse
  # validation, two 10-step runs each of the coarse and standard meshes byte for byte, base (BASE) vs this
  # tree on the standard mesh and 6x65x129 (two rounds), the eigen candidates' probe, the ITER kernels of
  # 001 (iter-kernels); gpu3: EXTRA_GPU3 (a script, optional), a host profile of 60 standard steps, an
  # I-V point with numerics.contact_rule hybrid for HYBRID_S s (default 200);
  # cores 32-47: the numba bench rows (16/8/4/2/1 threads), the coarse validation on numba, then EXTRA_CPU (optional).
  NG=$(nvidia-smi -L | wc -l); [ "$NG" -ge 4 ] || { echo "x4 needs 4 GPUs, found $NG"; exit 2; }
  on() { local gpu=$1 cores=$2; shift 2; CUDA_VISIBLE_DEVICES=$gpu taskset -c "$cores" "$@"; }
  lane0() {
    local C=""
    for m in 6x33x33x150x24 $STD 6x129x65x300x48 $NZ129 6x65x65x600x48 6x65x65x300x96 6x97x97x450x72 $FINE 6x33x257x150x24; do
      C="$C --case $m:cupy:1:200:5"
    done
    on 0 0-3 bash -c "$(declare -f bench); L=$L PY=$PY CFG=$CFG SOLVER_SOURCE_COMMIT=${SOLVER_SOURCE_COMMIT:-unknown}; bench . bench_cupy_1 $C"
    for r in 2 3; do
      on 0 0-3 bash -c "$(declare -f bench); L=$L PY=$PY CFG=$CFG SOLVER_SOURCE_COMMIT=${SOLVER_SOURCE_COMMIT:-unknown}; bench . bench_cupy_$r --case $STD:cupy:1:200:5 --case $NZ129:cupy:1:200:5 --case $FINE:cupy:1:200:5"
    done
    OUT=$L/startup_out ROUNDS=3 on 0 0-3 timeout 120 bash tools/bsp/startup_device.sh > "$L/startup.log" 2>&1
  }
  lane1() { on 1 4-7 timeout 330 $PY -m pytest -m gpu -q -p no:cacheprovider tests > "$L/pytest_gpu.log" 2>&1; }
  lane2() {
    on 2 8-11 timeout 90 $PY -m solver run config/coarse.yaml --out /tmp/val --backend cupy --no-progress > "$L/validation_run.log" 2>&1
    $PY -m solver bsp validate /tmp/val --csv "$L/validation_coarse.csv" > "$L/validate.log" 2>&1
    cp /tmp/val/run.json "$L/validation_run.json"
    local SC="--set time.steps=10 --set time.t_end_ps=null --set output.checkpoint_every_steps=0 --no-progress --backend cupy"
    for c in coarse:config/coarse.yaml standard:config/standard.yaml; do
      n=${c%%:*}; a=${c#*:}
      for r in 1 2; do on 2 8-11 timeout 60 $PY -m solver run $a --out /tmp/rep_${n}_$r $SC > "$L/repeat_${n}_$r.log" 2>&1; done
      for f in profiles.csv scalars.csv; do cmp /tmp/rep_${n}_1/$f /tmp/rep_${n}_2/$f && echo "$n $f identical"; done
    done > "$L/bitwise.txt" 2>&1
    if [ -d "$BASE" ]; then
      for r in 1 2; do for t in base new; do
        tree=.; [ $t = base ] && tree=$BASE
        on 2 8-11 bash -c "$(declare -f bench); L=$L PY=$PY CFG=$CFG SOLVER_SOURCE_COMMIT=${SOLVER_SOURCE_COMMIT:-unknown}; bench $tree ab_${t}_$r --case $STD:cupy:1:200:5 --case $NZ129:cupy:1:200:5"
      done; done
    fi
    mkdir -p "$L/eigen_probe"; on 2 8-11 timeout 90 $PY tools/bsp/eigen_tw_probe.py --out "$L/eigen_probe" > "$L/eigen_probe.log" 2>&1
    on 2 8-11 timeout 120 $PY -m solver bsp iter-kernels $CFG --table1 "$L/iter_table1.csv" --table4 "$L/iter_table4.csv" \
      --run-json "$L/iter_kernels.run.json" > "$L/iter_kernels.log" 2>&1 || echo "iter-kernels: exit $?" >> "$L/iter_kernels.log"
  }
  lane3() {
    if [ -n "${EXTRA_GPU3:-}" ]; then OUT=$L/extra_gpu3 on 3 12-15 timeout 170 bash $EXTRA_GPU3 > "$L/extra_gpu3.log" 2>&1; fi
    on 3 12-15 timeout 90 $PY -m cProfile -s tottime -m solver run config/standard.yaml --out /tmp/prof --backend cupy --no-progress \
      --set time.steps=60 --set time.t_end_ps=null --set output.checkpoint_every_steps=0 2>&1 | head -60 > "$L/cprofile_60_steps.txt"
    # the I-V point V_G = -0.2 V, V_DS = 0.4 V (config/gpu.yaml's settings, 2.2 ps) with numerics.contact_rule
    # hybrid, for HYBRID_S seconds (docs/iv.md §11-12: with the reference rule its window means wander and the
    # contact monitor reaches -0.16); stopped by SIGINT, its scalars read from the checkpoint
    on 3 12-15 timeout -s INT -k 15 "${HYBRID_S:-200}" $PY -m solver run config/bsp/dgmosfet.yaml --out /tmp/hyb_iv --backend cupy \
      --no-progress --set bias.V_G=-0.2 --set bias.V_DS=0.4 --set steady.enabled=true --set steady.window_ps=0.2 \
      --set steady.rtol=0.005 --set steady.conservation_tol=0.02 --set time.t_end_ps=2.2 --set time.steps=null \
      --set mesh.N_sbn=6 --set mesh.NX=33 --set mesh.NZ=33 --set mesh.NW=150 --set mesh.NPHI=24 \
      --set output.checkpoint_every_steps=1000 --set numerics.contact_rule=hybrid > "$L/hybrid_iv.log" 2>&1
    $PY tools/bsp/run_scalars.py /tmp/hyb_iv "$L/hybrid_iv_scalars_every20.csv" 20 >> "$L/hybrid_iv.log" 2>&1
    cp /tmp/hyb_iv/run.json "$L/hybrid_iv_run.json" 2>/dev/null
  }
  lanec() {
    on "" 32-47 bash -c "$(declare -f bench); L=$L PY=$PY CFG=$CFG SOLVER_SOURCE_COMMIT=${SOLVER_SOURCE_COMMIT:-unknown}; bench . bench_numba --case $STD:numba:16:20:2 --case $STD:numba:8:10:1 --case $STD:numba:4:5:1 --case $STD:numba:2:3:1 --case $STD:numba:1:3:1"
    # the coarse 0.1 ps validation on numba (issue #14), 16 threads
    NUMBA_NUM_THREADS=16 on "" 32-47 timeout 200 $PY -m solver run config/coarse.yaml --out /tmp/val_numba --backend numba \
      --threads 16 --no-progress > "$L/validation_numba_run.log" 2>&1
    $PY -m solver bsp validate /tmp/val_numba --csv "$L/validation_numba_coarse.csv" > "$L/validate_numba.log" 2>&1
    cp /tmp/val_numba/run.json "$L/validation_numba_run.json" 2>/dev/null
    if [ -n "${EXTRA_CPU:-}" ]; then OUT=$L/extra_cpu on "" 32-47 timeout 170 bash $EXTRA_CPU > "$L/extra_cpu.log" 2>&1; fi
  }
  for l in lane0 lane1 lane2 lane3 lanec; do ( $l; echo "$l done $((SECONDS-t0)) s" ) > "$L/$l.log" 2>&1 & done
  wait
  # GPUSLOT_CHECK: tools/gpuslot_device.sh (--gpu exclusive on this host, ~1 min) once the lanes are done
  if [ -n "${GPUSLOT_CHECK:-}" ] && [ $((SECONDS - t0)) -lt 440 ]; then
    OUT=$L/gpuslot timeout 80 bash tools/gpuslot_device.sh > "$L/gpuslot.log" 2>&1; tail -8 "$L/gpuslot.log"
  fi
  cat "$L"/lane*.log
  tail -3 "$L/pytest_gpu.log"; tail -7 "$L/validate.log"; tail -7 "$L/validate_numba.log"; cat "$L/bitwise.txt"; tail -2 "$L/startup.log"
  echo "part,mesh,backend,threads,steps,step_ms,bte_ms,dens_ms,iter_ms,newton_per_step" > "$L/summary.csv"
  for d in "$L"/bench_* "$L"/ab_*; do [ -d "$d" ] && row "$(basename "$d")" >> "$L/summary.csv"; done
  ;;
fast2)
  # numerics.bte_kernels fast2 as a default candidate (docs/performance-bte-kernels.md §12.3, ~4 min on one GPU):
  # the kernel A/B and fast2's gpu tests (bte_s12_device.sh), then the coarse 0.1 ps validation and two
  # 10-step standard runs byte for byte, both with fast2
  OUT=$L/s12 timeout 160 bash tools/bsp/bte_s12_device.sh > "$L/bte_s12.log" 2>&1; tail -8 "$L/bte_s12.log"
  timeout 90 $PY -m solver run config/coarse.yaml --out /tmp/val2 --backend cupy --no-progress \
    --set numerics.bte_kernels=fast2 > "$L/validation_fast2_run.log" 2>&1
  $PY -m solver bsp validate /tmp/val2 --csv "$L/validation_fast2.csv" > "$L/validate_fast2.log" 2>&1; tail -7 "$L/validate_fast2.log"
  SC="--set time.steps=10 --set time.t_end_ps=null --set output.checkpoint_every_steps=0 --no-progress --backend cupy"
  for r in 1 2; do timeout 40 $PY -m solver run config/standard.yaml --out /tmp/rep2_$r $SC --set numerics.bte_kernels=fast2 \
    > "$L/repeat_fast2_$r.log" 2>&1; done
  for f in profiles.csv scalars.csv; do cmp /tmp/rep2_1/$f /tmp/rep2_2/$f && echo "standard fast2 $f identical"; done | tee "$L/bitwise.txt"
  echo "part,mesh,backend,threads,steps,step_ms,bte_ms,dens_ms,iter_ms,newton_per_step" > "$L/summary.csv"
  ;;
hybrid)
  # numerics.contact_rule hybrid on the subthreshold I-V points that do not settle or fault with the
  # reference rule (docs/iv.md §11-12): V_G -0.2 V / V_DS 0.4 V and -0.3 V / 0.05 V, fresh, the iv study's
  # settings (coarse mesh, steady criterion, 2.2 ps), one point per GPU, for HYBRID_S seconds (default 500);
  # each run's scalars (every 20th row, from the checkpoint if it was stopped) and run.json come back
  # (HYBRID_GPU: both points on that GPU; as the iv study: V_G below -0.2 V starts from a 0.05 ps seed at -0.2 V with a 0.2 ps ramp, docs/iv.md §8)
  NG=$(nvidia-smi -L | wc -l); i=0
  M="--set mesh.N_sbn=6 --set mesh.NX=33 --set mesh.NZ=33 --set mesh.NW=150 --set mesh.NPHI=24 --set numerics.contact_rule=hybrid"
  for pt in "-0.2 0.4" "-0.3 0.05"; do
    set -- $pt; g=$1; d=$2; n=hyb_vg${g}_vds${d}; gpu=${HYBRID_GPU:-$(( i % NG ))}; i=$((i + 1))
    (
      src=""
      if [ "$g" != "-0.2" ]; then
        CUDA_VISIBLE_DEVICES=$gpu timeout 60 $PY -m solver run config/bsp/dgmosfet.yaml --out /tmp/${n}_seed --backend cupy \
          --no-progress --set bias.V_G=-0.2 --set bias.V_DS=$d --set time.t_end_ps=0.05 --set time.steps=null \
          --set continuation.save_final_state=true $M > "$L/${n}_seed.log" 2>&1
        src="--set continuation.init_from=/tmp/${n}_seed --set continuation.ramp_ps=0.2"
      fi
      CUDA_VISIBLE_DEVICES=$gpu timeout -s INT -k 15 "${HYBRID_S:-500}" $PY -m solver run config/bsp/dgmosfet.yaml \
        --out /tmp/$n --backend cupy --no-progress --set bias.V_G=$g --set bias.V_DS=$d --set steady.enabled=true \
        --set steady.window_ps=0.2 --set steady.rtol=0.005 --set steady.conservation_tol=0.02 --set time.t_end_ps=2.2 \
        --set time.steps=null --set output.checkpoint_every_steps=1000 $M $src > "$L/$n.log" 2>&1
    ) &
  done
  wait
  for n in hyb_vg-0.2_vds0.4 hyb_vg-0.3_vds0.05; do
    $PY tools/bsp/run_scalars.py /tmp/$n "$L/${n}_every20.csv" 20 >> "$L/$n.log" 2>&1
    cp /tmp/$n/run.json "$L/${n}_run.json" 2>/dev/null; tail -2 "$L/$n.log"
  done
  echo "part,mesh,backend,threads,steps,step_ms,bte_ms,dens_ms,iter_ms,newton_per_step" > "$L/summary.csv"
  ;;
*) echo "unknown part $PART"; exit 2 ;;
esac
echo "== done ($((SECONDS-t0)) s)"
tar czf "$OUT/$PART.tgz" -C /tmp "$(basename "$L")"
cp "$L/summary.csv" "$OUT/${PART}_summary.csv" 2>/dev/null
column -s, -t < "$L/summary.csv" 2>/dev/null | cut -c1-150
