# Sourced by every job file, after it has set ROOT (the repository) and before any work:
# loads the site settings, gives the job a Python to run, and offers the checks and the
# signal handling the job files share. Bad input stops the job here, in its first second.

# shellcheck source=slurm/lib.sh
source "$ROOT/slurm/lib.sh"

# need_file PATH... : every input exists (a file, or a folder such as an adapter).
need_file() {
    local path
    for path in "$@"; do
        [ -e "$path" ] || relrl_die "input missing: $path (has the stage that writes it finished?)"
    done
}

# array_part: "INDEX COUNT" of this task within its array (0-based, whatever the array's
# first number), or "0 1" outside an array. The array must be a plain range such as 0-3.
array_part() {
    if [ -z "${SLURM_ARRAY_TASK_ID:-}" ]; then
        echo "0 1"
        return
    fi
    # shellcheck disable=SC2153  # set by SLURM in array tasks
    local index=$((SLURM_ARRAY_TASK_ID - SLURM_ARRAY_TASK_MIN)) count=$SLURM_ARRAY_TASK_COUNT
    [ "$index" -lt "$count" ] || relrl_die "--array must be a plain range such as 0-3, not a list or a step"
    echo "$index $count"
}

# adapter_label PATH: a name for an adapter folder in tables and file names: <run>-<name>,
# e.g. grpo_exp7-checkpoint-80, or sft-fold_4 for SFT's <run>/adapters/fold_4.
adapter_label() {
    local name parent
    name=$(basename "$1")
    parent=$(dirname "$1")
    [ "$(basename "$parent")" = adapters ] && parent=$(dirname "$parent")
    echo "$(basename "$parent")-$name"
}

# python_command SCRIPT ARGS... : sets PY_CMD to the command that runs a repository script
# with the site's Python, inside the Apptainer image when one is set.
python_command() {
    PY_CMD=("$PYTHON" "$@")
    if [ -n "${SITE_APPTAINER_IMAGE:-}" ]; then
        local binds=()
        [ -n "${SITE_APPTAINER_BINDS:-}" ] && binds=(--bind "$SITE_APPTAINER_BINDS")
        # shellcheck disable=SC2206  # SITE_APPTAINER_FLAGS is a list of flags
        PY_CMD=(apptainer exec ${SITE_APPTAINER_FLAGS---nv} "${binds[@]}" --pwd "$ROOT"
            "$SITE_APPTAINER_IMAGE" "${PY_CMD[@]}")
    fi
}

# py SCRIPT ARGS... : run a short step.
py() {
    python_command "$@"
    "${PY_CMD[@]}"
}

# The exit status of a training step that a signal stopped after it wrote its checkpoint: not
# finished, run it again with --resume (relrl.runtime.stop.STOPPED_EXIT, sysexits' EX_TEMPFAIL).
# 0 is a finished step, 2 bad input, 3 a GRPO run the health check stopped.
STOPPED_EXIT=75

# requeue_job: ask SLURM to run this job again; the requeued run starts the job file again
# (SLURM_RESTART_COUNT > 0), whose command resumes from the checkpoint or the progress file.
# Without a requeue the job ends with STOPPED_EXIT, which says it did not finish.
requeue_job() {
    echo "requeueing job $SLURM_JOB_ID to resume from its checkpoint"
    if ! scontrol requeue "$SLURM_JOB_ID"; then
        echo "error: ${SLURM_JOB_NAME:-${0##*/}}: scontrol requeue failed: resubmit this job to resume" >&2
        exit "$STOPPED_EXIT"
    fi
    exit 0
}

