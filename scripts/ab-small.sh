#!/usr/bin/env bash
# A/B of the 8-byte put and get latency between two builds on the network path: runs each
# build's `testsmall` in alternation (old, new, old, ...), N times each, and prints per build
# the medians of the per-run p50 latency and of its ratio to the raw UDP round trip the same
# run measured (issue 26's "network 8 B put/get <= 1.10 x raw UDP").
#
#   scripts/ab-small.sh OLD_TARGET_DIR NEW_TARGET_DIR [N] [ITERS]     (default 7, 20000)
#
# A target directory holds `release/` with rgasnetrun and testsmall (e.g. `target`, or
# `CARGO_TARGET_DIR=/tmp/old cargo build --release -p rgasnet-bench -p rgasnet-launcher` of
# the commit before).
set -euo pipefail
. "$(dirname "$0")/ab-builds.sh"
if [ $# -lt 2 ]; then
    ab_usage "$0" 2 11
    exit 2
fi
old=$1 new=$2 n=${3:-7} iters=${4:-20000}
ab_require ab-small.sh "$old" "$new" -- rgasnetrun testsmall
results=$(mktemp)
trap 'rm -f "$results"' EXIT
for i in $(seq 1 "$n"); do
    ab_order "$i" "$old" "$new"
    for entry in "${order[@]}"; do
        read -r label dir <<<"$entry"
        out=$(RGASNET_PSHM=0 timeout 300 "$dir/$profile/rgasnetrun" -n 2 "$dir/$profile/testsmall" \
            -i "$iters" --min-size 8 --max-size 8 --sections A --percentiles 2>&1) ||
            { echo "ab-small.sh: $label failed:" >&2; echo "$out" | tail -20 >&2; exit 1; }
        raw=$(echo "$out" | awk '/raw: udp pingpong 8 byte rtt/ { print $(NF-1) }')
        [ -n "$raw" ] || { echo "ab-small.sh: $label printed no raw UDP round trip" >&2; exit 1; }
        echo "$out" | awk -v l="$label" -v raw="$raw" '
            /^percentiles: (put|get) latency 8 byte/ { printf "%s %s %s %.4f\n", l, $2, $8, $8 / raw }' |
            tee -a "$results"
    done
done
med() { awk -v l="$1" -v op="$2" -v c="$3" '$1 == l && $2 == op { print $c }' "$results" | ab_median; }
echo "8-byte latency, network path (medians of $n alternating runs of $iters; p50 us, ratio to raw UDP)"
printf '%-6s %10s %10s %10s %10s\n' build "put p50" "put/raw" "get p50" "get/raw"
for l in old new; do
    printf '%-6s %10s %10s %10s %10s\n' "$l" "$(med "$l" put 3)" "$(med "$l" put 4)" "$(med "$l" get 3)" "$(med "$l" get 4)"
done
