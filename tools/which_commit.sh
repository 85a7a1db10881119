#!/usr/bin/env bash
# Which commits hold the solver package of a result: run.json's git.solver_tree (the git tree id of
# solver/ as it was on disk, solver/provenance.py tree_id) against `git rev-parse COMMIT:solver`.
#   usage: bash tools/which_commit.sh TREE_ID [REV_RANGE]     (default range: --all)
# Prints every matching commit, newest first; none: the package was not committed as it ran.
set -u
tree=${1:?usage: which_commit.sh TREE_ID [REV_RANGE]}
git rev-list ${2:---all} | while read -r c; do
  [ "$(git rev-parse -q --verify "$c:solver" 2>/dev/null)" = "$tree" ] && git log -1 --format='%h %ad %s' --date=short "$c"
done
