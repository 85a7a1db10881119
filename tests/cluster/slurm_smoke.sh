#!/usr/bin/env bash
# The smoke workflow submitted through a real SLURM on this machine (docs/cluster.md).
#
#   bash tests/cluster/slurm_smoke.sh          # as root on Debian 12 (CI); rerunnable
#
# Installs SLURM 22.05 and munge from Debian's packages when missing, starts munged, slurmctld and
# slurmd on localhost with a `cpu` and a `gpu` partition (one node with gres gpu:1 backed by
# /dev/null: SLURM allocates it and sets CUDA_VISIBLE_DEVICES, there is no device), runs the smoke
# DAG plus one GPU probe job (tests/cluster/Snakefile) with `--profile profiles/slurm`, then checks
# that every job ran through SLURM, COMPLETED, in the partition with the CPUs, memory and GPU the
# profile asked for, that a second invocation has nothing to do, and stops the daemons on exit.
#
# Accounting without a database: slurmdbd needs MySQL/MariaDB, so the job completion plugin
# jobcomp/filetxt writes one record per finished job and `sacct --completion` reads it (job,
# partition, state, CPUs, exit code).  GRES and requested memory are not in that record (SLURM
# tracks gres/gpu TRES only with slurmdbd), so they come from `scontrol -d show job`, which keeps
# finished jobs for MinJobAge = 1 h.  The executor plugin polls job states with squeue.
#
# The configuration goes to /etc/slurm/ (slurm.conf, gres.conf, marked as this script's and
# removed on exit; an unmarked one is never touched): inside a job the executor plugin runs the
# rule with a nested srun whose environment it strips of every SLURM_* variable, SLURM_CONF
# included, so srun only finds the configuration at its default place.
set -euo pipefail
cd "$(dirname "$0")/../.."
export MPLBACKEND=Agg PYTHONUNBUFFERED=1
t0=$SECONDS

STATE=/tmp/bsp-slurm-smoke             # SLURM and munge state, logs, sockets (wiped at each run)
RESULTS=scratch/slurm-smoke/results    # the workflow's results_dir (git-ignored, apart from results/smoke)
SMK=(snakemake -s tests/cluster/Snakefile --profile profiles/slurm --cores 2 --configfile config/smoke.yaml
     --config results_dir="$RESULTS" --slurm-status-command squeue --slurm-init-seconds-before-status-checks 5
     --slurm-keep-successful-logs)
TARGETS=(all cluster_gpu_probe)

echo "== install SLURM (Debian packages)"
if ! command -v slurmctld >/dev/null || ! command -v slurmd >/dev/null || ! command -v munged >/dev/null \
        || ! command -v sbatch >/dev/null; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
        slurmctld slurmd slurm-client munge >/dev/null
fi
python3 -c "import snakemake_executor_plugin_slurm" 2>/dev/null || python3 -m pip install -q -e ".[slurm]"
slurmctld -V

stop_daemons() {
    # only the daemons this script started, by the pids they wrote
    for pidfile in "$STATE/slurmd.pid" "$STATE/slurmctld.pid" "$STATE/munged.pid"; do
        [ -s "$pidfile" ] || continue
        pid=$(cat "$pidfile")
        if kill -0 "$pid" 2>/dev/null; then
            kill "$pid"
            for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        fi
    done
}
MARK="# written by tests/cluster/slurm_smoke.sh"
for f in /etc/slurm/slurm.conf /etc/slurm/gres.conf; do
    if [ -e "$f" ] && [ "$(head -n 1 "$f")" != "$MARK" ]; then
        echo "$f exists and is not this script's: not touching a real SLURM installation"; exit 1
    fi
done
remove_conf() { rm -f /etc/slurm/slurm.conf /etc/slurm/gres.conf; }
stop_daemons    # left over by an interrupted run
trap 'rc=$?; stop_daemons; [ $rc -eq 0 ] || { echo "== slurmctld / slurmd logs"; tail -n 20 "$STATE"/log/*.log; }; remove_conf; exit $rc' EXIT
rm -rf "$STATE" "$RESULTS"
mkdir -p "$STATE"/{ctld,spool,log} "$STATE/munge"

