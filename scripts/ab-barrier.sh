#!/usr/bin/env bash
# A/B of the named barrier between two builds, for checking a barrier change on this shared,
# noisy machine: runs each build's `testbarrier` in alternation (old first in odd pairs, new
# first in even ones), N times each, and prints every run's named-barrier latency and each
# build's median. On a host with fewer CPUs than RANKS this is the crowded case of issue 26.
#
#   scripts/ab-barrier.sh OLD_TARGET_DIR NEW_TARGET_DIR [RANKS] [N] [ITERS]   (default 8 9 100000)
#
# A target directory holds `release/` with rgasnetrun and testbarrier (e.g. `target`, or
# `CARGO_TARGET_DIR=/tmp/old cargo build --release -p rgasnet-bench -p rgasnet-launcher` of
# the commit before). PSHM (default 1) picks shared memory (1) or the network path (0).
set -euo pipefail
. "$(dirname "$0")/ab-builds.sh"
if [ $# -lt 2 ]; then
    ab_usage "$0" 2 11
    exit 2
fi
old=$1 new=$2 ranks=${3:-8} n=${4:-9} iters=${5:-100000}
for v in "$ranks" "$n" "$iters"; do
    case $v in
        '' | *[!0-9]*) v=0 ;;
    esac
    if [ $((10#$v)) -eq 0 ]; then
        echo "ab-barrier.sh: RANKS, N and ITERS must be positive integers, not $ranks, $n, $iters" >&2
        exit 2
    fi
done
ab_require ab-barrier.sh "$old" "$new" -- rgasnetrun testbarrier

one_run() {
    RGASNET_PSHM=${PSHM:-1} timeout 600 "$1/$profile/rgasnetrun" -n "$ranks" "$1/$profile/testbarrier" \
        -i "$iters" 2>&1 |
        awk '/Avg Named Barrier latency:/ { print $(NF-1); found=1 } END { if (!found) exit 1 }'
}

declare -a a b
for i in $(seq 1 "$n"); do
    if [ $((i % 2)) -eq 1 ]; then
        x=$(one_run "$old") || { echo "ab-barrier.sh: a run of $old failed" >&2; exit 1; }
        y=$(one_run "$new") || { echo "ab-barrier.sh: a run of $new failed" >&2; exit 1; }
    else
        y=$(one_run "$new") || { echo "ab-barrier.sh: a run of $new failed" >&2; exit 1; }
        x=$(one_run "$old") || { echo "ab-barrier.sh: a run of $old failed" >&2; exit 1; }
    fi
    a+=("$x")
    b+=("$y")
    echo "pair $i: old $x us, new $y us"
done
median() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
echo "Named barrier ($ranks ranks, PSHM=${PSHM:-1}, $n runs of $iters): old median $(median "${a[@]}") us, new median $(median "${b[@]}") us"
