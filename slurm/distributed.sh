# Sourced by the training job files after prelude.sh: run a training step on one GPU, or data
# parallel on every GPU (and node) of the allocation. Sourced, never run.
#
# A job with more than one GPU on its node(s) (SLURM_GPUS_ON_NODE, or NPROC_PER_NODE on the
# CPU), or more than one node, runs one torchrun per node (srun, one task per node) with
# NPROC_PER_NODE ranks each, meeting at the first node (c10d rendezvous). LAUNCHER=srun runs
# one task per rank instead (the job's --ntasks), each a plain Python process that reads its
# rank from SLURM_PROCID. Otherwise the step runs as one process, as before.
#
# SLURM's warning (USR1 to this shell) becomes a stop file every rank polls (RELRL_STOP_FILE):
# torchrun would not pass USR1 on to its workers, and a file reaches every node. The ranks
# agree on the step, rank 0 writes its checkpoint, every rank exits STOPPED_EXIT (75) and the
# job requeues. torchrun reports a worker's non-zero status as its own 1, so the ranks also
# write 75 to $RELRL_STOP_FILE.exit (relrl.runtime.stop.exit_status), which stands for it.

# train_nproc: ranks per node this allocation asks for.
train_nproc() {
    echo "${NPROC_PER_NODE:-${SLURM_GPUS_ON_NODE:-1}}"
}

# rendezvous_host: the allocation's first node (this host outside SLURM). No pipe into head:
# under pipefail its early exit would SIGPIPE scontrol and fail the job on a long node list.
rendezvous_host() {
    local hosts
    hosts=$(scontrol show hostnames "${SLURM_JOB_NODELIST:-}" 2>/dev/null) || hosts=""
    hosts=${hosts%%$'\n'*}
    echo "${hosts:-$(hostname -s)}"
}

# run_training OUTPUT_DIR SCRIPT ARGS... : run_resumable, or its data-parallel form.
run_training() {
    local out=$1
    shift
    if [ "${LAUNCHER:-torchrun}" != srun ] && [ "$(train_nproc)" -le 1 ] && [ "${SLURM_NNODES:-1}" -le 1 ]; then
        run_resumable "$@"
        return
    fi
    run_distributed "$out" "$@"
}

run_distributed() {
    local out=$1 pid status seen signals=0 head port nproc
    shift
    export RELRL_STOP_FILE="$out/.stop-${SLURM_JOB_ID:-$$}"
    rm -f "$RELRL_STOP_FILE" "$RELRL_STOP_FILE.exit"
    head=$(rendezvous_host)
    port=${MASTER_PORT:-$((20000 + ${SLURM_JOB_ID:-0} % 20000))}
    nproc=$(train_nproc)
    if [ "${LAUNCHER:-torchrun}" = srun ]; then
        export MASTER_ADDR="$head" MASTER_PORT="$port"
        python_command "$@"
        echo "data parallel: ${SLURM_NTASKS:-?} ranks (srun tasks), rendezvous $head:$port"
        launch=(srun --kill-on-bad-exit=1 "${PY_CMD[@]}")
    else
        python_command -m torch.distributed.run --nnodes="${SLURM_NNODES:-1}" \
            --nproc_per_node="$nproc" --rdzv_backend=c10d --rdzv_endpoint="$head:$port" \
            --rdzv_id="${SLURM_JOB_ID:-relrl}" "$@"
        echo "data parallel: ${SLURM_NNODES:-1} node(s) x $nproc ranks (torchrun), rendezvous $head:$port"
        launch=(srun --ntasks-per-node=1 --kill-on-bad-exit=1 "${PY_CMD[@]}")
    fi
    trap 'signals=$((signals + 1)); echo "USR1: asking every rank to checkpoint and stop"; echo SIGUSR1 >"$RELRL_STOP_FILE"' USR1
    "${launch[@]}" &
    pid=$!
    while :; do
        seen=$signals status=0
        wait "$pid" || status=$?
        [ "$signals" = "$seen" ] && break  # a wait cut short by the trap: wait again
    done
    trap - USR1
    local written
    written=$(cat "$RELRL_STOP_FILE.exit" 2>/dev/null || true)
    rm -f "$RELRL_STOP_FILE" "$RELRL_STOP_FILE.exit"
    # the ranks stopped and checkpointed, whatever status the launcher turned that into
    if [ "$status" != 0 ] && [ "$written" = "$STOPPED_EXIT" ]; then
        status=$STOPPED_EXIT
    fi
    if [ "$status" = "$STOPPED_EXIT" ]; then
        requeue_job
    fi
    return "$status"
}
