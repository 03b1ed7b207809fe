#!/usr/bin/env bash
# Do two `rgasnet-bench compare` runs agree? The benchmark check of issue #26: on an idle
# machine of this class, two runs with the default options must give every headline ratio
# (rgasnet's native path against GASNet-EX udp-conduit, its shared-memory path against
# smp-conduit) within 10 % of each other. A headline ratio is the median over the repeats of
# the ratio measured within each repeat (rgasnet and the peer back to back). Not a timed unit
# test: a script to run by hand or in a benchmark job.
#
#   scripts/compare-agreement.sh GASNET_BUILD_DIR [compare options...]
#
# GASNET_BUILD_DIR: a GASNet-EX build tree with the udp and smp conduits' tests (the `build`
# folder of scripts/gasnet-ex.sh). Extra options go to both compare runs (e.g. `-i 2000`).
# Prints the ratios of both runs and their agreement; exits 1 when one differs by more than
# 10 %, 2 when a headline figure is missing.
set -euo pipefail
cd "$(dirname "$0")/.."
gasnet=${1:?usage: $0 GASNET_BUILD_DIR [compare options...]}
shift
# PROFILE: the cargo profile of the benchmark build (default release-lto, the published
# figures' build; `release` for a build as the tests use it). BENCH_DIR=DIR instead runs the
# programs already in DIR (e.g. target/pgo/release-lto from scripts/pgo-build.sh), building
# nothing.
if [ -n "${BENCH_DIR:-}" ]; then
    bench=$BENCH_DIR
    . scripts/ab-builds.sh
    require_programs compare-agreement.sh "$bench" rgasnet-bench rgasnetrun testam testsmall \
        testlarge testbarrier
else
    profile=${PROFILE:-release-lto}
    cargo build --profile "$profile" -q -p rgasnet-bench -p rgasnet-launcher
    bench=target/$profile
fi
# AGREEMENT_KEEP=DIR keeps both runs' tables (compare's output folders DIR/1 and DIR/2).
if [ -n "${AGREEMENT_KEEP:-}" ]; then
    work=$AGREEMENT_KEEP
    mkdir -p "$work"
else
    work=$(mktemp -d)
    trap 'rm -rf "$work"' EXIT
fi
# The headlines need both peers' tests; compare skips a missing one with a note, which would
# cost both runs' time before the check below finds no ratio. Build them, or stop now.
for c in udp smp; do
    for b in testam testsmall testlarge testbarrier; do
        [ -x "$gasnet/$c-conduit/$b" ] && continue
        echo "compare-agreement.sh: building $c-conduit's $b in $gasnet" >&2
        make -s -C "$gasnet/$c-conduit" "$b" >/dev/null ||
            { echo "compare-agreement.sh: no $b for $c-conduit in $gasnet (make -C $gasnet/$c-conduit $b failed)" >&2; exit 2; }
    done
done
# The headlines set rgasnet against udp- and smp-conduit only, while compare runs every
# conduit it finds in the tree (the rgasnet conduit's jobs took a third of a run): it gets a
# folder that holds those two.
peers="$work/peers"
mkdir -p "$peers"
for c in udp smp; do
    ln -sfn "$(cd "$gasnet/$c-conduit" && pwd)" "$peers/$c-conduit"
done
for run in 1 2; do
    "$bench/rgasnet-bench" compare --gasnet "$peers" --paths native,pshm \
        --no-plots --out "$work/$run" "$@" >/dev/null 2>"$work/$run.log" ||
        { tail -5 "$work/$run.log" >&2; exit 2; }
done

# Headline figures: label, our path, peer path, figure, size ("" for none).
headlines=(
    "put 8 B|native|gasnet-udp|put latency|8"
    "get 8 B|native|gasnet-udp|get latency|8"
    "AM Short|native|gasnet-udp|AMShort ping-pong roundtrip ReqRep|"
    "AM Medium 8 B|native|gasnet-udp|AMMedium ping-pong roundtrip ReqRep|8"
    "barrier|native|gasnet-udp|Named Barrier|"
    "put 1 MiB|native|gasnet-udp|put_bulk throughput|1048576"
    "get 1 MiB|native|gasnet-udp|get_bulk throughput|1048576"
    "shm AM Short|pshm|gasnet-smp|AMShort ping-pong roundtrip ReqRep|"
)
# Not a headline: shared-memory put/get 8 B take 4-5 ns, which GASNet's tests print to the
# whole ns: their ratio moves in steps of 20-25 % whatever the iteration count.
# ratio OURS PEER FIGURE SIZE CSV: the median over the repeats of ours / peer measured in the
# same repeat and machine state (compare's peer_ratios.csv; see benches/src/compare/paired.rs),
# then `/` and the repeats left out for a change of machine state between the two jobs.
ratio() {
    awk -F, -v o="$1" -v p="$2" -v f="$3" -v s="$4" \
        '$1 == o && $2 == p && $4 == f && $5 == s { printf "%.3f/%s", $7, $11; exit }' "$5"
}
status=0
printf '%-14s %10s %10s %8s   %s\n' headline run1 run2 differ "(repeats left out: run1 run2)"
for h in "${headlines[@]}"; do
    IFS='|' read -r label ours peer figure size <<<"$h"
    ratios=()
    left=()
    for run in 1 2; do
        r=$(ratio "$ours" "$peer" "$figure" "$size" "$work/$run/peer_ratios.csv")
        if [ -z "$r" ]; then
            echo "$label: no $ours / $peer ratio in run $run" >&2
            exit 2
        fi
        ratios+=("${r%%/*}")
        left+=("${r#*/}")
    done
    d=$(awk -v x="${ratios[0]}" -v y="${ratios[1]}" 'BEGIN { d = x / y - 1; if (d < 0) d = -d; printf "%.1f", 100 * d }')
    mark=$(awk -v d="$d" 'BEGIN { print (d <= 10) ? "ok" : "DIFFERS" }')
    [ "$mark" = ok ] || status=1
    printf '%-14s %10s %10s %7s%% %-7s (%s %s)\n' "$label" "${ratios[0]}" "${ratios[1]}" "$d" "$mark" "${left[0]}" "${left[1]}"
done
exit "$status"
