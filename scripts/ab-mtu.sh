#!/usr/bin/env bash
# Two builds across two hosts whose link has a 1500-byte MTU, in alternation: network
# namespaces joined by a veth bridge (scripts/netns-hosts.sh), one rank on each, launched from
# the lab namespace with `rgasnetrun --spawner ssh` and RGASNET_IFACE=eth0.
#
#   scripts/ab-mtu.sh OLD_TARGET_DIR NEW_TARGET_DIR [REPEATS]
#
# A target directory holds `release/` (e.g. `target`, or `CARGO_TARGET_DIR=/tmp/old cargo
# build --release -p rgasnet-bench -p rgasnet-launcher` of another commit). Each repeat runs
# both builds' testlarge (1 MiB, with the raw UDP and TCP streams of the same run, as far as
# the build prints them) and testam/testsmall (8 B round trips), in rotating order; then the
# medians. Needs root, iproute2 and OpenSSH (exit 3 with a line saying what is missing).
set -euo pipefail
. "$(dirname "$0")/ab-builds.sh"
if [ $# -lt 2 ]; then
    ab_usage "$0" 2 12
    exit 2
fi
old=$(cd "$1" && pwd) new=$(cd "$2" && pwd) n=${3:-5}
root=$(cd "$(dirname "$0")/.." && pwd)
ab_require ab-mtu.sh "$old" "$new" -- rgasnetrun testlarge testam testsmall
lab=$(mktemp -d /tmp/ab-mtu.XXXXXX)
env_file=$lab.env
NETNS_HOSTS_OWNER=$$ "$root/scripts/netns-hosts.sh" up "$lab" 2 >"$env_file" || exit $?
trap '"$root/scripts/netns-hosts.sh" down "$lab"; rm -rf "$lab" "$env_file" "${results:-}"' EXIT
lab_ns=$(sed -n 's/^LAB_NS=//p' "$env_file")
hosts=$(sed -n 's/^HOSTS=//p' "$env_file")
ssh_options="$(sed -n 's/^SSH_OPTIONS=//p' "$env_file") -o LogLevel=ERROR"
[ -n "$ssh_options" ] || { echo "ab-mtu.sh: no sshd in the namespace hosts: apt-get install -y openssh-server" >&2; exit 3; }

# job DIR PROGRAM ARGS...: one rank on each host.
job() {
    local dir=$1
    shift
    ip netns exec "$lab_ns" env GASNET_SSH_OPTIONS="$ssh_options" RGASNET_IFACE=eth0 \
        timeout 300 "$dir/$profile/rgasnetrun" --spawner ssh --hosts "$hosts" -n 2 "$dir/$profile/$@" 2>&1
}

extract() {
    awk '
        /^raw: udp stream 1048576 byte/ { print "raw_udp_MBps", $(NF-1) }
        /^raw: tcp stream 1048576 byte/ { print "raw_tcp_MBps", $(NF-1) }
        /^raw: udp pingpong 8 byte rtt/ { print "raw_rtt8_us", $(NF-1) }
        / 1048576 byte .*\((put_nbi_bulk|get_nbi_bulk|put_bulk|get_bulk) throughput\)/ {
            f = $(NF-1); gsub(/[()]/, "", f); sub(/_bulk/, "", f)
            for (i = 1; i <= NF; i++) if ($i == "KB/sec") print f "1m_MBps", $(i-1) / 1000
        }
        /AMShort +ping-pong roundtrip ReqRep:/ { print "am_short_us", $(NF-1) }
        / 8 byte .*\(put latency\)/ { for (i = 1; i <= NF; i++) if ($i == "ave.") print "put8_us", $(i-2) }
        / 8 byte .*\(get latency\)/ { for (i = 1; i <= NF; i++) if ($i == "ave.") print "get8_us", $(i-2) }
    '
}

results=$(mktemp)
for i in $(seq 1 "$n"); do
    ab_order "$i" "$old" "$new"
    for t in testlarge testam testsmall; do
        for entry in "${order[@]}"; do
            read -r label dir <<<"$entry"
            case $t in
                testlarge) out=$(job "$dir" testlarge -i 100 --min-size 1M --max-size 1M --sections AB --raw-stream-count 256) ;;
                testam) out=$(job "$dir" testam -i 5000 --max-size 8 --sections A --no-baseline) ;;
                testsmall) out=$(job "$dir" testsmall -i 5000 --max-size 8 --sections A --no-baseline) ;;
            esac || { echo "ab-mtu.sh: $label $t failed:" >&2; echo "$out" | tail -20 >&2; exit 1; }
            echo "$out" | extract | while read -r name v; do
                echo "$i $label $name $v" | tee -a "$results"
            done
        done
    done
done

med() { awk -v l="$1" -v m="$2" '$2 == l && $3 == m { print $4 }' "$results" | ab_median; }
echo
echo "Medians of $n alternating runs across two namespace hosts (MTU 1500; MB/s higher is better, us lower)"
printf '%-16s %12s %12s %8s\n' figure old new new/old
for m in raw_tcp_MBps raw_udp_MBps put1m_MBps get1m_MBps put_nbi1m_MBps get_nbi1m_MBps raw_rtt8_us am_short_us put8_us get8_us; do
    o=$(med old $m) w=$(med new $m)
    r=$(awk -v a="$w" -v b="$o" 'BEGIN { if (a == "-" || b == "-" || b == 0) print "-"; else printf "%.2f", a / b }')
    printf '%-16s %12s %12s %8s\n' "$m" "$o" "$w" "$r"
done
tcp=$(med new raw_tcp_MBps)
for m in put_nbi1m_MBps get_nbi1m_MBps put1m_MBps get1m_MBps; do
    awk -v m="$m" -v a="$(med new $m)" -v t="$tcp" -v o="$(med old $m)" 'BEGIN {
        if (t != "-" && t > 0) printf "%s: new %.2f x, old %.2f x the TCP stream (target >= 0.8)\n", m, a / t, (o == "-" ? 0 : o / t) }'
done
