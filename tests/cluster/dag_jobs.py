"""Every job of a Snakemake dry run, as the cluster would get it, written as JSON.

    python tests/cluster/dag_jobs.py OUT.json -n --profile profiles/slurm --configfile config/smoke.yaml

runs Snakemake's own command line in this process (profiles, workflow profile and --config applied
exactly as for a user) with its dry-run executor wrapped to record each job: rule, local or
submitted, group, threads, resources, and the sbatch options the SLURM executor plugin builds for it
(its get_submit_command and set_gres_string on the real job).  It also lists every rule of the
workflow with its declared resources, so that a rule outside the DAG is checked too.
tests/test_profiles.py reads the file.
"""
import json
import sys

from snakemake import cli
from snakemake.executors import dryrun
from snakemake_executor_plugin_slurm.submit_string import get_submit_command
from snakemake_executor_plugin_slurm.utils import get_job_wildcards, set_gres_string


def _resources(job):
    return {k: v for k, v in job.resources.items() if isinstance(v, (int, float, str))}


def _local(workflow, rule):
    """Workflow.is_local without its first clause (a dry run executes everything locally): a rule
    runs on the submitting host when it has no group and is a localrule or has nothing to run."""
    return rule.group is None and (rule.name in workflow._localrules or rule.norun or rule.is_template_engine)


def _comment(job):
    """The --comment the plugin gives the job (Executor.run_job): how sacct / scontrol name it."""
    wildcards = get_job_wildcards(job)
    return f"rule_{job.name}_wildcards_{wildcards}" if wildcards else f"rule_{job.name}"


def _sbatch(job):
    """The sbatch options the plugin builds for the job (account checks aside: they need sacctmgr)."""
    partition = job.resources.get("slurm_partition")
    params = dict(run_uuid="dry-run", slurm_logfile="slurm.log", comment_str=_comment(job), account="",
                  partition=f"-p {partition}" if partition else "", workdir="")
    return get_submit_command(job, params) + set_gres_string(job)


def main(out, argv):
    jobs, rules = [], []
    run_job = dryrun.Executor.run_job

    def record(self, job):
        members = list(job.jobs) if job.is_group() else [job]
        workflow = members[0].dag.workflow
        local = not job.is_group() and _local(workflow, job.rule)
        if not rules:
            rules.extend({"rule": r.name, "local": _local(workflow, r),
                          "declared": sorted(r.resources.keys())} for r in workflow.rules)
        jobs.append({
            "name": job.name,
            "group": job.groupid if job.is_group() else None,
            "local": local,
            "threads": job.threads,
            "resources": _resources(job),
            "sbatch": None if local else _sbatch(job),
            "comment": None if local else _comment(job),
            "members": [{"rule": j.rule.name, "wildcards": dict(j.wildcards_dict), "threads": j.threads,
                         "resources": _resources(j)} for j in members],
        })
        run_job(self, job)

    dryrun.Executor.run_job = record
    try:
        cli.main(argv)
    except SystemExit as exc:
        if exc.code:
            raise
    with open(out, "w") as f:
        json.dump({"argv": argv, "rules": rules, "jobs": jobs}, f, indent=1)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])
