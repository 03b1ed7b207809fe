#!/usr/bin/env bash
# Profile-guided build of the benchmark programs and the launcher: builds them instrumented
# (fat LTO, as `release-lto`), runs a training workload on both paths (network and shared
# memory): testsmall and testam, every section and size, 2,000 iterations; testlarge;
# testbarrier, 100,000 barriers on 2 ranks and 1,000 on 4. Then it merges the profiles and
# builds again with them. The programs land in OUT_DIR/release-lto/, so that
# `PROFILE=release-lto scripts/ab-*.sh target OUT_DIR` and `OUT_DIR/release-lto/rgasnet-bench
# compare` take them. A PGAS runtime gets the same for its own program with the same three
# steps (rustc's -Cprofile-generate, a representative run, -Cprofile-use).
#
#   scripts/pgo-build.sh [OUT_DIR]        (default target/pgo)
#
# Needs llvm-profdata of the LLVM that rustc uses: `rustup component add llvm-tools`, or
# LLVM_PROFDATA=PATH to one of the same LLVM version. About 4-8 minutes on 2 cores.
set -euo pipefail
usage() { sed -n 2,14p "$0" | sed 's/^# \{0,1\}//'; }
case "${1:-}" in
    -h | --help) usage; exit 0 ;;
    -*) usage >&2; exit 2 ;;
esac
if [ $# -gt 1 ]; then
    usage >&2
    exit 2
fi
root=$(cd "$(dirname "$0")/.." && pwd)
out=$(realpath -m "${1:-$root/target/pgo}")
# The second build goes to OUT_DIR under other RUSTFLAGS: the repo's own target folder would
# have its normal build replaced by profile-guided programs.
if [ "$out" = "$(realpath -m "$root/target")" ]; then
    echo "pgo-build.sh: OUT_DIR $out is the repo's own target folder: give another (default target/pgo)" >&2
    exit 2
fi

sysroot=$(rustc --print sysroot)
host=$(rustc -vV | awk '/^host:/ { print $2 }')
profdata=${LLVM_PROFDATA:-$sysroot/lib/rustlib/$host/bin/llvm-profdata}
if [ ! -x "$profdata" ]; then
    echo "pgo-build.sh: no llvm-profdata at $profdata: run 'rustup component add llvm-tools'," \
        "or set LLVM_PROFDATA to an llvm-profdata of rustc's LLVM ($(rustc -vV | awk '/^LLVM/ { print $3 }'))" >&2
    exit 2
fi

raw=$out/profraw
rm -rf "$raw" "$out/merged.profdata"
mkdir -p "$raw"
build() { # build TARGET_DIR EXTRA_RUSTFLAGS
    (cd "$root" && CARGO_TARGET_DIR=$1 RUSTFLAGS="${RUSTFLAGS:-} $2" \
        cargo build -q --profile release-lto -p rgasnet-bench -p rgasnet-launcher)
}

echo "pgo-build.sh: building instrumented programs in $out/gen"
build "$out/gen" "-Cprofile-generate=$raw"

gen=$out/gen/release-lto
train() { # train PSHM RANKS PROGRAM ARGS...: one training run, bounded
    local pshm=$1 ranks=$2 program=$3
    shift 3
    if ! RGASNET_PSHM=$pshm timeout 300 "$gen/rgasnetrun" -n "$ranks" "$gen/$program" "$@" \
        >/dev/null 2>"$out/train.err"; then
        echo "pgo-build.sh: training run failed (RGASNET_PSHM=$pshm, $ranks ranks): $program $*" >&2
        tail -20 "$out/train.err" >&2
        exit 1
    fi
}
echo "pgo-build.sh: training"
for pshm in 0 1; do
    train "$pshm" 2 testsmall -i 2000
    train "$pshm" 2 testam -i 2000
    train "$pshm" 2 testlarge -i 200 --raw-stream-count 16
    # Many barriers: with 5,000, the profile laid out the 2-rank shared-memory barrier's
    # wait slower than the build without a profile (0.11 against 0.09-0.11 us).
    train "$pshm" 2 testbarrier -i 100000 --no-baseline
    train "$pshm" 4 testbarrier -i 1000 --no-baseline
done
rm -f "$out/train.err"
"$profdata" merge -o "$out/merged.profdata" "$raw"/*.profraw

echo "pgo-build.sh: building with the profile in $out"
build "$out" "-Cprofile-use=$out/merged.profdata"
echo "pgo-build.sh: done: $out/release-lto/ (e.g. PROFILE=release-lto scripts/ab-small.sh target $out)"
