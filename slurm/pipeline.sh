#!/usr/bin/env bash
# Submit the whole study as one chain of SLURM jobs, each starting when the jobs it needs
# have succeeded (--dependency=afterok; a failure cancels what depends on it):
#
#   generate -> screen array -> merge -> SFT fold array -> GRPO exp7 ----+-> evaluate array -> compare
#                                    \--> GRPO exp10 (needs no SFT) -----+
#
#   slurm/pipeline.sh [--dry-run]
#
# Settings come from slurm/site.env (or SITE_ENV=file; a dry run without either shows the jobs
# with slurm/site.env.example's settings and says so); any of them can be overridden from the
# environment, e.g. MODEL=tiny RUN_DIR=runs/try slurm/pipeline.sh. The evaluation covers the
# SFT adapter of fold SFT_FOLD and checkpoint-N of both GRPO runs for N in EVAL_STEPS; its list
# is written to RUN_DIR/checkpoints.txt. The jobs read RUN_DIR/site.env, a copy of the settings
# made at submission. Job logs go to RUN_DIR/logs/. Prints "stage job-id" lines; --dry-run
# prints the sbatch command lines instead and submits nothing. TRAIN_NODES=N and/or
# TRAIN_GPUS_PER_NODE=G send SFT and GRPO data parallel over N nodes x G GPUs.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
source "$ROOT/slurm/lib.sh"

[ -n "${SITE_ENV:-}" ] && SITE_ENV=$(realpath -m "$SITE_ENV")
dry_run=0
case "${1:-}" in
    --dry-run) dry_run=1 ;;
    "") ;;
    *) sed -n '2,16s/^# \{0,1\}//p' "$0" >&2; exit 2 ;;
esac

cd "$ROOT"
if [ "$dry_run" = 1 ]; then load_site_env --example-if-missing; else load_site_env; fi
need MODEL RUN_DIR SCREEN_SHARDS SFT_FOLDS SFT_FOLD EVAL_STEPS
export RELRL_ROOT="$ROOT" SITE_ENV
logs="$RUN_DIR/logs"
list="$RUN_DIR/checkpoints.txt"

# submit STAGE JOB [sbatch options]: submit (or print) one job; sets JOB_ID.
submit() {
    local stage=$1 job="slurm/$2.sbatch" output kind
    shift 2
    kind=$(job_kind "$job")
    site_sbatch_args "$kind"
    if grep -q '^#SBATCH --array' "$job" || [[ " $* " == *" --array="* ]]; then
        output="$logs/%x-%A_%a.out"
    else
        output="$logs/%x-%j.out"
    fi
    local command=(sbatch --parsable "${SBATCH_ARGS[@]}" --output="$output" "$@" "$job")
    if [ "$dry_run" = 1 ]; then
        JOB_ID="<$stage>"
        show "${command[@]}"
    else
        JOB_ID=$("${command[@]}") ||
            relrl_die "sbatch refused the $stage job; the jobs listed above are queued (scancel them)"
        JOB_ID=${JOB_ID%%;*}
        echo "$stage $JOB_ID"
    fi
}

# show WORD...: the words as a command line, quoted only where the shell needs it.
show() {
    local word line=()
    for word in "$@"; do
        if [[ "$word" =~ ^[][A-Za-z0-9_./:=,%@+\<\>-]+$ ]]; then line+=("$word"); else line+=("$(printf '%q' "$word")"); fi
    done
    echo "${line[*]}"
}

after() { echo "--dependency=afterok:$(IFS=:; echo "$*") --kill-on-invalid-dep=yes"; }

# train_resources: the training stages' data-parallel allocation when TRAIN_NODES or
# TRAIN_GPUS_PER_NODE is set (one task per node; the job runs torchrun on every GPU, see
# slurm/distributed.sh), else nothing: one GPU as the site gives it.
train_resources() {
    [ -n "${TRAIN_NODES:-}${TRAIN_GPUS_PER_NODE:-}" ] || return 0
    echo "--nodes=${TRAIN_NODES:-1} --ntasks-per-node=1${TRAIN_GPUS_PER_NODE:+ --gres=gpu${SITE_GPU_TYPE:+:$SITE_GPU_TYPE}:$TRAIN_GPUS_PER_NODE}"
}

checkpoints=("$RUN_DIR/sft/adapters/fold_$SFT_FOLD sft-fold_$SFT_FOLD")
for step in $EVAL_STEPS; do
    for exp in exp7 exp10; do
        checkpoints+=("$RUN_DIR/grpo_$exp/checkpoint-$step grpo_$exp-ckpt-$step")
    done
done
if [ "$dry_run" = 1 ]; then
    echo "# would write $list:"
    printf '#   %s\n' "${checkpoints[@]}"
else
    mkdir -p "$logs"
    printf '%s\n' "${checkpoints[@]}" >"$list"
    # The jobs read a copy: editing slurm/site.env later does not change a queued study.
    [ "$SITE_ENV" -ef "$RUN_DIR/site.env" ] || cp "$SITE_ENV" "$RUN_DIR/site.env"
    SITE_ENV=$(realpath "$RUN_DIR/site.env")
fi

# shellcheck disable=SC2046  # after() prints two options
{
    submit generate generate_data
    generate=$JOB_ID
    submit screen screen --array=0-$((SCREEN_SHARDS - 1)) $(after "$generate")
    screen=$JOB_ID
    submit merge screen_merge $(after "$screen")
    merge=$JOB_ID
    submit sft sft_kfold --array=0-$((SFT_FOLDS - 1)) $(train_resources) $(after "$merge")
    sft=$JOB_ID
    submit grpo_exp7 grpo --export=ALL,EXP=exp7 $(train_resources) $(after "$sft")
    grpo7=$JOB_ID
    submit grpo_exp10 grpo --export=ALL,EXP=exp10 $(train_resources) $(after "$merge")
    grpo10=$JOB_ID
    submit evaluate evaluate --array=0-$((${#checkpoints[@]} - 1)) \
        --export=ALL,CHECKPOINTS="$list" $(after "$grpo7" "$grpo10")
    evaluate=$JOB_ID
    submit compare compare $(after "$evaluate")
}
