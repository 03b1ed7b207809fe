#!/usr/bin/env bash
# GASNet-EX's own benchmarks (testam, testsmall, testlarge, testbarrier) on three conduits
# of one GASNet-EX build: rgasnet, udp and smp, in alternation (every repeat runs each
# conduit once, in rotating order, so that a noisy spell of this VM hits all of them), and
# the median of each headline figure.
#
#   scripts/ab-gasnet-conduits.sh DIR [REPEATS]
#
# DIR is what scripts/gasnet-ex.sh built (DIR/build holds the configured tree). Two paths:
#   net  shared memory off (GASNET_SUPERNODE_MAXSIZE=1): rgasnet's Portals engine over UDP
#        against udp-conduit;
#   shm  two ranks on GASNet's PSHM: rgasnet-conduit (which leaves same-host peers to PSHM)
#        against smp-conduit.
# TESTS="testam testsmall" limits the run to some of the four benchmarks.
# Also runs rgasnet's own Rust testam/testsmall on both paths in the same rotation: on the
# network path to show what the C boundary costs, on shared memory to compare rgasnet's PSHM
# with GASNet's (the conduit uses GASNet's). Prints every run, then one table of medians.
set -euo pipefail
if [ $# -lt 1 ]; then
    sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'
    exit 2
fi
dir=$(cd "$1" && pwd)
n=${2:-5}
root=$(cd "$(dirname "$0")/.." && pwd)
build=$dir/build
[ -d "$build/rgasnet-conduit" ] || { echo "ab-gasnet-conduits.sh: $build/rgasnet-conduit missing: run scripts/gasnet-ex.sh first" >&2; exit 2; }
tests=${TESTS:-testam testsmall testlarge testbarrier}
for c in rgasnet udp smp; do
    make -s -C "$build/$c-conduit" $tests >/dev/null 2>&1 ||
        { echo "ab-gasnet-conduits.sh: building $tests for $c-conduit failed" >&2; exit 1; }
done
# PROFILE: the cargo profile of rgasnet's own programs (the "rust" rows), default release-lto,
# the build of the published figures and of the conduit's library (scripts/gasnet-ex.sh).
profile=${PROFILE:-release-lto}
(cd "$root" && cargo build -q --profile "$profile" -p rgasnet-bench -p rgasnet-launcher) ||
    { echo "ab-gasnet-conduits.sh: cargo build failed" >&2; exit 1; }

# Arguments of each benchmark on a path: iterations and sizes that keep one run to a few
# seconds. An 8-byte put or get over shared memory takes 1-3 ns: a million of them make the
# printed total (whole microseconds) precise to a thousandth of a nanosecond each, where the
# printed average (thousandths of a microsecond) is whole nanoseconds.
args_of() {
    case $1 in
        testam) echo "2000 8" ;;
        testsmall) if [ "$2" = shm ]; then echo "1000000 8"; else echo "4000 8"; fi ;;
        testlarge) echo "200 1048576" ;;
        testbarrier) echo "5000" ;;
    esac
}

# run CONDUIT PATH TEST: prints the benchmark's output.
run() {
    local c=$1 path=$2 t=$3 a
    a=$(args_of "$t" "$path")
    local env=(GASNET_SUPERNODE_MAXSIZE=$([ "$path" = net ] && echo 1 || echo 0))
    case $c in
        rgasnet) (cd "$build/rgasnet-conduit" && env "${env[@]}" timeout 300 ./contrib/gasnetrun_rgasnet -n 2 "./$t" $a) ;;
        udp) (cd "$build/udp-conduit" && env "${env[@]}" GASNET_SPAWNFN=L timeout 300 "./$t" 2 $a) ;;
        smp) (cd "$build/smp-conduit" && GASNET_PSHM_NODES=2 timeout 300 "./$t" $a) ;;
        rust)
            local bin=$root/target/$profile pshm
            pshm=$([ "$path" = net ] && echo 0 || echo 1)
            case $t in
                testam) RGASNET_PSHM=$pshm timeout 300 "$bin/rgasnetrun" -n 2 "$bin/testam" -i 2000 --max-size 8 --sections AB --no-baseline ;;
                testsmall) RGASNET_PSHM=$pshm timeout 300 "$bin/rgasnetrun" -n 2 "$bin/testsmall" -i "$(args_of testsmall "$path" | cut -d' ' -f1)" --max-size 8 --no-baseline ;;
            esac ;;
    esac 2>&1
}

