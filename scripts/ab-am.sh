#!/usr/bin/env bash
# A/B of the AM Short ping-pong round trip between two builds, for checking an optimisation
# on this shared, noisy machine: runs each build's `testam` in alternation (so that a noisy
# spell hits both), N times each, and prints every run's GASNet-style average and each
# build's median.
#
#   scripts/ab-am.sh OLD_TARGET_DIR NEW_TARGET_DIR [pshm|native] [N] [ITERS]
#
# A target directory is the one holding `release/` (e.g. `target`, or a build of another
# commit: `CARGO_TARGET_DIR=/tmp/old cargo build --release`). The path is `pshm` (two ranks
# on shared memory, the default) or `native` (over the Portals engine on UDP loopback).
set -euo pipefail
. "$(dirname "$0")/ab-builds.sh"
if [ $# -lt 2 ]; then
    ab_usage "$0" 2 11
    exit 2
fi
old=$1 new=$2 path=${3:-pshm} n=${4:-8} iters=${5:-50000}
case $path in
    pshm) pshm=1 ;;
    native) pshm=0 ;;
    *) echo "ab-am.sh: path must be pshm or native, not '$path'" >&2; exit 2 ;;
esac
ab_require ab-am.sh "$old" "$new" -- rgasnetrun testam

one_run() {
    RGASNET_PSHM=$pshm "$1/$profile/rgasnetrun" -n 2 "$1/$profile/testam" --sections A \
        -i "$iters" --no-baseline 2>&1 |
        awk '/AMShort +ping-pong roundtrip ReqRep/ { print $(NF-1); found=1 }
             END { if (!found) exit 1 }'
}

declare -a a b
for i in $(seq 1 "$n"); do
    a+=("$(one_run "$old")") || { echo "ab-am.sh: a run of $old failed" >&2; exit 1; }
    b+=("$(one_run "$new")") || { echo "ab-am.sh: a run of $new failed" >&2; exit 1; }
    echo "pair $i: old ${a[-1]} us, new ${b[-1]} us"
done
median() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
echo "AM Short ping-pong ReqRep ($path, $n runs of $iters): old median $(median "${a[@]}") us, new median $(median "${b[@]}") us"
