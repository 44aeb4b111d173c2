# Shared by the job prelude, slurm/submit.sh and slurm/pipeline.sh: site settings and the
# sbatch options they imply. Sourced, never run.

relrl_die() {
    echo "error: ${SLURM_JOB_NAME:-${0##*/}}: $*" >&2
    exit 2
}

# load_site_env [--example-if-missing]: source $SITE_ENV (default slurm/site.env). A variable
# already in the environment wins over the file, so `MODEL=tiny slurm/submit.sh ...` overrides
# one value. With --example-if-missing (dry runs) and neither SITE_ENV nor slurm/site.env,
# slurm/site.env.example stands in, and a note on stderr says so.
load_site_env() {
    if [ "${1:-}" = --example-if-missing ] && [ -z "${SITE_ENV:-}" ] && [ ! -f "$ROOT/slurm/site.env" ]; then
        SITE_ENV="$ROOT/slurm/site.env.example"
        echo "note: no slurm/site.env: showing the jobs with the settings of slurm/site.env.example; copy it to slurm/site.env and edit it before submitting" >&2
    fi
    SITE_ENV="${SITE_ENV:-$ROOT/slurm/site.env}"
    [ -f "$SITE_ENV" ] || relrl_die "no site settings at $SITE_ENV: copy slurm/site.env.example to slurm/site.env and edit it"
    local before
    # As "export NAME=value" lines: eval'ing "declare -x" inside a function would make locals.
    before=$(export -p | sed 's/^declare -x /export /')
    # shellcheck source=slurm/site.env.example
    source "$SITE_ENV"
    eval "$before" 2>/dev/null || true
}

# need VAR... : every named setting is non-empty, else stop and say where to set it.
need() {
    local name
    for name in "$@"; do
        [ -n "${!name:-}" ] || relrl_die "$name is not set: set it in $SITE_ENV or pass it with sbatch --export=ALL,$name=..."
    done
}

# job_kind FILE: train, eval or cpu, from the job file's "#RELRL kind=" line.
job_kind() {
    local kind
    [ -f "$1" ] || relrl_die "no job file $1"
    kind=$(sed -n 's/^#RELRL kind=\([a-z]*\).*/\1/p' "$1")
    [ -n "$kind" ] || relrl_die "$1 has no '#RELRL kind=' line"
    echo "$kind"
}

# site_sbatch_args KIND: fills the array SBATCH_ARGS with the site's options for that kind.
site_sbatch_args() {
    local kind=$1
    SBATCH_ARGS=()
    case "$kind" in
        train | eval)
            need SITE_PARTITION
            SBATCH_ARGS+=(--partition="$SITE_PARTITION")
            if [ "${SITE_GPUS:-1}" -gt 0 ]; then
                SBATCH_ARGS+=(--gres="gpu${SITE_GPU_TYPE:+:$SITE_GPU_TYPE}:${SITE_GPUS:-1}")
            else
                SBATCH_ARGS+=(--gres=none)
            fi
            [ -n "${SITE_CPUS:-}" ] && SBATCH_ARGS+=(--cpus-per-task="$SITE_CPUS")
            [ -n "${SITE_MEM:-}" ] && SBATCH_ARGS+=(--mem="$SITE_MEM")
            if [ "$kind" = train ]; then
                [ -n "${SITE_TIME_TRAIN:-}" ] && SBATCH_ARGS+=(--time="$SITE_TIME_TRAIN")
            else
                [ -n "${SITE_TIME_EVAL:-}" ] && SBATCH_ARGS+=(--time="$SITE_TIME_EVAL")
            fi
            ;;
        cpu)
            need SITE_PARTITION
            SBATCH_ARGS+=(--partition="${SITE_CPU_PARTITION:-$SITE_PARTITION}")
            [ -n "${SITE_CPU_CPUS:-}" ] && SBATCH_ARGS+=(--cpus-per-task="$SITE_CPU_CPUS")
            [ -n "${SITE_CPU_MEM:-}" ] && SBATCH_ARGS+=(--mem="$SITE_CPU_MEM")
            [ -n "${SITE_TIME_CPU:-}" ] && SBATCH_ARGS+=(--time="$SITE_TIME_CPU")
            ;;
        *) relrl_die "unknown job kind '$kind'" ;;
    esac
    [ -n "${SITE_ACCOUNT:-}" ] && SBATCH_ARGS+=(--account="$SITE_ACCOUNT")
    [ -n "${SITE_QOS:-}" ] && SBATCH_ARGS+=(--qos="$SITE_QOS")
    if [ -n "${SITE_MAIL_USER:-}" ]; then
        SBATCH_ARGS+=(--mail-user="$SITE_MAIL_USER" --mail-type="${SITE_MAIL_TYPE:-END,FAIL}")
    fi
    # shellcheck disable=SC2206  # a list of options, split on spaces
    [ -n "${SITE_SBATCH_EXTRA:-}" ] && SBATCH_ARGS+=($SITE_SBATCH_EXTRA)
    return 0
}