# Headline figures of one output: "name value" lines. Put and get latencies are the printed
# total over the iterations (see args_of), not the rounded average.
extract() {
    awk '
        function per_op(   i, iters, total, ave) {
            for (i = 1; i <= NF; i++) {
                if ($i == "iters,") iters = $(i-1)
                if ($i == "total,") total = $(i-2)
                if ($i == "ave.") ave = $(i-2)
            }
            # A line without a count or total (not seen so far): its rounded average.
            if (iters + 0 <= 0 || total == "") return ave
            return sprintf("%.6f", total / iters)
        }
        /AMShort +ping-pong roundtrip ReqRep:/ { print "am_short_us", $(NF-1) }
        /^B: +8 AMMedium +ping-pong roundtrip ReqRep:/ { print "am_medium8_us", $(NF-3) }
        /^ *8 +AMMedium +ping-pong roundtrip ReqRep/ { print "am_medium8_us", $(NF-3) }
        / 8 byte .*\((PutBlocking|put) latency\)/ { print "put8_us", per_op() }
        / 8 byte .*\((GetBlocking|get) latency\)/ { print "get8_us", per_op() }
        / 1048576 byte .*\(PutBlocking throughput\)/ { for (i = 1; i <= NF; i++) if ($i == "KB/sec") print "put1m_MBps", $(i-1) / 1000 }
        / 1048576 byte .*\(GetBlocking throughput\)/ { for (i = 1; i <= NF; i++) if ($i == "KB/sec") print "get1m_MBps", $(i-1) / 1000 }
        /Avg Named Barrier latency:/ { print "barrier_us", $(NF-1) }
    '
}

results=$(mktemp)
trap 'rm -f "$results"' EXIT
plan=("rgasnet net" "udp net" "rust net" "rgasnet shm" "smp shm" "rust shm")
for i in $(seq 1 "$n"); do
    for t in $tests; do
        # Rotate the order each repeat.
        k=${#plan[@]}
        for j in $(seq 0 $((k - 1))); do
            read -r c path <<<"${plan[$(((i + j) % k))]}"
            [ "$c" = rust ] && [ "$t" != testam ] && [ "$t" != testsmall ] && continue
            out=$(run "$c" "$path" "$t") || { echo "ab-gasnet-conduits.sh: $c $path $t failed:" >&2; echo "$out" | tail -20 >&2; exit 1; }
            echo "$out" | extract | while read -r name v; do
                echo "$i $c $path $name $v" | tee -a "$results"
            done
        done
    done
done

median() { sort -g | awk '{ v[NR] = $1 } END { if (NR) print v[int((NR + 1) / 2)]; else print "-" }'; }
med() { awk -v c="$1" -v p="$2" -v m="$3" '$2 == c && $3 == p && $4 == m { print $5 }' "$results" | median; }
echo
echo "Medians of $n alternating runs (2 ranks, this host; us lower is better, MB/s higher is better)"
printf '%-14s %12s %12s %8s %12s %12s %12s %8s %12s\n' figure rgasnet-net udp-net ratio rust-net rgasnet-shm smp-shm ratio rust-shm
for m in am_short_us am_medium8_us put8_us get8_us barrier_us put1m_MBps get1m_MBps; do
    rn=$(med rgasnet net $m) un=$(med udp net $m) ru=$(med rust net $m) rs=$(med rgasnet shm $m) ss=$(med smp shm $m) rr=$(med rust shm $m)
    ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "-" || b == "-" || b == 0) print "-"; else printf "%.2f", a / b }'; }
    printf '%-14s %12s %12s %8s %12s %12s %12s %8s %12s\n' "$m" "$rn" "$un" "$(ratio "$rn" "$un")" "$ru" "$rs" "$ss" "$(ratio "$rs" "$ss")" "$rr"
done
