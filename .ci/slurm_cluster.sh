#!/usr/bin/env bash
# A one-node SLURM cluster on this machine, so CI can submit the real job files.
#
#   .ci/slurm_cluster.sh start   install slurm + munge if missing, start the daemons, wait for idle
#   .ci/slurm_cluster.sh stop    stop the daemons this script started, remove its slurm.conf
#
# Needs root (apt-get, munge, daemons). State, logs and pid files live in $SLURM_CI_DIR
# (default /tmp/relrl-slurm-ci); the partition is named $SLURM_CI_PARTITION (default "local").
set -euo pipefail

DIR="${SLURM_CI_DIR:-/tmp/relrl-slurm-ci}"
PARTITION="${SLURM_CI_PARTITION:-local}"
CONF=/etc/slurm/slurm.conf
MARK="# written by .ci/slurm_cluster.sh"
MUNGE_PID=/run/munge/munged.pid

die() { echo "slurm_cluster: $*" >&2; exit 1; }
say() { echo "slurm_cluster: $*"; }

install_packages() {
    local missing=()
    command -v slurmctld >/dev/null || missing+=(slurmctld)
    command -v slurmd >/dev/null || missing+=(slurmd)
    command -v sbatch >/dev/null || missing+=(slurm-client)
    command -v munged >/dev/null || missing+=(munge)
    [ ${#missing[@]} -eq 0 ] && return
    say "installing ${missing[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
}

# Kill the process named in a pid file, if it is still running, and wait for it to go.
stop_pidfile() {
    local file=$1 pid
    [ -s "$file" ] || return 0
    pid=$(cat "$file")
    if kill -0 "$pid" 2>/dev/null; then
        kill "$pid"
        for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
        kill -0 "$pid" 2>/dev/null && kill -9 "$pid"
    fi
    rm -f "$file"
}

start_munge() {
    install -d -o munge -g munge -m 0755 /run/munge
    if [ ! -s /etc/munge/munge.key ]; then
        mungekey --create --keyfile=/etc/munge/munge.key
        chown munge:munge /etc/munge/munge.key
        chmod 0400 /etc/munge/munge.key
    fi
    if ! { [ -s "$MUNGE_PID" ] && kill -0 "$(cat "$MUNGE_PID")" 2>/dev/null; }; then
        runuser -u munge -- munged --pid-file="$MUNGE_PID"
        touch "$DIR/munged.ours"  # stop leaves alone a munged it did not start
    fi
    munge -n | unmunge >/dev/null || die "munge does not work (see /var/log/munge/munged.log)"
}

write_conf() {
    local host cpus mem
    host=$(hostname -s)
    cpus=$(nproc)
    # Leave some memory to the system, as slurmd refuses a node that reports less than configured.
    mem=$(awk '/MemTotal/ {printf "%d", $2 / 1024 * 0.9}' /proc/meminfo)
    if [ -e "$CONF" ] && ! grep -qF "$MARK" "$CONF"; then
        die "$CONF exists and was not written by this script; not touching it"
    fi
    mkdir -p /etc/slurm "$DIR/state" "$DIR/spool"
    cat >"$CONF" <<EOF
$MARK
ClusterName=relrl-ci
SlurmctldHost=$host(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SwitchType=switch/none
MpiDefault=none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/backfill
ReturnToService=2
# Finished jobs stay visible to scontrol for an hour: the tests read their states.
MinJobAge=3600
KillWait=10
StateSaveLocation=$DIR/state
SlurmdSpoolDir=$DIR/spool
SlurmctldPidFile=$DIR/slurmctld.pid
SlurmdPidFile=$DIR/slurmd.pid
SlurmctldLogFile=$DIR/slurmctld.log
SlurmdLogFile=$DIR/slurmd.log
NodeName=$host NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=$mem State=UNKNOWN
PartitionName=$PARTITION Nodes=$host Default=YES MaxTime=INFINITE State=UP
EOF
}

wait_idle() {
    local state=""
    for _ in $(seq 60); do
        state=$(sinfo -h -p "$PARTITION" -o %t 2>/dev/null || true)
        if [ "$state" = idle ]; then say "node is idle, partition '$PARTITION'"; return; fi
        sleep 1
    done
    tail -n 20 "$DIR/slurmctld.log" "$DIR/slurmd.log" >&2 || true
    die "node did not become idle (state: '${state:-no answer}')"
}

start() {
    [ "$(id -u)" -eq 0 ] || die "start needs root (it installs packages and runs the daemons)"
    install_packages
    stop_all
    rm -rf "$DIR"
    write_conf
    start_munge
    slurmctld -c
    slurmd -c
    wait_idle
}

stop_daemons() {
    stop_pidfile "$DIR/slurmd.pid"
    stop_pidfile "$DIR/slurmctld.pid"
}

stop_all() {
    stop_daemons
    if [ -e "$DIR/munged.ours" ]; then stop_pidfile "$MUNGE_PID"; rm -f "$DIR/munged.ours"; fi
}

stop() {
    stop_all
    if [ -e "$CONF" ] && grep -qF "$MARK" "$CONF"; then rm -f "$CONF"; fi
    say "stopped"
}

case "${1:-}" in
    start) start ;;
    stop) stop ;;
    *) echo "usage: $0 start|stop" >&2; exit 2 ;;
esac
