#!/usr/bin/env bash
# The many-core barrier rows of issue 26 (2-32 ranks on a 16-core host), as one prepared run for
# a lent machine that has no toolchain and no network: stage stripped binaries here, carry the
# folder there, run the measurements there.
#
#   scripts/device-barriers.sh stage GASNET_BUILD_DIR [DIR]   here: DIR (default .dev) gets
#       bin/{rgasnetrun,testbarrier,barrier_floor} from target/$PROFILE (default release) and
#       gx/{smp,udp}-conduit/testbarrier from GASNET_BUILD_DIR (a configured GASNet-EX build tree
#       whose smp and udp conduits are enabled; the tests are built there if missing), stripped,
#       and lib/ with the C++ runtime that udp-conduit's test needs, for a machine without it.
#   scripts/device-barriers.sh run [DIR] [LOG_DIR]            there: scripts/barrier-ranks.sh on
#       the carried binaries, one phase after another, each log also written to LOG_DIR (default
#       $OUT, else DIR/logs), every phase skipped once BUDGET_S seconds (default 480) are spent.
#
# Phases (ROUNDS alternating rounds each, default 7; barriers per run as barrier-ranks.sh says):
#   shm      2 4 8 16 ranks, rgasnet / smp-conduit / counter floor (not oversubscribed)
#   net      2 4 8 16 ranks, rgasnet / udp-conduit (network path, loopback)
#   shm-32   32 ranks on 16 cores (oversubscribed)
#   counter  8 16 ranks with RGASNET_PSHM_BARRIER=counter (which kind `auto` should pick)
#   radix2   shm 2 4 8 16 ranks with a side "alt" at RGASNET_PSHM_BARRIER_RADIX=2
#   radix8   shm 8 16 ranks with a side "alt" at RGASNET_PSHM_BARRIER_RADIX=8
# PHASES picks and orders them (default "shm net shm-32 counter").
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
mode=${1:-}

if [ "$mode" = stage ]; then
    [ $# -ge 2 ] || { sed -n '2,22p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
    gasnet=$(cd "$2" && pwd)
    dir=${3:-$root/.dev}
    bin=$root/target/${PROFILE:-release}
    mkdir -p "$dir/bin" "$dir/gx/smp-conduit" "$dir/gx/udp-conduit" "$dir/lib"
    for f in rgasnetrun testbarrier examples/barrier_floor; do
        [ -x "$bin/$f" ] || { echo "device-barriers.sh: $bin/$f missing: cargo build --release -p rgasnet-bench -p rgasnet-launcher, and --example barrier_floor" >&2; exit 2; }
        strip -o "$dir/bin/$(basename "$f")" "$bin/$f"
    done
    for c in smp udp; do
        [ -x "$gasnet/$c-conduit/testbarrier" ] || make -s -C "$gasnet/$c-conduit" testbarrier >/dev/null
        strip -o "$dir/gx/$c-conduit/testbarrier" "$gasnet/$c-conduit/testbarrier"
    done
    # The C++ runtime of udp-conduit's test (its AMUDP layer is C++); used there only when the
    # machine lacks one.
    for l in $(ldd "$dir/gx/udp-conduit/testbarrier" | awk '/libstdc\+\+|libgcc_s/ { print $3 }'); do
        cp -L "$l" "$dir/lib/"
    done
    du -sh "$dir"
    exit 0
fi

[ "$mode" = run ] || { sed -n '2,22p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
dir=$(cd "${2:-$root/.dev}" && pwd)
logs=${3:-${OUT:-$dir/logs}}
mkdir -p "$logs"
budget=${BUDGET_S:-480}
rounds=${ROUNDS:-7}
start=$SECONDS

{
    echo "== machine"
    uname -srm
    nproc
    grep -m1 'model name' /proc/cpuinfo || true
    lscpu 2>/dev/null | grep -E '^(Thread|Core|Socket|NUMA node\(s\))' || true
    grep -E '^(MemTotal|MemAvailable)' /proc/meminfo || true
    # Both PSHM implementations map their segments from /dev/shm.
    if ! mountpoint -q /dev/shm 2>/dev/null; then
        echo "/dev/shm is not a mount: mounting a tmpfs there"
        mkdir -p /dev/shm && mount -t tmpfs -o size=8g tmpfs /dev/shm || true
    fi
    df -h /dev/shm || true
    if ldd "$dir/gx/udp-conduit/testbarrier" | grep -q 'not found'; then
        echo "using the carried C++ runtime ($dir/lib)"
        export LD_LIBRARY_PATH=$dir/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
    fi
    ldd "$dir/bin/rgasnetrun" "$dir/gx/udp-conduit/testbarrier" | grep -E 'not found|=>' || true
} 2>&1 | tee "$logs/machine.log"
if ldd "$dir/gx/udp-conduit/testbarrier" | grep -q 'not found'; then
    export LD_LIBRARY_PATH=$dir/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
fi

export BIN_DIR=$dir/bin
phase() {
    local name=$1 left
    shift
    left=$((budget - (SECONDS - start)))
    if [ "$left" -lt 20 ]; then
        echo "== $name: skipped, $((SECONDS - start)) of $budget s spent" | tee "$logs/$name.log"
        return 0
    fi
    echo "== $name ($left s left): $*" | tee "$logs/$name.log"
    # `timeout` keeps one slow phase from eating the rest; what it printed stays in the log.
    timeout "$left" env "$@" 2>&1 | tee -a "$logs/$name.log" || echo "== $name: exit $?" | tee -a "$logs/$name.log"
}
for p in ${PHASES:-shm net shm-32 counter}; do
    case $p in
    shm) phase shm PATHS=shm "$here/barrier-ranks.sh" "$dir/gx" "$rounds" 2 4 8 16 ;;
    net) phase net PATHS=net NET_ITERS=${NET_ITERS:-20000} UDP_ITERS=${UDP_ITERS:-2000} "$here/barrier-ranks.sh" "$dir/gx" "$rounds" 2 4 8 16 ;;
    shm-32) phase shm-32 PATHS=shm "$here/barrier-ranks.sh" "$dir/gx" 5 32 ;;
    counter) phase counter PATHS=shm RGASNET_PSHM_BARRIER=counter "$here/barrier-ranks.sh" "$dir/gx" 5 8 16 ;;
    radix2) phase radix2 PATHS=shm ALT_ENV=RGASNET_PSHM_BARRIER_RADIX=2 "$here/barrier-ranks.sh" "$dir/gx" "$rounds" 2 4 8 16 ;;
    radix8) phase radix8 PATHS=shm ALT_ENV=RGASNET_PSHM_BARRIER_RADIX=8 "$here/barrier-ranks.sh" "$dir/gx" 5 8 16 ;;
    *) echo "device-barriers.sh: unknown phase $p" >&2 ;;
    esac
done
echo "== done in $((SECONDS - start)) s"
