#!/usr/bin/env bash
# rgasnet's own C tests of libportals (portals-backend/capi/tests/c): built as C11 with
# -Wall -Wextra -Werror against the staged library and header, run under rgasnetrun, then
# built and run again under AddressSanitizer.
#
#   scripts/libportals-c-tests.sh PREFIX [OUT]
#
# PREFIX is what scripts/libportals.sh staged (DIR/install); OUT (default PREFIX/../ctests)
# holds the programs and their logs. Exit status 0 when every test passed.
set -euo pipefail
prefix=$(cd "${1:?usage: $0 PREFIX [OUT]}" && pwd)
out=${2:-$prefix/../ctests}
root=$(cd "$(dirname "$0")/.." && pwd)
src=$root/portals-backend/capi/tests/c
mkdir -p "$out"
out=$(cd "$out" && pwd)
cc=${CC:-cc}
run=$prefix/bin/rgasnetrun
status=0

# check NAME NPROCS [ENV...]: runs one built program; extra checks by name.
check() {
    local bin=$1 n=$2 name log rc=0
    shift 2
    name=$(basename "$bin")
    log=$out/$name.log
    local args=()
    case $name in ptl_pingpong*) args=(200 65536) ;; esac
    env "$@" timeout -k 5 60 "$run" -n "$n" "$bin" "${args[@]}" >"$log" 2>&1 || rc=$?
    if [ $rc -ne 0 ]; then
        echo "FAIL    $name (exit status $rc; see $log)"
        status=1
        return
    fi
    case $name in
        ptl_pingpong*)
            if [ "$(grep -c '(put pingpong rtt)' "$log")" != 5 ] ||
                [ "$(grep -c '(put+ack rtt)' "$log")" != 5 ] || ! grep -q '^raw: udp' "$log"; then
                echo "FAIL    $name (missing figures; see $log)"
                status=1
                return
            fi
            # With the hop shim preloaded (scripts/libportals-hops.sh), rank 1's split too.
            if [[ " $* " == *" LD_PRELOAD="* ]] &&
                ! grep -Eq '^hops: rank 1, .* 220 \(220\) hops$' "$log"; then
                echo "FAIL    $name (no hops line with the hop shim; see $log)"
                status=1
                return
            fi ;;
        peer_death*)
            # The leaver's port is free again: nothing of it outlived the job.
            port=$(sed -n 's/.*rank 1 port \([0-9]*\) .*/\1/p' "$log")
            if [ -z "$port" ] || ss -Huln "sport = :$port" | grep -q .; then
                echo "FAIL    $name (rank 1's UDP port ${port:-?} is still bound; see $log)"
                status=1
                return
            fi ;;
    esac
    echo "PASS    $name"
}

