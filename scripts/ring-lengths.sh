#!/usr/bin/env bash
# What moving to a new cache line per message costs a shared-memory ping-pong, by ring length:
# runs `queue_floor 1 CELLS` (benches/examples) for each cell count in rotating order, REPS
# rounds, and prints per cell count the median over the rounds of the ring ping-pong, and of
# the two-line floor measured in the same runs. One cell is the two-line ping-pong with a
# position for a flag; 4,096 cells is what a queue of rgasnet-pshm has.
#
#   scripts/ring-lengths.sh [REPS] [CELLS ...]     (default 15; 1 4 16 64 512 4096 65536)
#
# Build first: cargo build --release -p rgasnet-bench --example queue_floor
set -euo pipefail
case ${1:-} in -h|--help) sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;; esac
bin=${QUEUE_FLOOR:-target/release/examples/queue_floor}
[ -x "$bin" ] || { echo "ring-lengths.sh: $bin is missing: cargo build --release -p rgasnet-bench --example queue_floor" >&2; exit 2; }
reps=${1:-15}
[[ $reps =~ ^[1-9][0-9]*$ ]] || { echo "ring-lengths.sh: REPS must be a positive integer, not '$reps'" >&2; exit 2; }
shift || true
cells=("$@")
[ ${#cells[@]} -gt 0 ] || cells=(1 4 16 64 512 4096 65536)
n=${#cells[@]}
rows=$(mktemp); trap 'rm -f "$rows"' EXIT
for r in $(seq 1 "$reps"); do
    for i in $(seq 0 $((n - 1))); do
        c=${cells[$(((i + r) % n))]}
        out=$("$bin" 1 "$c")
        two=$(sed -n 's/^two-line ping-pong: \([0-9.]*\) ns$/\1/p' <<<"$out")
        ring=$(sed -n 's/^ring ping-pong ([0-9]* cells per ring): \([0-9.]*\) ns = .*/\1/p' <<<"$out")
        [ -n "$two" ] && [ -n "$ring" ] || { echo "ring-lengths.sh: no figures from $bin 1 $c:" >&2; echo "$out" >&2; exit 1; }
        echo "$c $two $ring" >>"$rows"
    done
done
median() { sort -n | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}'; }
printf '%8s %14s %14s\n' cells "ring (ns)" "two-line (ns)"
for c in "${cells[@]}"; do
    printf '%8s %14s %14s\n' "$c" "$(awk -v c="$c" '$1 == c {print $3}' "$rows" | median)" \
        "$(awk -v c="$c" '$1 == c {print $2}' "$rows" | median)"
done
