#!/usr/bin/env bash
# Submit one job file with the site's resources (slurm/site.env):
#   slurm/submit.sh [--dry-run] JOB [sbatch options...]
# JOB is a job file or its name (grpo, evaluate, ...). Job settings go in the environment:
#   EXP=exp10 slurm/submit.sh grpo
#   CHECKPOINTS=my_list.txt slurm/submit.sh evaluate --array=0-3
# Options after JOB come last, so they win over the site's (e.g. --time=1:00:00).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
source "$ROOT/slurm/lib.sh"

[ -n "${SITE_ENV:-}" ] && SITE_ENV=$(realpath -m "$SITE_ENV")
dry_run=0
if [ "${1:-}" = --dry-run ]; then dry_run=1; shift; fi
[ $# -ge 1 ] || { sed -n '2,7s/^# \{0,1\}//p' "$0" >&2; exit 2; }
job=$1
shift
[ -f "$job" ] || job="$ROOT/slurm/${job%.sbatch}.sbatch"
[ -f "$job" ] || relrl_die "no job file $1 (see slurm/*.sbatch)"

cd "$ROOT"
if [ "$dry_run" = 1 ]; then load_site_env --example-if-missing; else load_site_env; fi
kind=$(job_kind "$job")
site_sbatch_args "$kind"
export RELRL_ROOT="$ROOT" SITE_ENV
command=(sbatch "${SBATCH_ARGS[@]}" "$@" "$job")
if [ "$dry_run" = 1 ]; then
    printf '%q ' "${command[@]}"
    echo
else
    "${command[@]}"
fi
