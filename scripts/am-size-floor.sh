#!/usr/bin/env bash
# How much of a small AM Medium's extra cost over an AM Short is the kernel's? Issue 26 asks
# for a Medium round trip of at most 1.05 x the AM Short's at every payload of 0-512 bytes.
# A Medium of N bytes is one datagram of HEADER + N bytes each way where a Short is one of
# HEADER bytes, and the kernel alone charges for the larger datagram. This script measures,
# alternately in each round: rgasnet's `testam` (network path, Short and Medium ping-pong,
# 0-512 bytes, and Long ping-pong) and the raw loopback UDP round trip at the same datagram
# sizes (benches/c/udp_size_rtt.c). Per kind and size it prints the medians over the rounds of
#   am/short       the Medium's (Long's) round trip over the Short's (the issue's ratio),
#   raw extra      raw UDP round trip at the Medium's datagram size minus at the Short's,
#   floor          (Short + raw extra) / Short: the ratio the AM would have if it cost the AM
#                  layer nothing beyond the Short and only the kernel charged for its bytes,
#   over floor     am/short over floor: what the AM layer adds.
# A size whose floor exceeds 1.05 cannot meet the target on this machine.
#
#   scripts/am-size-floor.sh [ROUNDS] [ITERS]          (default 7 rounds of 20000 round trips)
#
# HEADER (default 63) is the Short's datagram size on the wire, as
# `strace -f -e trace=sendto target/release/rgasnetrun -n 2 target/release/testam -i 50
# --max-size 0 --sections A --no-baseline` shows it (wire v3; an N-byte Medium is N more, an
# N-byte Long N + 8: its offset in the target's segment).
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-7} iters=${2:-20000} header=${HEADER:-63}
cargo build --release -q -p rgasnet-bench -p rgasnet-launcher
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cc -std=c11 -Wall -Wextra -O2 benches/c/udp_size_rtt.c -o "$work/udp_size_rtt"
sizes=(0 8 64 128 256 512)
# The datagram of an AM of each kind and size (a Long carries its 8-byte offset too).
datagram() { if [ "$1" = long ]; then echo $((header + 8 + $2)); else echo $((header + $2)); fi; }
datagrams=()
for n in "${sizes[@]}"; do datagrams+=("$(datagram medium "$n")" "$(datagram long "$n")"); done
results=$work/results
for r in $(seq 1 "$rounds"); do
    out=$(RGASNET_PSHM=0 timeout 300 target/release/rgasnetrun -n 2 target/release/testam \
        -i "$iters" --max-size 512 --sections ABF --no-baseline 2>&1) ||
        { echo "am-size-floor.sh: testam failed:" >&2; echo "$out" | tail -20 >&2; exit 1; }
    # Lines with a size carry a bandwidth column after the time; size 0 does not.
    echo "$out" | awk '
        /AMShort +ping-pong roundtrip ReqRep:/ { print "am", "short", $(NF-1) }
        /^[BF]: +[0-9]+ AM(Medium|Long) +ping-pong roundtrip ReqRep/ {
            print ($3 == "AMMedium") ? "medium" : "long", $2, ($2 == 0) ? $(NF-1) : $(NF-3)
        }' >>"$results"
    "$work/udp_size_rtt" "$iters" 1 "${datagrams[@]}" |
        awk '/ bytes / { print "raw", $1, $3 }' >>"$results"
done
median() { sort -g | awk '{ v[NR] = $1 } END { if (NR) print v[int((NR + 1) / 2)]; else print "-" }'; }
med() { awk -v k="$1" -v f="$2" '$1 == k && $2 == f { print $3 }' "$results" | median; }
short=$(med am short) raw_short=$(med raw "$header")
echo "AM Medium and Long against AM Short and the kernel's floor (network path, medians of $rounds rounds of $iters; us)"
echo "AM Short round trip $short us; raw UDP round trip at its $header-byte datagram $raw_short us"
printf '%-7s %7s %9s %9s %9s %9s %7s %11s\n' kind payload datagram "round trip" am/short "raw extra" floor "over floor"
for kind in medium long; do
    for n in "${sizes[@]}"; do
        d=$(datagram "$kind" "$n")
        m=$(med "$kind" "$n") raw=$(med raw "$d")
        awk -v k="$kind" -v n="$n" -v d="$d" -v m="$m" -v s="$short" -v raw="$raw" -v rs="$raw_short" 'BEGIN {
            if (m == "-" || s == "-" || raw == "-" || rs == "-" || s == 0) { printf "%-7s %7s %9s  missing\n", k, n, d; exit }
            extra = raw - rs; floor = (s + extra) / s
            printf "%-7s %7d %9d %10.3f %9.3f %9.3f %7.3f %11.3f\n", k, n, d, m, m / s, extra, floor, (m / s) / floor
        }'
    done
done
