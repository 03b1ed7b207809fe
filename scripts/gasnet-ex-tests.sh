#!/usr/bin/env bash
# Runs GASNet-EX's own tests on the rgasnet conduit of a GASNet-EX tree that
# scripts/gasnet-ex.sh built, by GASNet's own criteria (exit status 0, no "ERROR" or
# "fatal signal" line), in both thread models, on 2 and 4 ranks, in three layouts:
#   pshm  shared memory on (GASNet's PSHM serves same-host ranks, rgasnet the rest)
#   net   shared memory off (GASNET_SUPERNODE_MAXSIZE=1: every pair over rgasnet)
#   sn2   2 supernodes of 2 (4 ranks, GASNET_SUPERNODE_MAXSIZE=2)
# plus testexit's exit-code cases (1-13; 51-55 in PAR), testthreads in PAR, and a hello
# world built against the installed conduit as a user builds one, and the errors of bad AM
# calls (tests/gasnet/).
#
#   scripts/gasnet-ex-tests.sh DIR
#
# Ends with "N passed, N failed" and exits non-zero when anything failed; the output of
# every failure is printed.
set -uo pipefail
if [ $# -ne 1 ]; then
    sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'
    exit 2
fi
dir=$(cd "$1" && pwd)
root=$(cd "$(dirname "$0")/.." && pwd)
conduit=$dir/build/rgasnet-conduit
[ -d "$conduit" ] || { echo "gasnet-ex-tests.sh: $conduit missing: run scripts/gasnet-ex.sh first" >&2; exit 2; }
run=$conduit/contrib/gasnetrun_rgasnet
work=$dir/tests
mkdir -p "$work/seq" "$work/par"
logs=$work/logs
rm -rf "$logs"
mkdir -p "$logs"

list="testhello testam testsmall testlarge testbarrier testgasnet testcore1 testcore2 testcore3 testcore4 testval testsegment testexit"
# Arguments that keep each run to seconds on this machine (iterations; sizes as default).
args_of() {
    case $1 in
        testam | testsmall | testval | testcore1 | testcore2) echo 100 ;;
        testlarge) echo 10 ;;
        testbarrier) echo 200 ;;
        testthreads) echo "-i 50 4" ;;
        *) echo "" ;;
    esac
}

passed=0
failed=0
failures=()
pass() { passed=$((passed + 1)); echo "PASS $*"; }
fail() {
    failed=$((failed + 1))
    failures+=("$1")
    echo "FAIL $1"
    [ -n "${2:-}" ] && tail -n 30 "$2" | sed 's/^/    /'
}

build() {
    local mode=$1 t target
    shift
    for t in "$@"; do
        target=$t
        [ "$mode" = par ] && target=$t-par
        if make -C "$conduit" "$target" >"$logs/build-$mode-$t.log" 2>&1 && [ -x "$conduit/$t" ]; then
            cp "$conduit/$t" "$work/$mode/$t"
        else
            fail "build $mode $t" "$logs/build-$mode-$t.log"
        fi
    done
}

# check NAME LOG RC: GASNet's pass criteria.
check() {
    local name=$1 log=$2 rc=$3
    if [ "$rc" -ne 0 ]; then
        fail "$name (exit status $rc)" "$log"
    elif grep -v -e "Retrying allocation" -e "GASNET_FREEZE_ON_ERROR" "$log" | grep -q -e "ERROR" -e "fatal signal"; then
        fail "$name (ERROR line)" "$log"
    else
        pass "$name"
    fi
}

layout_env() {
    case $1 in
        pshm) echo "GASNET_SUPERNODE_MAXSIZE=0" ;;
        net) echo "GASNET_SUPERNODE_MAXSIZE=1" ;;
        sn2) echo "GASNET_SUPERNODE_MAXSIZE=2" ;;
    esac
}

echo "== building the tests (SEQ and PAR)"
build seq $list
build par $list testthreads

for mode in seq par; do
    for n in 2 4; do
        for layout in pshm net sn2; do
            [ "$layout" = sn2 ] && [ "$n" -ne 4 ] && continue
            env=$(layout_env $layout)
            for t in $list; do
                [ "$t" = testexit ] && continue
                [ -x "$work/$mode/$t" ] || continue
                name="$mode n=$n $layout $t"
                log="$logs/$mode-$n-$layout-$t.log"
                (cd "$work/$mode" && env $env timeout 300 "$run" -n "$n" "./$t" $(args_of "$t")) >"$log" 2>&1
                check "$name" "$log" $?
            done
            # testexit: every case must end the whole job with its own number as exit code.
            cases=$(seq 1 13)
            [ "$mode" = par ] && cases="$cases $(seq 51 55)"
            for c in $cases; do
                [ -x "$work/$mode/testexit" ] || continue
                log="$logs/$mode-$n-$layout-testexit-$c.log"
                (cd "$work/$mode" && env $env timeout 60 "$run" -n "$n" ./testexit "$c") >"$log" 2>&1
                rc=$?
                if [ "$rc" -eq "$c" ]; then
                    pass "$mode n=$n $layout testexit $c"
                else
                    fail "$mode n=$n $layout testexit $c (exit status $rc, expected $c)" "$log"
                fi
            done
            if [ "$mode" = par ] && [ -x "$work/par/testthreads" ]; then
                log="$logs/par-$n-$layout-testthreads.log"
                (cd "$work/par" && env $env timeout 300 "$run" -n "$n" ./testthreads $(args_of testthreads)) >"$log" 2>&1
                check "par n=$n $layout testthreads" "$log" $?
            fi
        done
    done
done

echo "== a user's hello world against the installed conduit"
log=$logs/hello.log
if make -s -f "$root/tests/gasnet/Makefile" GASNET="$dir/install" PROG=hello OUT="$work/hello" >"$log" 2>&1; then
    (cd "$work" && timeout 60 "$dir/install/bin/gasnetrun_rgasnet" -n 4 ./hello) >>"$log" 2>&1
    rc=$?
    if [ "$rc" -eq 0 ] && [ "$(grep -c '^hello from rank' "$log")" -eq 4 ] && grep -q "every rank answered" "$log"; then
        pass "hello world (gasnetrun_rgasnet -n 4)"
    else
        fail "hello world (exit status $rc)" "$log"
    fi
else
    fail "hello world: build with rgasnet-seq.mak" "$log"
fi

echo "== bad AM calls return GASNet's errors (tests/gasnet/errors.c)"
log=$logs/errors-build.log
if make -s -f "$root/tests/gasnet/Makefile" GASNET="$dir/install" PROG=errors OUT="$work/errors" >"$log" 2>&1; then
    for layout in pshm net; do
        log=$logs/errors-$layout.log
        (cd "$work" && env $(layout_env $layout) timeout 60 "$dir/install/bin/gasnetrun_rgasnet" -n 2 ./errors) >"$log" 2>&1
        rc=$?
        if [ "$rc" -eq 0 ] && [ "$(grep -c '(ok)' "$log")" -eq 12 ] && [ "$(grep -c ': done' "$log")" -eq 2 ] &&
            ! grep -q -e ERROR -e "fatal signal" "$log"; then
            pass "errors $layout"
        else
            fail "errors $layout (exit status $rc)" "$log"
        fi
    done
else
    fail "errors: build with rgasnet-seq.mak" "$log"
fi

echo "== GASNet-EX on rgasnet: $passed passed, $failed failed"
for f in "${failures[@]}"; do echo "  failed: $f"; done
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