echo "== start munged"
if [ ! -s /etc/munge/munge.key ]; then mungekey --create --keyfile /etc/munge/munge.key; fi
chown munge:munge /etc/munge/munge.key "$STATE/munge" && chmod 711 "$STATE/munge"
runuser -u munge -- munged --socket "$STATE/munge/munge.socket" --pid-file "$STATE/munge/munged.pid" \
    --log-file "$STATE/munge/munged.log" --seed-file "$STATE/munge/munged.seed"
for _ in $(seq 50); do [ -s "$STATE/munge/munged.pid" ] && break; sleep 0.1; done
cp "$STATE/munge/munged.pid" "$STATE/munged.pid"

echo "== start slurmctld, slurmd"
node=$(hostname -s)
cpus=$(nproc)
mem_mb=$(awk '/MemTotal/ {print int($2 / 1024 * 0.8)}' /proc/meminfo)
mkdir -p /etc/slurm
cat > /etc/slurm/slurm.conf <<EOF
$MARK
ClusterName=bspsmoke
SlurmctldHost=$node(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$STATE/munge/munge.socket
MpiDefault=none
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
GresTypes=gpu
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/filetxt
JobCompLoc=$STATE/jobcomp.txt
MinJobAge=3600
ReturnToService=2
StateSaveLocation=$STATE/ctld
SlurmdSpoolDir=$STATE/spool
SlurmctldPidFile=$STATE/slurmctld.pid
SlurmdPidFile=$STATE/slurmd.pid
SlurmctldLogFile=$STATE/log/slurmctld.log
SlurmdLogFile=$STATE/log/slurmd.log
NodeName=$node NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=$mem_mb Gres=gpu:1 State=UNKNOWN
PartitionName=cpu Nodes=$node Default=YES MaxTime=INFINITE State=UP
PartitionName=gpu Nodes=$node MaxTime=INFINITE State=UP
EOF
printf '%s\nNodeName=%s Name=gpu Count=1 File=/dev/null\n' "$MARK" "$node" > /etc/slurm/gres.conf
slurmctld
slurmd
for i in $(seq 60); do
    [ "$(sinfo -h -N -p gpu -o %t 2>/dev/null)" = idle ] && [ "$(sinfo -h -N -p cpu -o %t 2>/dev/null)" = idle ] && break
    [ "$i" = 60 ] && { echo "node not idle after 30 s"; sinfo; exit 1; }
    sleep 0.5
done
sinfo

echo "== the plan: every job the profile submits ($((SECONDS - t0)) s)"
python3 tests/cluster/dag_jobs.py "$STATE/plan.json" "${SMK[@]:1}" -n -F "${TARGETS[@]}" >/dev/null

echo "== smoke workflow through SLURM ($((SECONDS - t0)) s)"
rm -rf .snakemake/slurm_logs
"${SMK[@]}" "${TARGETS[@]}"

echo "== sacct --completion (jobcomp/filetxt, $((SECONDS - t0)) s)"
sacct -c --format=JobID,JobName%36,Partition,State,AllocCPUS,Elapsed,ExitCode
echo "== every planned job ran through SLURM as planned (jobcomp record + scontrol -d show job)"
python3 tests/cluster/check_jobs.py "$STATE/plan.json" "$STATE/jobcomp.txt" "$(ls "$RESULTS"/*/cluster/gpu_probe.txt)"

echo "== second invocation must do nothing"
out=$("${SMK[@]}" -n "${TARGETS[@]}" 2>&1)
echo "$out" | tail -3
echo "$out" | grep -q "Nothing to be done" || { echo "second invocation is not a no-op"; exit 1; }
echo "== SLURM smoke passed in $((SECONDS - t0)) s"
