#!/usr/bin/env bash
# How many locked instructions (x86 `lock`-prefixed read-modify-writes and `xchg`: atomic
# adds and compare-exchanges, mutex lock and unlock) each rank of the 8-byte network put/get
# ping-pong executes per operation, and in which functions (issue 26). Callgrind counts them
# as one instruction each, but on this project's VMs one costs about 10 ns (an uncontended
# mutex lock and unlock, about 21 ns), as much as 20-40 ordinary instructions.
#
#   scripts/locked-ops.sh [BUILD_DIR] [ITERS]   (default target/release-lto, 20000 iterations)
#
# Runs `testsmall` section A (8 B put, then get: 2 x (ITERS + warm-up) operations) under
# callgrind with --dump-instr=yes, shared memory off, finds the locked instructions of the
# program with objdump, and prints per rank the executed count per operation, in all and
# per function (inlined code counts in the function it was inlined into).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin=${1:-$root/target/release-lto}
iters=${2:-20000}
for tool in valgrind objdump python3; do
    command -v "$tool" >/dev/null || { echo "locked-ops.sh: $tool is missing" >&2; exit 2; }
done
for prog in rgasnetrun testsmall; do
    [ -x "$bin/$prog" ] || {
        echo "locked-ops.sh: $bin/$prog is missing: cargo build --profile release-lto -p rgasnet-bench -p rgasnet-launcher" >&2
        exit 2
    }
done
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
objdump -d --no-show-raw-insn "$bin/testsmall" |
    awk '$2 == "lock" || $2 ~ /^xchg/ { sub(":", "", $1); print $1 }' >"$work/locked"
RGASNET_PSHM=0 GASNET_SUPERNODE_MAXSIZE=1 valgrind --tool=callgrind --dump-instr=yes \
    --trace-children=yes --callgrind-out-file="$work/cg.%p" \
    "$bin/rgasnetrun" -n 2 "$bin/testsmall" -i "$iters" --min-size 8 --max-size 8 \
    --sections A --no-baseline >"$work/out" 2>"$work/err" ||
    { tail -5 "$work/err" >&2; exit 1; }
python3 "$root/scripts/locked_ops.py" "$work/locked" "$bin/testsmall" "$work"/cg.*
