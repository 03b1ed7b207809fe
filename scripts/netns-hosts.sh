#!/usr/bin/env bash
# Several "hosts" on this machine for multi-host tests: network namespaces joined by a bridge,
# each with its own hostname (a UTS namespace) and, when OpenSSH is installed, its own sshd.
#
#   scripts/netns-hosts.sh up DIR [N]   a lab namespace TAG-lab (10.77.0.1, the bridge; run the
#                                       launcher there) and N hosts TAG-h1.. named nsh1..,
#                                       10.77.0.11.., on veth links (MTU 1500); prints
#                                       `KEY=VALUE` lines (LAB_NS, HOSTS, SSH_OPTIONS, ...)
#   scripts/netns-hosts.sh down DIR     stop what `up` started, delete the namespaces
#
# Files go under DIR only. With NETNS_HOSTS_OWNER=PID, `up` also leaves a watcher that runs
# `down` (and removes DIR) once process PID is gone. Needs root and iproute2; missing pieces:
# one line naming them, exit status 3 (callers print SKIPPED).
set -euo pipefail

die() { echo "netns-hosts: $*" >&2; exit 1; }
self="$(cd "$(dirname "$0")" && pwd)/$(basename "$0")"
cmd=${1:-}
dir=${2:-}
[ -n "$cmd" ] && [ -n "$dir" ] || die "usage: $0 up|down DIR [N]"

down() {
    local d=$1 pid ns
    for f in "$d"/*.pid; do
        [ -s "$f" ] || continue
        pid=$(cat "$f")
        kill "$pid" 2>/dev/null || true
        for _ in $(seq 30); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        kill -9 "$pid" 2>/dev/null || true
        rm -f "$f"
    done
    if [ -s "$d/namespaces" ]; then
        while read -r ns; do
            # Whatever still runs in the namespace goes with it.
            for pid in $(ip netns pids "$ns" 2>/dev/null); do kill -9 "$pid" 2>/dev/null || true; done
            ip netns del "$ns" 2>/dev/null || true
        done <"$d/namespaces"
        rm -f "$d/namespaces"
    fi
}

if [ "$cmd" = down ]; then
    down "$dir"
    exit 0
fi
[ "$cmd" = up ] || die "unknown command $cmd (up or down)"
n=${3:-2}
[ "$n" -ge 1 ] && [ "$n" -le 50 ] || die "N=$n: between 1 and 50 hosts"
if [ "$(id -u)" != 0 ]; then
    echo "netns-hosts: needs root (network namespaces)" >&2
    exit 3
fi
for p in ip unshare; do
    command -v "$p" >/dev/null || { echo "netns-hosts: missing $p: apt-get install iproute2 util-linux" >&2; exit 3; }
done

mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
tag=rg$(printf '%05d' $(($$ % 100000)))
lab=$tag-lab
if ! ip netns add "$lab" 2>"$dir/err"; then
    echo "netns-hosts: cannot create network namespaces: $(cat "$dir/err")" >&2
    exit 3
fi
echo "$lab" >>"$dir/namespaces"
ip -n "$lab" link set lo up
ip -n "$lab" link add br0 type bridge
ip -n "$lab" addr add 10.77.0.1/24 dev br0
ip -n "$lab" link set br0 up

hosts=()
for i in $(seq "$n"); do
    ns=$tag-h$i
    ip netns add "$ns"
    echo "$ns" >>"$dir/namespaces"
    ip -n "$lab" link add "vh$i" type veth peer name eth0 netns "$ns"
    ip -n "$lab" link set "vh$i" master br0 up
    ip -n "$ns" link set lo up
    ip -n "$ns" addr add "10.77.0.$((10 + i))/24" dev eth0
    ip -n "$ns" link set eth0 up
    hosts+=("10.77.0.$((10 + i))")
    echo "nsh$i 10.77.0.$((10 + i)) $ns" >>"$dir/hosts"
done

# One sshd per host, in its namespace and with its hostname, when OpenSSH is here.
ssh_options=
if [ -x /usr/sbin/sshd ] && command -v ssh-keygen >/dev/null; then
    mkdir -p /run/sshd "$dir/ssh"
    [ -s "$dir/ssh/host_key" ] || ssh-keygen -q -t ed25519 -N '' -f "$dir/ssh/host_key"
    [ -s "$dir/ssh/client_key" ] || ssh-keygen -q -t ed25519 -N '' -f "$dir/ssh/client_key"
    cp "$dir/ssh/client_key.pub" "$dir/ssh/authorized_keys"
    for i in $(seq "$n"); do
        cat >"$dir/ssh/sshd_config.$i" <<EOF
ListenAddress 10.77.0.$((10 + i))
HostKey $dir/ssh/host_key
PidFile $dir/ssh/sshd.$i.pidfile
AuthorizedKeysFile $dir/ssh/authorized_keys
PermitRootLogin yes
StrictModes no
UsePAM no
PasswordAuthentication no
KbdInteractiveAuthentication no
EOF
        ip netns exec "$tag-h$i" unshare --uts sh -c "hostname nsh$i; exec /usr/sbin/sshd -D -f '$dir/ssh/sshd_config.$i' -E '$dir/ssh/sshd.$i.log'" \
            </dev/null >/dev/null 2>&1 &
        echo $! >"$dir/sshd.$i.pid"
    done
    for i in $(seq "$n"); do
        for _ in $(seq 100); do
            ip netns exec "$lab" bash -c "exec 3<>/dev/tcp/10.77.0.$((10 + i))/22" 2>/dev/null && break
            sleep 0.05
        done
    done
    ssh_options="-i $dir/ssh/client_key -o UserKnownHostsFile=/dev/null -o StrictHostKeyChecking=no"
fi

if [ -n "${NETNS_HOSTS_OWNER:-}" ]; then
    setsid bash -c 'while kill -0 "$1" 2>/dev/null; do sleep 1; done; "$2" down "$3"; rm -rf "$3"' \
        watcher "$NETNS_HOSTS_OWNER" "$self" "$dir" </dev/null >/dev/null 2>&1 &
fi
echo "LAB_NS=$lab"
echo "LAB_ADDR=10.77.0.1"
echo "HOSTS=$(IFS=,; echo "${hosts[*]}")"
echo "HOST_NAMESPACES=$(seq -s, -f "$tag-h%g" 1 "$n")"
echo "SSH_OPTIONS=$ssh_options"