# run_resumable SCRIPT ARGS... : run a long Python step that SLURM may stop before its time
# limit (#SBATCH --signal=B:USR1@N sends USR1 to this shell only). The shell passes USR1 on;
# a trainer writes a checkpoint and exits STOPPED_EXIT (75), and the job requeues itself. A
# step that dies of the USR1 (an evaluation, whose progress file keeps every finished item, or
# a trainer that had not started its loop) requeues too. A step that finished although the
# signal came (status 0) goes on as finished; any other status fails the job with it.
run_resumable() {
    local pid status seen signals=0
    trap 'signals=$((signals + 1)); echo "USR1: asking the step to checkpoint and stop"; kill -USR1 "$pid" 2>/dev/null' USR1
    python_command "$@"
    "${PY_CMD[@]}" &  # a simple command: $! is the step itself, which gets the signal
    pid=$!
    while :; do
        seen=$signals status=0
        wait "$pid" || status=$?
        # A wait cut short by the trap says nothing about the step: wait again.
        [ "$signals" = "$seen" ] && break
    done
    trap - USR1
    if [ "$status" = "$STOPPED_EXIT" ] || { [ "$signals" -gt 0 ] && [ "$status" = $((128 + 10)) ]; }; then
        requeue_job
    fi
    return "$status"
}

# ---------------------------------------------------------------------------- site settings
cd "$ROOT" || relrl_die "cannot enter $ROOT"
load_site_env

echo "job ${SLURM_JOB_NAME:-?} id ${SLURM_ARRAY_JOB_ID:-${SLURM_JOB_ID:-?}}${SLURM_ARRAY_TASK_ID:+_$SLURM_ARRAY_TASK_ID}" \
    "on $(hostname -s), restart ${SLURM_RESTART_COUNT:-0}, $(date '+%F %T')"

if [ -n "${SITE_MODULES:-}" ]; then
    if ! type module >/dev/null 2>&1; then
        for init in /etc/profile.d/lmod.sh /etc/profile.d/modules.sh; do
            # shellcheck disable=SC1090,SC1091  # the site's module system
            [ -f "$init" ] && source "$init" && break
        done
    fi
    type module >/dev/null 2>&1 || relrl_die "SITE_MODULES is set but this node has no 'module' command"
    for mod in $SITE_MODULES; do
        module load "$mod" || relrl_die "module load $mod failed"
    done
fi

# Caches: model weights and compiled kernels go where the site wants them, not to $HOME
# (a cache variable already in the environment wins, as any setting does).
cache="${SITE_CACHE_DIR:-.cache}"
case "$cache" in /*) ;; *) cache="$ROOT/$cache" ;; esac
export HF_HOME="${HF_HOME:-$cache/huggingface}" TORCH_HOME="${TORCH_HOME:-$cache/torch}"
export TRITON_CACHE_DIR="${TRITON_CACHE_DIR:-$cache/triton}" XDG_CACHE_HOME="${XDG_CACHE_HOME:-$cache}"
export RELRL_CACHE="${RELRL_CACHE:-$cache/relrl}"
if [ "${SITE_HF_OFFLINE:-0}" = 1 ]; then export HF_HUB_OFFLINE=1; fi
export PYTHONUNBUFFERED=1  # log lines appear in the SLURM log as they are printed
# This checkout's relrl and study, whether or not the environment (or an apptainer image) has them
# installed: a job runs the code it was submitted from.
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"

# The Python environment: a virtual environment folder, else a conda environment.
PYTHON=python3
if [ -n "${SITE_PYTHON_ENV:-}" ]; then
    env_dir="$SITE_PYTHON_ENV"
    case "$env_dir" in /*) ;; *) env_dir="$ROOT/$env_dir" ;; esac
    if [ -x "$env_dir/bin/python" ]; then
        export VIRTUAL_ENV="$env_dir" PATH="$env_dir/bin:$PATH"
        PYTHON="$env_dir/bin/python"
    elif type conda >/dev/null 2>&1; then
        eval "$(conda shell.bash hook)"
        conda activate "$SITE_PYTHON_ENV" || relrl_die "conda activate $SITE_PYTHON_ENV failed"
        PYTHON=$(command -v python)
    else
        relrl_die "SITE_PYTHON_ENV=$SITE_PYTHON_ENV is neither a virtual environment nor a conda environment"
    fi
fi
if [ -n "${SITE_APPTAINER_IMAGE:-}" ]; then
    need_file "$SITE_APPTAINER_IMAGE"
    type apptainer >/dev/null 2>&1 || relrl_die "SITE_APPTAINER_IMAGE is set but this node has no apptainer"
fi
