#!/usr/bin/env bash
# Issue #18: where an I-V point's wall time per step goes, on one GPU (<= ~90 s).  Run from the repository root:
#     OUT=... SOLVER_SOURCE_COMMIT=... bash tools/bsp/iv_step_probe.sh      (optional: IVP_STEPS=3000)
# IVP_MESH (default 6x33x33x150x24; e.g. 6x65x65x300x48, the standard study's, docs/iv.md §21) and IVP_VARIANTS (a
# subset of the names below, in order; default the first five) are probe settings, not variants of the solver.
# The point -0.2 V / 0.4 V of config/gpu.yaml's iv study (coarse mesh 6x33x33x150x24, cupy, steady monitor on,
# checkpoints every 500 steps) runs IVP_STEPS steps fresh under each variant, one process each, back to back:
#   hyb_s1     numerics.contact_rule=hybrid, output.scalars_every=1, numerics.bte_graph=false (the campaign's
#              low-V_G points as they ran)
#   hyb_s1_g   hyb_s1 with numerics.bte_graph=true
#   hyb_s10_g  hyb_s1_g with output.scalars_every=10
#   ref_s1     the authors' contact rule (the points above V_G = -0.2 V), numerics.bte_graph=false
#   ref_s1_g   ref_s1 with numerics.bte_graph=true
#   hyb_s1_g_ck0, ref_s1_g_ck0   hyb_s1_g, ref_s1_g without checkpoints (output.checkpoint_every_steps=0): what the
#              checkpoints every 500 steps cost (on the standard mesh Phi is 135 MB)
# then hyb_s1 once more under cProfile (1000 steps).  Per variant: wall per step (run.json summary.wall_s over the
# steps, start-up excluded), the step timer's mean and the part outside it (scalars rows, monitor, checkpoints, and the
# first and last snapshot and profiles before the run's end).
# $OUT/ivp/: table.txt, ivp.tgz (every run.json, log, the profile's top functions).
BSP_COMMIT=require
. "$(dirname "$0")/_preamble.sh"
D=$OUT/ivp; mkdir -p "$D"
R=$(mktemp -d /tmp/ivp.XXXXXX)
N=${IVP_STEPS:-3000}
IFS=x read -r NSB NX NZ NW NPHI <<< "${IVP_MESH:-6x33x33x150x24}"
BASE=(--set mesh.N_sbn=$NSB --set mesh.NX=$NX --set mesh.NZ=$NZ --set mesh.NW=$NW --set mesh.NPHI=$NPHI
      --set bias.V_G=-0.2 --set bias.V_DS=0.4 --set time.steps=$N --set time.t_end_ps=3.0
      --set steady.enabled=true --set steady.window_ps=0.2 --set steady.rtol=0.005 --set steady.conservation_tol=0.02
      --set output.checkpoint_every_steps=500)
declare -A V=(
    [hyb_s1]="--set numerics.contact_rule=hybrid --set output.scalars_every=1 --set numerics.bte_graph=false"
    [hyb_s1_g]="--set numerics.contact_rule=hybrid --set output.scalars_every=1 --set numerics.bte_graph=true"
    [hyb_s10_g]="--set numerics.contact_rule=hybrid --set output.scalars_every=10 --set numerics.bte_graph=true"
    [ref_s1]="--set output.scalars_every=1 --set numerics.bte_graph=false"
    [ref_s1_g]="--set output.scalars_every=1 --set numerics.bte_graph=true"
    [hyb_s1_g_ck0]="--set numerics.contact_rule=hybrid --set output.scalars_every=1 --set numerics.bte_graph=true --set output.checkpoint_every_steps=0"
    [ref_s1_g_ck0]="--set output.scalars_every=1 --set numerics.bte_graph=true --set output.checkpoint_every_steps=0"
)
VARIANTS=${IVP_VARIANTS:-hyb_s1 hyb_s1_g hyb_s10_g ref_s1 ref_s1_g}
for v in $VARIANTS; do [ -n "${V[$v]:-}" ] || { echo "IVP_VARIANTS: unknown variant $v (known: ${!V[*]})" >&2; exit 2; }; done
for v in $VARIANTS; do
    # shellcheck disable=SC2086
    timeout 120 $PY -m solver run config/bsp/dgmosfet.yaml --out "$R/$v" --backend cupy --threads 1 --no-progress \
        "${BASE[@]}" ${V[$v]} > "$R/$v.log" 2>&1 || echo "$v: exit $?" >> "$R/failed.txt"
done
timeout 120 $PY -m cProfile -o "$R/prof.out" -m solver run config/bsp/dgmosfet.yaml --out "$R/prof" --backend cupy \
    --threads 1 --no-progress "${BASE[@]}" --set time.steps=1000 ${V[hyb_s1]} > "$R/prof.log" 2>&1
$PY - "$R" $VARIANTS > "$D/table.txt" <<'EOF'
import json, pstats, sys
from pathlib import Path
r = Path(sys.argv[1])
print(f"{'variant':10s} {'steps':>6s} {'wall/step ms':>12s} {'step ms':>8s} {'outside ms':>10s} {'BTE ms':>7s} {'ITER ms':>7s}")
for v in sys.argv[2:]:
    p = r / v / "run.json"
    if not p.exists():
        print(f"{v:10s} (no run.json)"); continue
    j = json.loads(p.read_text()); s = j["summary"]; m = j["timers"]["mean_per_step_s"]
    wall = (s["wall_s"] - s["startup_s"]) / s["steps"] * 1e3
    print(f"{v:10s} {s['steps']:6d} {wall:12.3f} {m['step'] * 1e3:8.3f} {wall - m['step'] * 1e3:10.3f} "
          f"{m.get('step/BTE', 0) * 1e3:7.3f} {m.get('step/ITER', 0) * 1e3:7.3f}")
if (r / "prof.out").exists():
    with open(r / "prof_top.txt", "w") as f:
        st = pstats.Stats(str(r / "prof.out"), stream=f); st.sort_stats("tottime").print_stats(40)
        st.sort_stats("cumulative").print_stats(60)
    print("profile: prof_top.txt")
EOF
tar czf "$D/ivp.tgz" -C "$R" --exclude='*.h5' . 2>/dev/null
cat "$D/table.txt"
