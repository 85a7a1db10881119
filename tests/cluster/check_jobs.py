"""Check the jobs a SLURM run made against the jobs the profile planned (tests/cluster/slurm_smoke.sh).

    python tests/cluster/check_jobs.py PLAN.json JOBCOMP.txt PROBE.txt

PLAN.json: tests/cluster/dag_jobs.py on the same command line (-n -F): every job to submit with its
partition, threads, mem_mb and gpu.  JOBCOMP.txt: the jobcomp/filetxt records of the finished jobs
(what `sacct --completion` reads): state, partition, CPUs, memory.  `scontrol -d show job` adds the
plugin's --comment (which rule or group) and the GRES given to the job.  PROBE.txt: what the GPU
probe job saw.  Prints one row per SLURM job and exits non-zero on any difference.
"""
import collections
import json
import re
import subprocess
import sys


def fields(line):
    """KEY=VALUE pairs of a jobcomp record or of `scontrol -o show job` (values without spaces)."""
    return dict(re.findall(r"(\S+?)=(\S*)", line))


def mem_mb(tres):
    """Memory of a TRES string 'cpu=2,mem=1001M,node=1' in MB."""
    m = re.search(r"mem=(\d+(?:\.\d+)?)([MGT])", tres)
    return round(float(m.group(1)) * {"M": 1, "G": 1024, "T": 1024**2}[m.group(2)]) if m else None


def ran(jobcomp):
    """Every job SLURM finished: id -> (comment, state, partition, cpus, mem_mb, gres)."""
    out = {}
    for line in open(jobcomp):
        rec = fields(line)
        show = subprocess.run(["scontrol", "-d", "-o", "show", "job", rec["JobId"]], capture_output=True, text=True,
                              check=True).stdout
        job = fields(show)
        gres = job.get("JOB_GRES") or job.get("GRES") or ""
        out[rec["JobId"]] = (job.get("Comment", ""), rec["JobState"], rec["Partition"], int(rec["ProcCnt"]),
                             mem_mb(rec["Tres"]), "" if gres in ("(null)", "N/A") else gres)
    return out


def main(plan_file, jobcomp, probe):
    plan = [j for j in json.load(open(plan_file))["jobs"] if not j["local"]]
    planned = collections.defaultdict(list)
    members = collections.defaultdict(list)  # group comment -> mem_mb of every member job
    for j in plan:
        planned[j["comment"]].append((j["resources"]["slurm_partition"], j["threads"], j["resources"]["mem_mb"],
                                      int(j["resources"].get("gpu", 0))))
        if j["group"]:
            members[j["comment"]] += [m["resources"]["mem_mb"] for m in j["members"]]
    jobs = ran(jobcomp)
    print(f"{'JobID':>6}  {'rule / group (sbatch --comment)':<58} {'Partition':<9} {'State':<10} {'AllocCPUS':>9} "
          f"{'ReqMem':>8}  AllocGRES")
    got = collections.defaultdict(list)
    for jid, (comment, state, partition, cpus, mem, gres) in sorted(jobs.items(), key=lambda kv: int(kv[0])):
        print(f"{jid:>6}  {comment[:58]:<58} {partition:<9} {state:<10} {cpus:>9} {str(mem) + 'M':>8}  {gres or '-'}")
        got[comment].append((partition, cpus, mem, 1 if gres.startswith("gpu") else 0, state))

    bad = []
    for comment in sorted(set(planned) | set(got)):
        want, have = sorted(planned.get(comment, [])), sorted(got.get(comment, []))
        if len(want) != len(have):
            bad.append(f"{comment}: {len(want)} job(s) planned, {len(have)} ran through SLURM")
            continue
        if comment in members:
            # Which members share a group job depends on the order jobs become ready, so the memory
            # of each group job is checked against its possible range: its largest member, all members.
            want = sorted((w[0], w[1], w[3]) for w in want)
            lo, hi = max(members[comment]), sum(members[comment])
            bad += [f"{comment}: {h[2]} MB outside [{lo}, {hi}]" for h in have if not lo <= h[2] <= hi]
            have = [(h[0], h[1], h[3], h[4]) for h in have]
        for w, h in zip(want, sorted(have)):
            if h[-1] != "COMPLETED":
                bad.append(f"{comment}: state {h[-1]}")
            if w != h[:-1]:
                bad.append(f"{comment}: planned (partition, cpus, [mem_mb,] gpus) = {w}, SLURM ran {h[:-1]}")
    seen = open(probe).read()
    print(f"GPU probe: {seen.strip()}")
    if "partition=gpu" not in seen or "cuda_visible_devices=none" in seen:
        bad.append(f"the GPU probe did not run in the gpu partition with a GPU: {seen.strip()}")
    n_gpu = sum(1 for c in got.values() for h in c if h[3])
    print(f"{len(jobs)} SLURM jobs for {len(plan)} planned submissions ({n_gpu} with a GPU); "
          f"{sum(len(j['members']) for j in plan)} rule jobs inside them")
    if bad:
        print("MISMATCH:\n  " + "\n  ".join(bad))
        sys.exit(1)


if __name__ == "__main__":
    main(*sys.argv[1:])
