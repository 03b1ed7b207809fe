#!/usr/bin/env bash
# A/B of where the 8-byte put/get round trip's time goes, between two builds on the network
# path: runs each build's `testsmall` (section A, shared memory off) in alternation (old, new,
# new, old, ...), N times each, with benches/c/turnaround_shim.c preloaded in a second run of
# each turn (without the raw baseline, which would mix into its figures), and prints per build
# the medians over the runs of each rank's p50 turnaround (receive to next send, user space),
# p50 send call, and p50 and p90 idle polling round (an arrival waits about half a round to be
# noticed), with the put and get p50 latencies over the raw UDP round trip of the same runs.
#
#   scripts/ab-turnaround.sh OLD_TARGET_DIR NEW_TARGET_DIR [N] [ITERS]     (default 7, 20000)
#
# A target directory holds `release/` (or PROFILE's folder) with rgasnetrun and testsmall.
set -euo pipefail
. "$(dirname "$0")/ab-builds.sh"
if [ $# -lt 2 ]; then
    ab_usage "$0" 2 10
    exit 2
fi
old=$1 new=$2 n=${3:-7} iters=${4:-20000}
ab_require ab-turnaround.sh "$old" "$new" -- rgasnetrun testsmall
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"${CC:-cc}" -std=c11 -Wall -Wextra -Werror -O2 -shared -fPIC \
    "$root/benches/c/turnaround_shim.c" -o "$work/libturnaround_shim.so" -ldl
results=$work/results
for i in $(seq 1 "$n"); do
    ab_order "$i" "$old" "$new"
    for entry in "${order[@]}"; do
        read -r label dir <<<"$entry"
        # The latencies and their raw baseline without the shim; then, straight after, the
        # shim's figures from a run without the baseline (whose raw ping-pong, in the same
        # processes, would mix into them).
        out=$(RGASNET_PSHM=0 timeout 300 "$dir/$profile/rgasnetrun" -n 2 \
            "$dir/$profile/testsmall" -i "$iters" --min-size 8 --max-size 8 --sections A \
            --percentiles 2>&1 &&
            RGASNET_PSHM=0 LD_PRELOAD="$work/libturnaround_shim.so" timeout 300 \
                "$dir/$profile/rgasnetrun" -n 2 "$dir/$profile/testsmall" -i "$iters" \
                --min-size 8 --max-size 8 --sections A --no-baseline 2>&1) ||
            { echo "ab-turnaround.sh: $label failed:" >&2; echo "$out" | tail -20 >&2; exit 1; }
        raw=$(echo "$out" | awk '/raw: udp pingpong 8 byte rtt/ { print $(NF-1) }')
        [ -n "$raw" ] || { echo "ab-turnaround.sh: $label printed no raw UDP round trip" >&2; exit 1; }
        # One line per run: LABEL put/raw get/raw, then per rank 0 and 1: turnaround, send,
        # idle round p50 and p90.
        echo "$out" | awk -v l="$label" -v raw="$raw" '
            /^percentiles: put latency 8 byte/ { put = $8 / raw }
            /^percentiles: get latency 8 byte/ { get = $8 / raw }
            /^turnaround:/ { gsub(/;/, ""); r = $5
                for (i = 1; i <= NF; i++) {
                    if ($i == "p50" && !(r in ta)) ta[r] = $(i + 1)
                    if ($i == "send") send[r] = $(i + 2)
                    if ($i == "round") { p50[r] = $(i + 2); p90[r] = $(i + 4) } } }
            END { if (!("0" in ta) || !("1" in ta) || put == "" || get == "") exit 1
                printf "%s %.4f %.4f %s %s %s %s %s %s %s %s\n", l, put, get,
                    ta[0], send[0], p50[0], p90[0], ta[1], send[1], p50[1], p90[1] }' |
            tee -a "$results" ||
            { echo "ab-turnaround.sh: $label: no figures (is the shim loaded?)" >&2; exit 1; }
    done
done
med() { awk -v l="$1" -v c="$2" '$1 == l { print $c }' "$results" | ab_median; }
echo "8-byte put/get, network path: medians of $n alternating runs of $iters (us; ratios to raw UDP)"
printf '%-5s %8s %8s | %-34s | %-34s\n' "" "" "" "rank 0 (initiator)" "rank 1 (target)"
printf '%-5s %8s %8s | %8s %8s %8s %8s | %8s %8s %8s %8s\n' build put/raw get/raw \
    turn send round p90 turn send round p90
for l in old new; do
    printf '%-5s %8s %8s | %8s %8s %8s %8s | %8s %8s %8s %8s\n' "$l" \
        "$(med "$l" 2)" "$(med "$l" 3)" "$(med "$l" 4)" "$(med "$l" 5)" "$(med "$l" 6)" \
        "$(med "$l" 7)" "$(med "$l" 8)" "$(med "$l" 9)" "$(med "$l" 10)" "$(med "$l" 11)"
done
