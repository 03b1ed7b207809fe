#!/usr/bin/env bash
# A/B of the 8-byte C ping-pong (benches/c/ptl_pingpong.c) between two builds of rgasnet's
# libportals, for checking an optimisation on this shared, noisy machine: one program, run
# against each build's library in alternation (old, new, old, new, ...), N times each. Each
# run measures the ping-pong, the put+ack round trip and the raw UDP ping-pong between the same
# two processes in interleaved slices; the script prints every run and, per build, the medians
# of the per-run ratios to the raw UDP round trip (the ratio cancels most of the machine's
# drift between runs).
#
#   scripts/ab-libportals-builds.sh OLD_PREFIX NEW_PREFIX [N] [ITERS]
#
# A prefix is the install directory that scripts/libportals.sh prints (PORTALS_PREFIX: it
# holds include/, lib/ and bin/rgasnetrun), e.g. of a worktree of the commit before. N runs
# (default 10) of ITERS round trips (default 20000) each.
set -euo pipefail
if [ $# -lt 2 ]; then
    sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'
    exit 2
fi
old=$1 new=$2 n=${3:-10} iters=${4:-20000}
for p in "$old" "$new"; do
    for f in lib/libportals.so.4 lib/libpmi.so bin/rgasnetrun include/portals4.h; do
        if [ ! -e "$p/$f" ]; then
            echo "ab-libportals-builds.sh: $p/$f is missing (build it with scripts/libportals.sh)" >&2
            exit 2
        fi
    done
done
root=$(cd "$(dirname "$0")/.." && pwd)
work=$root/target/ab-libportals-builds
mkdir -p "$work"
# One binary: the library is chosen at run time through LD_LIBRARY_PATH (the ABI is the
# standard header's, the same in both builds).
"${CC:-cc}" -std=c11 -Wall -Wextra -Werror -O2 -I"$new/include" "$root/benches/c/ptl_pingpong.c" \
    -L"$new/lib" -lportals -lpmi -o "$work/ptl_pingpong"
: >"$work/results"
for i in $(seq 1 "$n"); do
    for b in old new; do
        prefix=$old
        [ $b = new ] && prefix=$new
        log=$work/run-$b-$i.log
        LD_LIBRARY_PATH=$prefix/lib timeout 120 "$prefix/bin/rgasnetrun" -n 2 \
            "$work/ptl_pingpong" "$iters" 8 >"$log" 2>&1 || true
        ping=$(awk '/^A: .* 8 byte/ { for (j = 1; j <= NF; j++) if ($j == "ave.") print $(j-2) }' "$log")
        ack=$(awk '/^B: .* 8 byte/ { for (j = 1; j <= NF; j++) if ($j == "ave.") print $(j-2) }' "$log")
        raw=$(awk '/^raw: udp pingpong 8 byte rtt/ { print $(NF-1) }' "$log")
        if [ -z "$ping" ] || [ -z "$ack" ] || [ -z "$raw" ]; then
            echo "run $i $b: no figures (see $log)"
            continue
        fi
        echo "run $i $b: ping-pong $ping us, put+ack $ack us, raw udp $raw us"
        echo "$b $ping $ack $raw" >>"$work/results"
    done
done
python3 - "$work/results" <<'PY'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    b, ping, ack, raw = line.split()
    rows.setdefault(b, []).append((float(ping), float(ack), float(raw)))
print("== medians (us; ratios are per run, to that run's raw UDP round trip)")
print(f"{'build':6} {'runs':>4} {'ping-pong':>10} {'put+ack':>9} {'raw udp':>8} {'ping/raw':>9} {'ack/raw':>8}")
for b in ("old", "new"):
    r = rows.get(b, [])
    if not r:
        print(f"{b:6} no runs")
        continue
    med = lambda k: statistics.median(x[k] for x in r)
    pr = statistics.median(x[0] / x[2] for x in r)
    ar = statistics.median(x[1] / x[2] for x in r)
    print(f"{b:6} {len(r):>4} {med(0):>10.3f} {med(1):>9.3f} {med(2):>8.3f} {pr:>9.3f} {ar:>8.3f}")
PY
