#!/usr/bin/env bash
# Where rgasnet's libportals spends one hop of the 8-byte ping-pong: benchmarks/c/ptl_pingpong.c
# run with benches/c/hop_shim.c preloaded, which timestamps the datagram system calls. Per hop
# on rank 1: from the datagram's arrival (the receive call that returned it) to the return of
# the wait on it, from there to the answering put's send call, and from that call's end to the
# put's return (off the round trip's path), each next to the same parts of the raw UDP
# ping-pong of the same run. Prints every run's "hops:" line, then the medians.
#
#   scripts/libportals-hops.sh TARBALL [RUNS] [ITERS]
#
# TARBALL is the reference implementation's release (for its portals4.h); RUNS (default 5)
# runs of ITERS (default 4000) round trips.
set -euo pipefail
tarball=${1:?usage: $0 TARBALL [RUNS] [ITERS]}
runs=${2:-5}
iters=${3:-4000}
root=$(cd "$(dirname "$0")/.." && pwd)
work=$root/target/libportals-hops
mkdir -p "$work"
prefix=$("$root/scripts/libportals.sh" "$tarball" "$root/target/libportals" | sed -n 's/^PORTALS_PREFIX=//p')
cc=${CC:-cc}
"$cc" -std=c11 -Wall -Wextra -Werror -O2 -shared -fPIC "$root/benches/c/hop_shim.c" \
    -o "$work/libhop_shim.so" -ldl
"$cc" -std=c11 -Wall -Wextra -Werror -O2 -I"$prefix/include" "$root/benches/c/ptl_pingpong.c" \
    -L"$prefix/lib" -Wl,-rpath,"$prefix/lib" -lportals -lpmi -o "$work/ptl_pingpong"
: >"$work/hops"
for i in $(seq 1 "$runs"); do
    LD_PRELOAD=$work/libhop_shim.so timeout 120 "$prefix/bin/rgasnetrun" -n 2 \
        "$work/ptl_pingpong" "$iters" 8 >"$work/run-$i.log" 2>&1 || true
    grep -E "^hops:" "$work/run-$i.log" | tee -a "$work/hops" ||
        echo "(no hops line; see $work/run-$i.log)"
done
echo "== medians of $runs runs (us per hop): library (raw udp)"
python3 - "$work/hops" <<'PY'
import re, statistics, sys
rows = [list(map(float, re.findall(r"[0-9]+\.[0-9]+", l)))[:6] for l in open(sys.argv[1])]
if not rows:
    sys.exit("no figures")
med = [statistics.median(r[k] for r in rows) for k in range(6)]
names = ["arrival -> wait returns", "wait returns -> send call", "send call -> put returns"]
for j, n in enumerate(names):
    print(f"{n:28s} {med[2 * j]:.3f} ({med[2 * j + 1]:.3f})")
print(f"{'on the round trip, per hop':28s} {med[0] + med[2]:.3f} ({med[1] + med[3]:.3f})")
PY
