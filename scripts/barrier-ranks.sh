#!/usr/bin/env bash
# Barriers among many ranks of one host (issue 26): rgasnet's `testbarrier` against GASNet-EX's
# on smp-conduit (shared memory) and udp-conduit (network), alternating within every round
# (rgasnet first in odd rounds, the peer first in even ones), for each rank count in turn.
# Prints every run's named-barrier latency, then per path and rank count the medians and the
# median of the per-round ratios rgasnet / GASNet.
#
#   scripts/barrier-ranks.sh GASNET_BUILD_DIR [ROUNDS] [RANKS...]     (default 7 rounds; 2 4 8 16)
#
# GASNET_BUILD_DIR: the `build` folder of scripts/gasnet-ex.sh (its smp-conduit/ and
# udp-conduit/ hold `testbarrier`; built here if missing).
# PATHS: "shm" (default), "net", or "shm net". SHM_ITERS (default 100000: at 20000, 8 and 16
# crowded ranks measured up to 1.6 x slower per barrier, a run's start weighing on its
# average), NET_ITERS (rgasnet, default 2000) and UDP_ITERS (udp-conduit, whose oversubscribed
# barrier takes tens of ms; default 200) set the barriers per run.
# BIN_DIR: where rgasnetrun and testbarrier are (default target/release, built when cargo is
# at hand): a machine without a toolchain gets stripped copies carried there. On shared memory
# each round also runs the counter-barrier floor (`barrier_floor`, from BIN_DIR or its
# examples/ folder; the example benches/examples/barrier_floor.rs): bare processes, no
# barrier software, i.e. what the scheduler and the cache cost at that rank count.
# ALT_ENV ("VAR=value ...") and/or ALT_BIN_DIR add a side "alt": rgasnet again, with that
# environment and/or those binaries, in the same rotation (an A/B of two builds or settings
# against the same peer runs).
# The many-core figures of the issue (16 ranks on 16 cores) need a machine with that many
# cores (scripts/device-barriers.sh runs this script on a lent one); on a 2-vCPU VM every
# count above 2 is oversubscribed.
set -euo pipefail
if [ $# -lt 1 ]; then
    sed -n '2,26p' "$0" | sed 's/^# \{0,1\}//'
    exit 2
fi
gasnet=$(cd "$1" && pwd)
shift
rounds=${1:-7}
[ $# -gt 0 ] && shift
ranks=("$@")
[ ${#ranks[@]} -gt 0 ] || ranks=(2 4 8 16)
root=$(cd "$(dirname "$0")/.." && pwd)
bin=${BIN_DIR:-$root/target/release}
paths=${PATHS:-shm}
if [ -z "${BIN_DIR:-}" ] && command -v cargo >/dev/null; then
    (cd "$root" && cargo build -q --release -p rgasnet-bench -p rgasnet-launcher &&
        cargo build -q --release -p rgasnet-bench --example barrier_floor)
fi
floor=""
for f in "$bin/barrier_floor" "$bin/examples/barrier_floor"; do
    [ -x "$f" ] && { floor=$f; break; }
done
case " $paths " in *" shm "*) [ -n "$floor" ] ||
    echo "barrier-ranks.sh: no barrier_floor in $bin or $bin/examples: the floor column stays empty" >&2 ;; esac
for f in rgasnetrun testbarrier; do
    [ -x "$bin/$f" ] || { echo "barrier-ranks.sh: $bin/$f missing (build it, or set BIN_DIR)" >&2; exit 2; }
done
for c in smp udp; do
    case " $paths " in *" $([ $c = smp ] && echo shm || echo net) "*) ;; *) continue ;; esac
    [ -x "$gasnet/$c-conduit/testbarrier" ] || make -s -C "$gasnet/$c-conduit" testbarrier >/dev/null ||
        { echo "barrier-ranks.sh: no testbarrier for $c-conduit in $gasnet" >&2; exit 2; }
done

# Named-barrier latency (us) from a testbarrier's output (rgasnet's and GASNet's print alike).
named() { awk '/Avg Named Barrier latency:/ { print $(NF-1); found = 1 } END { exit !found }'; }
# run SIDE PATH RANKS: one run's named-barrier latency.
run() {
    local side=$1 path=$2 n=$3 out
    if [ "$side" = floor ]; then
        out=$(timeout 600 "$floor" "$n" "${SHM_ITERS:-100000}" 1 2>&1) ||
            { echo "barrier-ranks.sh: the floor at $n ranks failed:" >&2; echo "$out" | tail -5 >&2; return 1; }
        echo "$out" | awk '/counter-barrier floor/ { print $(NF-1); found = 1 } END { exit !found }'
        return
    elif [ "$side" = rgasnet ] || [ "$side" = alt ]; then
        local pshm=1 iters=${SHM_ITERS:-100000} b=$bin extra=()
        [ "$path" = net ] && pshm=0 iters=${NET_ITERS:-2000}
        if [ "$side" = alt ]; then
            b=${ALT_BIN_DIR:-$bin}
            # shellcheck disable=SC2206
            extra=(${ALT_ENV:-})
        fi
        out=$(env RGASNET_PSHM=$pshm "${extra[@]}" timeout 600 "$b/rgasnetrun" -n "$n" "$b/testbarrier" -i "$iters" 2>&1)
    elif [ "$path" = shm ]; then
        out=$(cd "$gasnet/smp-conduit" && GASNET_PSHM_NODES=$n timeout 600 ./testbarrier "${SHM_ITERS:-100000}" 2>&1)
    else
        # GASNET_MASTERIP: the workers reach the spawner over loopback, with no name service.
        out=$(cd "$gasnet/udp-conduit" && GASNET_SPAWNFN=L GASNET_SUPERNODE_MAXSIZE=1 \
            GASNET_MASTERIP=${GASNET_MASTERIP:-127.0.0.1} \
            timeout 600 ./testbarrier "$n" "${UDP_ITERS:-200}" 2>&1)
    fi || { echo "barrier-ranks.sh: $side $path $n ranks failed:" >&2; echo "$out" | tail -10 >&2; return 1; }
    echo "$out" | named || { echo "barrier-ranks.sh: no named-barrier line from $side $path $n ranks" >&2; return 1; }
}

results=$(mktemp)
trap 'rm -f "$results"' EXIT
for path in $paths; do
    peer=$([ "$path" = shm ] && echo smp || echo udp)
    for n in "${ranks[@]}"; do
        for r in $(seq 1 "$rounds"); do
            # Every side goes first in turn: round r rotates the list by r - 1.
            sides=(rgasnet "$peer")
            [ "$path" = shm ] && [ -n "$floor" ] && sides+=(floor)
            [ -n "${ALT_ENV:-}${ALT_BIN_DIR:-}" ] && sides+=(alt)
            k=$(((r - 1) % ${#sides[@]}))
            order=("${sides[@]:k}" "${sides[@]:0:k}")
            for side in "${order[@]}"; do
                v=$(run "$side" "$path" "$n")
                echo "$path $n round $r $side $v us"
                echo "$path $n $r $side $v" >>"$results"
            done
        done
    done
done

median() { sort -g | awk '{ v[NR] = $1 } END { if (NR) print v[int((NR + 1) / 2)]; else print "-" }'; }
# per_round PATH RANKS A B: the median over rounds of side A's figure / side B's.
per_round() {
    awk -v p="$1" -v n="$2" -v a="$3" -v b="$4" '$1 == p && $2 == n { v[$3, $4] = $5 }
        END { for (k in v) { split(k, x, SUBSEP); r = x[1]
                  if (x[2] == a && ((r, b) in v) && v[r, b] > 0) print v[r, a] / v[r, b] } }' "$results" |
        median | awk '{ if ($1 == "-") print "-"; else printf "%.3f\n", $1 }'
}
# side PATH RANKS SIDE: the median of SIDE's figures over the rounds.
side() { awk -v p="$1" -v n="$2" -v s="$3" '$1 == p && $2 == n && $4 == s { print $5 }' "$results" | median; }
echo "Named barrier, medians of $rounds alternating rounds (us; ratios: medians of per-round ratios)"
alt=$([ -n "${ALT_ENV:-}${ALT_BIN_DIR:-}" ] && echo 1 || true)
[ -n "$alt" ] && echo "alt: ${ALT_ENV:-} ${ALT_BIN_DIR:+binaries from $ALT_BIN_DIR}"
printf '%-5s %6s %12s %12s %8s %8s %14s %11s' path ranks rgasnet peer floor ratio rgasnet/floor peer/floor
[ -n "$alt" ] && printf ' %10s %9s %12s' alt alt/peer rgasnet/alt
echo
for path in $paths; do
    for n in "${ranks[@]}"; do
        peer=$([ "$path" = shm ] && echo smp || echo udp)
        printf '%-5s %6s %12s %12s %8s %8s %14s %11s' "$path" "$n" "$(side "$path" "$n" rgasnet)" \
            "$(side "$path" "$n" "$peer")" "$(side "$path" "$n" floor)" \
            "$(per_round "$path" "$n" rgasnet "$peer")" \
            "$(per_round "$path" "$n" rgasnet floor)" "$(per_round "$path" "$n" "$peer" floor)"
        [ -n "$alt" ] && printf ' %10s %9s %12s' "$(side "$path" "$n" alt)" \
            "$(per_round "$path" "$n" alt "$peer")" "$(per_round "$path" "$n" rgasnet alt)"
        echo
    done
done