for flavour in plain asan; do
    flags=(-std=c11 -Wall -Wextra -Werror -O1 -g -I"$prefix/include")
    suffix=
    if [ $flavour = asan ]; then
        flags+=(-fsanitize=address -fno-omit-frame-pointer)
        suffix=-asan
    fi
    for t in events bad_args peer_death; do
        "$cc" "${flags[@]}" "$src/$t.c" -L"$prefix/lib" -Wl,-rpath,"$prefix/lib" \
            -lportals -lpmi -o "$out/$t$suffix"
    done
    # The ping-pong benchmark builds warning-free too, and runs (briefly).
    "$cc" "${flags[@]}" "$root/benches/c/ptl_pingpong.c" -L"$prefix/lib" -Wl,-rpath,"$prefix/lib" \
        -lportals -lpmi -o "$out/ptl_pingpong$suffix"
    # The datagram-size tool (raw UDP, no library) builds warning-free and runs, briefly.
    "$cc" "${flags[@]}" "$root/benches/c/udp_size_rtt.c" -o "$out/udp_size_rtt$suffix"
    if timeout -k 5 60 "$out/udp_size_rtt$suffix" 200 1 8 146 >"$out/udp_size_rtt$suffix.log" 2>&1 &&
        [ "$(grep -c ' bytes  ' "$out/udp_size_rtt$suffix.log")" = 2 ]; then
        echo "PASS    udp_size_rtt$suffix"
    else
        echo "FAIL    udp_size_rtt$suffix (see $out/udp_size_rtt$suffix.log)"
        status=1
    fi
    shm_before=$(ls /dev/shm | wc -l)
    check "$out/events$suffix" 2
    check "$out/bad_args$suffix" 1
    check "$out/peer_death$suffix" 2 RGASNET_PEER_TIMEOUT=2
    check "$out/ptl_pingpong$suffix" 2
    if [ $flavour = plain ]; then
        # The per-hop tool: its shim builds warning-free and the benchmark reports through it.
        "$cc" "${flags[@]}" -shared -fPIC "$root/benches/c/hop_shim.c" -o "$out/libhop_shim.so" -ldl
        cp "$out/ptl_pingpong" "$out/ptl_pingpong-hops"
        check "$out/ptl_pingpong-hops" 2 LD_PRELOAD="$out/libhop_shim.so"
        # The turnaround tool (scripts/turnaround.sh): its shim builds warning-free and
        # reports both sides of the raw ping-pong, each of whose 220 round trips it timed.
        "$cc" "${flags[@]}" -shared -fPIC "$root/benches/c/turnaround_shim.c" \
            -o "$out/libturnaround_shim.so" -ldl
        # The end of the shim's report line: its send, idle-round and empty-receive figures.
        report='; send p50 [0-9]+\.[0-9]{3} us; idle round p50 [0-9]+\.[0-9]{3} p90 [0-9]+\.[0-9]{3} us; empty receive p50 [0-9]+\.[0-9]{3} us$'
        if LD_PRELOAD="$out/libturnaround_shim.so" timeout -k 5 60 "$out/udp_size_rtt" 200 1 8 \
            >"$out/turnaround.log" 2>&1 &&
            [ "$(grep -Ec "^turnaround: pid [0-9]+ rank - samples 2(19|20) .*$report" "$out/turnaround.log")" = 2 ]; then
            echo "PASS    turnaround_shim"
        else
            echo "FAIL    turnaround_shim (see $out/turnaround.log)"
            status=1
        fi
        # ... and both ranks of rgasnet's own ping-pong, whose engine sends and receives
        # through syscall() rather than the C library's wrappers (the tests' build left the
        # programs in target/release).
        bin=$root/target/release
        if [ -x "$bin/rgasnetrun" ] && [ -x "$bin/testsmall" ]; then
            if RGASNET_PSHM=0 LD_PRELOAD="$out/libturnaround_shim.so" timeout -k 5 120 \
                "$bin/rgasnetrun" -n 2 "$bin/testsmall" -i 200 --min-size 8 --max-size 8 \
                --sections A --no-baseline >"$out/turnaround-rgasnet.log" 2>&1 &&
                grep -Eq "^turnaround: pid [0-9]+ rank 0 samples [0-9]+ .*$report" "$out/turnaround-rgasnet.log" &&
                grep -Eq "^turnaround: pid [0-9]+ rank 1 samples [0-9]+ .*$report" "$out/turnaround-rgasnet.log"; then
                echo "PASS    turnaround_shim on rgasnet"
            else
                echo "FAIL    turnaround_shim on rgasnet (see $out/turnaround-rgasnet.log)"
                status=1
            fi
        else
            echo "SKIPPED: turnaround_shim on rgasnet (scripts/libportals-c-tests.sh) — $bin holds no rgasnetrun or testsmall; fix: cargo build --release -p rgasnet-bench -p rgasnet-launcher" |
                tee -a "${RGASNET_SKIP_LOG:-/dev/null}"
        fi
    fi
    if [ "$(ls /dev/shm | wc -l)" -gt "$shm_before" ]; then
        echo "FAIL    /dev/shm holds more objects after the $flavour tests than before"
        status=1
    fi
done
exit $status
