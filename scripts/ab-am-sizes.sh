#!/usr/bin/env bash
# A/B of AM round trips by payload size between two builds, against each build's own AM Short:
# runs both builds' `testam` (sections A = Short, B = Medium, F = Long; 0-512 bytes) in
# alternation, N times each, and prints per size the medians and their ratio to the Short of
# the same build (issue 26: a small Medium or Long should cost no more than a Short plus its
# copy).
#
#   scripts/ab-am-sizes.sh OLD_TARGET_DIR NEW_TARGET_DIR [pshm|native] [N] [ITERS]
#
# A target directory holds `release/` (e.g. `target`, or `CARGO_TARGET_DIR=/tmp/old cargo
# build --release -p rgasnet-bench -p rgasnet-launcher` of another commit). Default path native.
set -euo pipefail
. "$(dirname "$0")/ab-builds.sh"
if [ $# -lt 2 ]; then
    ab_usage "$0" 2 11
    exit 2
fi
old=$1 new=$2 path=${3:-native} n=${4:-9} iters=${5:-5000}
case $path in
    pshm) pshm=1 ;;
    native) pshm=0 ;;
    *) echo "ab-am-sizes.sh: path must be pshm or native, not '$path'" >&2; exit 2 ;;
esac
ab_require ab-am-sizes.sh "$old" "$new" -- rgasnetrun testam
results=$(mktemp)
trap 'rm -f "$results"' EXIT
for i in $(seq 1 "$n"); do
    ab_order "$i" "$old" "$new"
    for entry in "${order[@]}"; do
        read -r label dir <<<"$entry"
        out=$(RGASNET_PSHM=$pshm timeout 300 "$dir/$profile/rgasnetrun" -n 2 "$dir/$profile/testam" \
            -i "$iters" --max-size 512 --sections ABF --no-baseline 2>&1) ||
            { echo "ab-am-sizes.sh: $label failed:" >&2; echo "$out" | tail -20 >&2; exit 1; }
        # Lines with a size carry a bandwidth column after the time; size 0 does not.
        echo "$out" | awk -v l="$label" '
            /AMShort +ping-pong roundtrip ReqRep:/ { print l, "short", $(NF-1) }
            /^[BF]: +[0-9]+ AM(Medium|Long) +ping-pong roundtrip ReqRep/ {
                kind = ($3 == "AMMedium") ? "medium" : "long"
                v = ($2 == 0) ? $(NF-1) : $(NF-3)
                print l, kind $2, v
            }' >>"$results"
    done
done
med() { awk -v l="$1" -v f="$2" '$1 == l && $2 == f { print $3 }' "$results" | ab_median; }
echo "AM ping-pong ReqRep round trips ($path, medians of $n alternating runs of $iters; us)"
printf '%-12s %10s %8s %10s %8s\n' figure old /short new /short
os=$(med old short) ns=$(med new short)
for f in short medium0 medium1 medium8 medium64 medium128 medium256 medium512 long0 long1 long8 long64 long128 long256 long512; do
    o=$(med old "$f") w=$(med new "$f")
    printf '%-12s %10s %8s %10s %8s\n' "$f" "$o" \
        "$(awk -v a="$o" -v b="$os" 'BEGIN { if (a == "-" || b == "-" || b == 0) print "-"; else printf "%.2f", a / b }')" \
        "$w" "$(awk -v a="$w" -v b="$ns" 'BEGIN { if (a == "-" || b == "-" || b == 0) print "-"; else printf "%.2f", a / b }')"
done
