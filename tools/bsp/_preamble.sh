# The common start of the current tools/bsp device scripts; sourced from the repository root:
#   [BSP_OUT_DEFAULT=DIR] [BSP_WHL=1] [BSP_COMMIT=require|git]; . "$(dirname "$0")/_preamble.sh"
# (the three settings: plain shell variables of the script, set just before; none is exported).  It:
#   sets -u; exports PYTHONUNBUFFERED=1, MPLBACKEND=Agg and PYTHONPATH with this tree first (what was set
#   stays after it; nothing added where the tree is on it already);
#   BSP_COMMIT=require: exits 2 unless SOLVER_SOURCE_COMMIT is set (the device copy's .git may be stale and
#   every run.json must name the code); BSP_COMMIT=git: SOLVER_SOURCE_COMMIT defaults to `git rev-parse HEAD`
#   (else unknown); otherwise it is left as it is;
#   OUT: the caller's, else BSP_OUT_DEFAULT, else an error; the folder is made.  PY=${PY:-python3};
#   BSP_WHL=1 and a folder .whl (the carried Snakemake wheels): installs them into /tmp/site (no index, no
#   dependencies) and puts /tmp/site first on PYTHONPATH and /tmp/site/bin first on PATH;
#   bsp_machine: prints the machine tag of results/<machine>/ (solver.provenance.machine_tag).
# BSP_PREAMBLE_DRY=1 (the caller's): prints these settings and exits 0 here, before anything of the script
# runs (tests/test_tools_bsp_preamble.py runs every script that sources this file so, without a GPU).
set -u
export PYTHONUNBUFFERED=1 MPLBACKEND=Agg
case ":${PYTHONPATH:-}:" in
    *":$PWD:"*) ;;
    *) export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} ;;
esac
case "${BSP_COMMIT:-}" in
    require)
        if [ -z "${SOLVER_SOURCE_COMMIT:-}" ]; then  # the copy's .git is stale: run.json must name the code
            echo "set SOLVER_SOURCE_COMMIT to the commit of this code (it goes into every run.json)" >&2
            exit 2
        fi ;;
    git) export SOLVER_SOURCE_COMMIT=${SOLVER_SOURCE_COMMIT:-$(git rev-parse HEAD 2>/dev/null || echo unknown)} ;;
    "") ;;
    *) echo "_preamble.sh: BSP_COMMIT is require, git or unset, not $BSP_COMMIT" >&2; exit 2 ;;
esac
OUT=${OUT:-${BSP_OUT_DEFAULT:-}}
: "${OUT:?set OUT}"
mkdir -p "$OUT"
PY=${PY:-python3}
if [ "${BSP_WHL:-0}" = 1 ] && [ -d .whl ]; then
    if [ "${BSP_PREAMBLE_DRY:-0}" = 1 ]; then
        echo "preamble: would install .whl/*.whl into /tmp/site"
    else
        python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
            && export PYTHONPATH=/tmp/site:$PYTHONPATH PATH=/tmp/site/bin:$PATH
    fi
fi
bsp_machine() { $PY -c "from solver.provenance import machine_tag; print(machine_tag())"; }
if [ "${BSP_PREAMBLE_DRY:-0}" = 1 ]; then
    echo "preamble: OUT=$OUT PY=$PY PYTHONPATH=$PYTHONPATH SOLVER_SOURCE_COMMIT=${SOLVER_SOURCE_COMMIT:-} MPLBACKEND=$MPLBACKEND PYTHONUNBUFFERED=$PYTHONUNBUFFERED"
    exit 0
fi
