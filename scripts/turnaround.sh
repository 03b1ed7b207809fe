#!/usr/bin/env bash
# Where the network round trip's time beyond raw UDP goes (issue 26): each side's turnaround,
# the time from the receive call that returned a datagram to the next send call, measured by
# benches/c/turnaround_shim.c (preloaded) on the raw UDP ping-pong (benches/c/udp_size_rtt.c,
# 8 bytes) and on rgasnet's 8-byte put/get (`testsmall`, section A) and AM Short ping-pongs
# (`testam`, section A), shared memory off, alternating within every round. The kernel's part
# of a hop lies inside the two calls, so what a round trip costs beyond raw UDP is about the
# two sides' extra turnaround, plus half a polling round per side more to notice an arrival
# (the "polls per datagram" columns: receive calls per datagram received). The "send" columns
# are the time of the send call that ends a turnaround: on loopback the kernel delivers the
# datagram into the receiver's socket inside it, so two of them are most of the raw round trip.
# The "idle round" columns are the median time from one receive call that found nothing to the
# next (an arrival waits about half a round to be noticed), next to the median empty receive.
#
#   scripts/turnaround.sh [ROUNDS] [ITERS]          (default 5 rounds of 20000 round trips)
#
# BIN=DIR runs DIR's rgasnetrun, testsmall and testam (e.g. target/pgo/release-lto) instead of
# building and running target/release's.
# Prints every run's lines, then per program the medians of the per-run p50 turnarounds of
# rank 0 (the initiator) and rank 1 (the target), their sum less the raw pair's, and the
# medians of the per-run p50 send times.
set -euo pipefail
rounds=${1:-5}
iters=${2:-20000}
root=$(cd "$(dirname "$0")/.." && pwd)
work=$root/target/turnaround
mkdir -p "$work"
cc=${CC:-cc}
"$cc" -std=c11 -Wall -Wextra -Werror -O2 -shared -fPIC "$root/benches/c/turnaround_shim.c" \
    -o "$work/libturnaround_shim.so" -ldl
"$cc" -std=c11 -Wall -Wextra -Werror -O2 "$root/benches/c/udp_size_rtt.c" -o "$work/udp_size_rtt"
if [ -n "${BIN:-}" ]; then
    bin=$BIN
    . "$root/scripts/ab-builds.sh"
    require_programs turnaround.sh "$bin" rgasnetrun testsmall testam
else
    (cd "$root" && cargo build -q --release -p rgasnet-bench -p rgasnet-launcher)
    bin=$root/target/release
fi
shim=$work/libturnaround_shim.so
results=$work/results
: >"$results"

# record NAME < output: the run's turnaround lines as
# "NAME RANK P50 RECEIVES EMPTY SEND ROUND_P50 EMPTY_RECEIVE".
record() {
    local name=$1 out
    out=$(cat)
    echo "$out" | grep -E '^turnaround:|us ave|rtt|8 bytes' || true
    echo "$out" | awk -v n="$name" '/^turnaround:/ {
        p = ""; e = ""; s = "nan"; m = "nan"; q = "nan"; gsub(/;/, "")
        for (i = 1; i <= NF; i++) { if ($i == "rank") r = $(i + 1)
            if ($i == "p50" && p == "") p = $(i + 1)
            if ($i == "receives") v = $(i + 1); if ($i == "empty" && e == "") e = $(i + 1)
            if ($i == "send") s = $(i + 2); if ($i == "round") m = $(i + 2)
            if ($i == "receive" && $(i + 1) == "p50") q = $(i + 2) }
        print n, r, p, v, e, s, m, q }' >>"$results"
}
for i in $(seq 1 "$rounds"); do
    echo "== round $i"
    LD_PRELOAD=$shim timeout 120 "$work/udp_size_rtt" "$iters" 1 8 2>&1 | record raw
    RGASNET_PSHM=0 LD_PRELOAD=$shim timeout 120 "$bin/rgasnetrun" -n 2 "$bin/testsmall" \
        -i "$iters" --min-size 8 --max-size 8 --sections A --no-baseline 2>&1 | record put/get
    RGASNET_PSHM=0 LD_PRELOAD=$shim timeout 120 "$bin/rgasnetrun" -n 2 "$bin/testam" \
        -i "$iters" --max-size 0 --sections A --no-baseline 2>&1 | record "AM Short"
done
echo "== medians of $rounds rounds: p50 turnaround per side (us), receive calls per datagram"
python3 - "$results" <<'PY'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    *name, rank, p50, got, empty, send, round_p50, empty_recv = line.split()
    rows.setdefault(" ".join(name), {}).setdefault(rank, []).append(
        (float(p50), (int(got) + int(empty)) / max(int(got), 1), float(send),
         float(round_p50), float(empty_recv)))
def med(vals, k):
    return statistics.median(v[k] for v in vals)
raw = rows.get("raw", {}).get("-", [])
if not raw:
    sys.exit("no raw turnaround measured")
raw_side = med(raw, 0)
print(f"{'program':10} {'rank 0':>8} {'rank 1':>8} {'extra per round trip':>21} "
      f"{'polls/datagram 0, 1':>20} {'send 0, 1':>14} {'idle round 0, 1':>16} "
      f"{'empty recv 0, 1':>16}")
print(f"{'raw':10} {raw_side:8.3f} {raw_side:8.3f} {0:21.3f} {med(raw, 1):10.1f}{'':6} "
      f"{med(raw, 2):8.3f}{'':6} {med(raw, 3):8.3f}{'':8} {med(raw, 4):8.3f}")
for name, ranks in rows.items():
    if name == "raw" or "0" not in ranks or "1" not in ranks:
        continue
    r0, r1 = med(ranks["0"], 0), med(ranks["1"], 0)
    print(f"{name:10} {r0:8.3f} {r1:8.3f} {r0 + r1 - 2 * raw_side:21.3f} "
          f"{med(ranks['0'], 1):10.1f}{med(ranks['1'], 1):6.1f} "
          f"{med(ranks['0'], 2):8.3f}{med(ranks['1'], 2):6.3f} "
          f"{med(ranks['0'], 3):8.3f}{med(ranks['1'], 3):8.3f} "
          f"{med(ranks['0'], 4):8.3f}{med(ranks['1'], 4):8.3f}")
PY
