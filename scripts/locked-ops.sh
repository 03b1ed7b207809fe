#!/usr/bin/env bash
# How many locked instructions (x86 `lock`-prefixed read-modify-writes and `xchg`: atomic
# adds and compare-exchanges, mutex lock and unlock) each rank of the 8-byte network put/get
# ping-pong executes per operation, and in which functions (issue 26). Callgrind counts them
# as one instruction each; what one costs on this machine is timed at the end (an
# uncontended std Mutex lock and unlock, and a relaxed atomic add, in a loop).
#
#   scripts/locked-ops.sh [BUILD_DIR] [ITERS]   (default target/release-lto, 20000 iterations)
#
# Runs `testsmall` section A (8 B put, then get: 2 x (ITERS + warm-up) operations) under
# callgrind with --dump-instr=yes, shared memory off, finds the locked instructions of the
# program with objdump (`lock`-prefixed instructions, and `xchg` with a memory operand, which
# locks implicitly; `xchg %ax,%ax` is a no-op used as padding), and prints per rank the
# executed count per operation, in all and per function (inlined code counts in the function
# it was inlined into).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin=${1:-$root/target/release-lto}
iters=${2:-20000}
for tool in valgrind objdump python3 rustc; do
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
    awk '$2 == "lock" || ($2 ~ /^xchg/ && $3 ~ /\(/) { sub(":", "", $1); print $1 }' >"$work/locked"
RGASNET_PSHM=0 GASNET_SUPERNODE_MAXSIZE=1 valgrind --tool=callgrind --dump-instr=yes \
    --trace-children=yes --callgrind-out-file="$work/cg.%p" \
    "$bin/rgasnetrun" -n 2 "$bin/testsmall" -i "$iters" --min-size 8 --max-size 8 \
    --sections A --no-baseline >"$work/out" 2>"$work/err" ||
    { tail -5 "$work/err" >&2; exit 1; }
python3 "$root/scripts/locked_ops.py" "$work/locked" "$bin/testsmall" "$work"/cg.*

# What a locked instruction costs here: 5 rounds of 20 million, the median round.
cat >"$work/lock_cost.rs" <<'RUST'
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Instant;

fn median_ns(mut f: impl FnMut(u64)) -> f64 {
    const N: u64 = 20_000_000;
    let mut rounds: Vec<f64> = (0..5)
        .map(|_| {
            let t = Instant::now();
            for i in 0..N {
                f(i);
            }
            t.elapsed().as_nanos() as f64 / N as f64
        })
        .collect();
    rounds.sort_by(f64::total_cmp);
    rounds[2]
}

fn main() {
    let m = Mutex::new(0u64);
    let a = AtomicU64::new(0);
    let mut plain = 0u64;
    let pair = median_ns(|i| {
        let mut g = m.lock().unwrap_or_else(|p| p.into_inner());
        *g = g.wrapping_add(i);
    });
    // Relaxed: only the count matters, and only to this thread.
    let add = median_ns(|i| {
        std::hint::black_box(a.fetch_add(i, Ordering::Relaxed));
    });
    let loop_only = median_ns(|i| plain = std::hint::black_box(plain.wrapping_add(i)));
    println!(
        "\none uncontended Mutex lock + unlock: {pair:.1} ns; one relaxed fetch_add (lock xadd): {add:.1} ns; the loop alone: {loop_only:.1} ns"
    );
}
RUST
rustc -O --edition 2021 -o "$work/lock_cost" "$work/lock_cost.rs"
"$work/lock_cost"
