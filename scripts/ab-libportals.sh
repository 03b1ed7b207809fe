#!/usr/bin/env bash
# The C ping-pong benchmarks/c/ptl_pingpong.c, built once against rgasnet's libportals and
# once against the Portals 4 reference implementation (reliable UDP), run alternately
# (rgasnet, reference, rgasnet, ...), each run measuring the ping-pong and the put+ack round
# trip (lines "A:" and "B:" of the program), and also the raw UDP ping-pong between
# its two processes; prints every run, then the median round trip per size and build.
#
#   scripts/ab-libportals.sh TARBALL [REPEATS] [ITERS] [REF_ITERS]
#
# TARBALL is the reference implementation's release (its header is the ABI of both builds).
# REPEATS (default 5) runs of each; ITERS (default 4000) round trips per size up to 4 KiB on
# rgasnet, REF_ITERS (default 50) on the reference implementation, which takes milliseconds
# per round trip. The alternating runs of the reference implementation stop at REF_MAX bytes
# (default 32768); one more run afterwards tries its larger sizes within REF_TIMEOUT seconds
# (default 60): a size it does not finish is reported as "-" (it hangs at 256 KiB here).
set -euo pipefail
tarball=${1:?usage: $0 TARBALL [REPEATS] [ITERS] [REF_ITERS]}
n=${2:-5}
iters=${3:-4000}
ref_iters=${4:-50}
root=$(cd "$(dirname "$0")/.." && pwd)
work=$root/target/ab-libportals
mkdir -p "$work"
prefix=$("$root/scripts/libportals.sh" "$tarball" "$root/target/libportals" | sed -n 's/^PORTALS_PREFIX=//p')
ref=$("$root/scripts/portals4-ref.sh" "$tarball" "$root/target/portals4-ref" | sed -n 's/^PORTALS4_DIR=//p')
cc=${CC:-cc}
"$cc" -std=c11 -Wall -Wextra -Werror -O2 -I"$prefix/include" "$root/benches/c/ptl_pingpong.c" \
    -L"$prefix/lib" -Wl,-rpath,"$prefix/lib" -lportals -lpmi -o "$work/pingpong-rgasnet"
"$cc" -std=c11 -Wall -Wextra -Werror -O2 -I"$ref/include" "$root/benches/c/ptl_pingpong.c" \
    -L"$ref/lib" -Wl,-rpath,"$ref/lib" -lportals -lportals_runtime -o "$work/pingpong-ref"
results=$work/results
: >"$results"
for i in $(seq 1 "$n"); do
    for b in rgasnet ref; do
        log=$work/run-$b-$i.log
        if [ $b = rgasnet ]; then
            timeout 300 "$prefix/bin/rgasnetrun" -n 2 "$work/pingpong-rgasnet" "$iters" >"$log" 2>&1 || true
        else
            PTL_IFACE_NAME=lo timeout 300 "$ref/bin/yod" -np 2 \
                "$work/pingpong-ref" "$ref_iters" "${REF_MAX:-32768}" >"$log" 2>&1 || true
        fi
        echo "== run $i, $b"
        grep -E "^A:|^B:|^raw:" "$log" || echo "(no figures; see $log)"
        awk -v b=$b '/^A:/ { for (j = 1; j <= NF; j++) if ($j == "ave.") print b, $4, $(j-2) }
                     /^B:/ { for (j = 1; j <= NF; j++) if ($j == "ave.") print b, "ack" $4, $(j-2) }
                     /^raw: udp pingpong 8 byte rtt/ { print b, "raw", $(NF-1) }' "$log" >>"$results"
    done
done
log=$work/run-ref-large.log
PTL_IFACE_NAME=lo timeout "${REF_TIMEOUT:-60}" "$ref/bin/yod" -np 2 "$work/pingpong-ref" \
    "$ref_iters" >"$log" 2>&1 || echo "== reference implementation, all sizes: ended by the ${REF_TIMEOUT:-60} s limit (exit status $?)"
echo "== reference implementation, all sizes (one run)"
grep -E "^A:|^B:|^raw:" "$log" || echo "(no figures; see $log)"
awk '/^A:/ { for (j = 1; j <= NF; j++) if ($j == "ave.") print "ref", $4, $(j-2) }
     /^B:/ { for (j = 1; j <= NF; j++) if ($j == "ave.") print "ref", "ack" $4, $(j-2) }' "$log" |
    awk '{ n = $2; sub(/^ack/, "", n) } n + 0 > '"${REF_MAX:-32768}" >>"$results"
echo
echo "== medians of $n runs (round trip, us)"
printf "%10s %12s %12s %14s\n" size rgasnet reference "rgasnet/ref"
python3 - "$results" <<'PY'
import sys, statistics
vals = {}
for line in open(sys.argv[1]):
    b, size, v = line.split()
    vals.setdefault((b, size), []).append(float(v))
sizes = ["8", "64", "512", "4096", "32768", "262144", "1048576"]
for s in sizes + ["ack" + s for s in sizes] + ["raw"]:
    r = vals.get(("rgasnet", s)); f = vals.get(("ref", s))
    rm = statistics.median(r) if r else None
    fm = statistics.median(f) if f else None
    ratio = f"{rm / fm:.4f}" if rm and fm else "-"
    label = "raw udp 8" if s == "raw" else s.replace("ack", "put+ack ")
    print(f"{label:>10} {rm if rm is not None else '-':>12} {fm if fm is not None else '-':>12} {ratio:>14}")
r8 = vals.get(("rgasnet", "8")); raw = vals.get(("rgasnet", "raw"))
a8 = vals.get(("rgasnet", "ack8"))
if r8 and raw:
    print(f"rgasnet 8 B / raw UDP (same runs): {statistics.median(r8) / statistics.median(raw):.2f}")
if a8 and raw:
    print(f"rgasnet put+ack 8 B / raw UDP (same runs): {statistics.median(a8) / statistics.median(raw):.2f}")
PY
