#!/usr/bin/env bash
# A real one-host Slurm for tests: munged, slurmctld and slurmd of Debian's slurm-wlm, each
# with files under DIR only (its own munge socket and key, its own slurm.conf), this host as
# the only node with CPUS CPUs (default 8, more than the VM has: oversubscription is allowed).
#
#   scripts/slurm-one-host.sh start DIR [CPUS]   start, wait until the node is idle, print
#                                                 `export SLURM_CONF=...` (eval it)
#   scripts/slurm-one-host.sh stop DIR            stop the daemons that `start` started
#
# With SLURM_ONE_HOST_OWNER=PID, `start` also leaves a watcher that stops the daemons and
# removes DIR once process PID is gone (a test binary that cannot run code at its exit).
#
# With SLURM_NETNS_DIR=D (the directory of `scripts/netns-hosts.sh up D N`), the nodes are that
# script's namespace hosts instead (nsh1.., CPUS each, each slurmd in its host's network and UTS
# namespace) and slurmctld runs in its lab namespace: run the Slurm commands there
# (`ip netns exec LAB_NS srun ...`).
#
# Nothing outside DIR is written; only the processes whose pids `start` recorded are stopped.
# Missing packages: one line naming them, exit status 3 (callers print SKIPPED).
set -euo pipefail

die() { echo "slurm-one-host: $*" >&2; exit 1; }
self="$(cd "$(dirname "$0")" && pwd)/$(basename "$0")"

cmd=${1:-}
dir=${2:-}
[ -n "$cmd" ] && [ -n "$dir" ] || die "usage: $0 start|stop DIR [CPUS]"

stop() {
    local d=$1 f pid
    # slurmd first (they hold steps), then slurmctld, then munged.
    for f in "$d"/slurmd*.pid "$d/slurmctld.pid" "$d/munged.pid"; do
        [ -s "$f" ] || continue
        pid=$(cat "$f")
        # Only a process that still runs the daemon we started (pids are reused).
        if [ -r "/proc/$pid/cmdline" ] && tr '\0' ' ' <"/proc/$pid/cmdline" | grep -Eq "slurm|munged"; then
            kill "$pid" 2>/dev/null || true
            for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
            kill -9 "$pid" 2>/dev/null || true
        fi
        rm -f "$f"
    done
}

if [ "$cmd" = stop ]; then
    stop "$dir"
    exit 0
fi
[ "$cmd" = start ] || die "unknown command $cmd (start or stop)"
cpus=${3:-8}

missing=()
for p in munged slurmctld slurmd srun sinfo; do
    command -v "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
    echo "slurm-one-host: missing ${missing[*]}: apt-get install slurm-wlm munge" >&2
    exit 3
fi
[ "$(id -u)" = 0 ] || die "needs root (slurmd runs jobs as their users)"

mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
host=$(hostname -s)
mkdir -p "$dir/munge" "$dir/state" "$dir/spool"
chmod 700 "$dir/munge"

# munge: a fresh key and a private socket, so that no system munged is needed or disturbed.
if [ ! -s "$dir/munge/key" ]; then
    dd if=/dev/urandom of="$dir/munge/key" bs=128 count=1 status=none
    chmod 400 "$dir/munge/key"
fi
sock="$dir/munge/socket"
munged --force --socket="$sock" --key-file="$dir/munge/key" --pid-file="$dir/munged.pid" \
    --log-file="$dir/munge/log" --seed-file="$dir/munge/seed" ||
    die "munged did not start; see $dir/munge/log"

# Ports: free ones near the defaults, so that a test run does not collide with a real Slurm.
free_port() {
    local p
    for p in $(seq "$1" $(($1 + 200))); do
        if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then echo "$p"; return; fi
    done
    die "no free TCP port near $1"
}
ctld_port=$(free_port 16817)
slurmd_port=$(free_port $((ctld_port + 1)))

# The nodes: "name address namespace" lines ("-" for this host's own namespace).
ctld_ns=-
if [ -n "${SLURM_NETNS_DIR:-}" ]; then
    [ -s "$SLURM_NETNS_DIR/hosts" ] && [ -s "$SLURM_NETNS_DIR/namespaces" ] ||
        die "SLURM_NETNS_DIR=$SLURM_NETNS_DIR holds no hosts of scripts/netns-hosts.sh"
    ctld_ns=$(head -1 "$SLURM_NETNS_DIR/namespaces")
    ctld_host="rglab(10.77.0.1)"
    nodes=$(cat "$SLURM_NETNS_DIR/hosts")
else
    ctld_host=$host
    nodes="$host - -"
fi
node_lines=
names=
while read -r name addr _; do
    if [ "$addr" = - ]; then
        node_lines+="NodeName=$name CPUs=$cpus State=UNKNOWN"$'\n'
    else
        node_lines+="NodeName=$name NodeAddr=$addr NodeHostname=$name CPUs=$cpus State=UNKNOWN"$'\n'
    fi
    names+=${names:+,}$name
done <<<"$nodes"

conf="$dir/slurm.conf"
cat >"$conf" <<EOF
ClusterName=rgasnet-test
SlurmctldHost=$ctld_host
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$sock
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool/%n
SlurmctldPidFile=$dir/slurmctld.pidfile
SlurmdPidFile=$dir/spool/%n/slurmd.pidfile
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
MpiDefault=none
SlurmdParameters=config_overrides
MailProg=/bin/true
KillWait=2
InactiveLimit=0
${node_lines}PartitionName=debug Nodes=$names Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:4
EOF
export SLURM_CONF=$conf

# Each daemon in the foreground, detached from this shell, its pid recorded here; in a
# namespace with its own hostname when the nodes are namespace hosts.
in_ns() {
    local ns=$1 name=$2
    shift 2
    if [ "$ns" = - ]; then
        exec "$@"
    else
        exec nsenter --net="/run/netns/$ns" unshare --uts sh -c 'hostname "$0"; exec "$@"' "$name" "$@"
    fi
}
in_ns "$ctld_ns" rglab setsid slurmctld -c -D -f "$conf" </dev/null >>"$dir/slurmctld.out" 2>&1 &
echo $! >"$dir/slurmctld.pid"
while read -r name _ ns; do
    mkdir -p "$dir/spool/$name"
    in_ns "$ns" "$name" setsid slurmd -c -D -N "$name" -f "$conf" </dev/null >>"$dir/slurmd-$name.out" 2>&1 &
    echo $! >"$dir/slurmd.$name.pid"
done <<<"$nodes"
want=$(wc -l <<<"$nodes")
for _ in $(seq 150); do
    state=$(in_ns "$ctld_ns" rglab sinfo -h -N -o %T 2>/dev/null | grep -c '^idle' || true)
    case $state in
        "$want")
            if [ -n "${SLURM_ONE_HOST_OWNER:-}" ]; then
                setsid bash -c 'while kill -0 "$1" 2>/dev/null; do sleep 1; done; "$2" stop "$3"; rm -rf "$3"' \
                    watcher "$SLURM_ONE_HOST_OWNER" "$self" "$dir" </dev/null >/dev/null 2>&1 &
            fi
            echo "export SLURM_CONF=$conf"
            exit 0
            ;;
    esac
    sleep 0.2
done
stop "$dir"
die "the nodes did not become idle in 30 s ($state of $want idle); see $dir/slurmctld.log and $dir/slurmd-*.log"
