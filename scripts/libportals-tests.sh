#!/usr/bin/env bash
# Builds the Portals 4 test suite test/basic from the reference implementation's release
# tarball against rgasnet's libportals (never against the reference implementation) and runs
# each program under `rgasnetrun -n 2` (the suite's NPROCS), with a time limit.
#
#   scripts/libportals-tests.sh TARBALL DIR [TEST ...]
#
# DIR is scripts/libportals.sh's work directory (it is run first); the programs are built in
# DIR/tests and each one's output is kept in DIR/tests/NAME.log. Without TESTs, the suite's
# whole TESTS list of test/basic/Makefile.am. Prints one line per program (PASS, FAIL with
# its exit status, or TIMEOUT), then "libportals tests: P passed, F failed of N".
# Exit status: with REQUIRE_ALL=1, 1 when a program failed that ALLOW_FAIL (names separated
# by spaces) does not list, else 0. Environment: TIMEOUT (seconds per program, default 60),
# NPROCS (default 2), CC (default cc).
set -euo pipefail
tarball=${1:?usage: $0 TARBALL DIR [TEST ...]}
dir=${2:?usage: $0 TARBALL DIR [TEST ...]}
shift 2
root=$(cd "$(dirname "$0")/.." && pwd)
prefix=$("$root/scripts/libportals.sh" "$tarball" "$dir" | sed -n 's/^PORTALS_PREFIX=//p')
[ -n "$prefix" ] || { echo "libportals-tests: scripts/libportals.sh failed" >&2; exit 1; }
dir=$(cd "$dir" && pwd)
src=$dir/src/test
tests=$dir/tests
mkdir -p "$tests"
cc=${CC:-cc}
# pmi.c includes config.h; nothing in it is needed (PMI_SLURM unset: the plain pmi.h).
: >"$tests/config.h"
cflags=(-O1 -g -std=gnu99 -w -I"$tests" -I"$prefix/include" -I"$src" -I"$src/basic")
libs=(-L"$prefix/lib" -Wl,-rpath,"$prefix/lib" -lportals -lpmi -lpthread -lm -ldl)
"$cc" "${cflags[@]}" -c "$src/pmi.c" -o "$tests/pmi.o"
"$cc" "${cflags[@]}" -c "$src/support.c" -o "$tests/support.o"

# NAME SOURCES CPPFLAGS of each test of Makefile.am (automake's defaults: NAME.c, no flags).
python3 - "$src/basic/Makefile.am" >"$tests/list" <<'PY'
import re, sys
text = open(sys.argv[1]).read().replace("\\\n", " ")
vars = {}
depth = 0
for line in text.splitlines():
    # Lists extended under a configure conditional (if WITH_... / endif) are optional
    # features the default configuration leaves out; so does this run.
    if re.match(r"^if\s", line):
        depth += 1
        continue
    if re.match(r"^endif", line):
        depth -= 1
        continue
    if depth > 0 and "TESTS" in line.split("=")[0]:
        continue
    m = re.match(r"^\s*([A-Za-z0-9_]+)\s*(\+?=)\s*(.*)$", line)
    if m:
        k, op, v = m.groups()
        vars[k] = (vars.get(k, "") + " " + v) if op == "+=" else v
names = vars.get("TESTS", "").split()
for n in names:
    srcs = vars.get(n + "_SOURCES", n + ".c").split()
    flags = [f for f in vars.get(n + "_CPPFLAGS", "").split() if not f.startswith("$(")]
    print(n, ",".join(srcs), " ".join(flags))
PY
if [ $# -gt 0 ]; then
    grep -E "^($(IFS='|'; echo "$*")) " "$tests/list" >"$tests/selected" || true
else
    cp "$tests/list" "$tests/selected"
fi

pass=0 fail=0 total=0 failed=()
while read -r name srcs flags; do
    total=$((total + 1))
    log=$tests/$name.log
    objs=()
    IFS=, read -ra files <<<"$srcs"
    for f in "${files[@]}"; do objs+=("$src/basic/$f"); done
    # shellcheck disable=SC2086
    if ! "$cc" "${cflags[@]}" $flags "${objs[@]}" "$tests/pmi.o" "$tests/support.o" "${libs[@]}" \
        -o "$tests/$name" >"$log" 2>&1; then
        echo "FAIL    $name (does not build; see $log)"
        fail=$((fail + 1)); failed+=("$name")
        continue
    fi
    rc=0
    (cd "$tests" && timeout -k 5 "${TIMEOUT:-60}" "$prefix/bin/rgasnetrun" -n "${NPROCS:-2}" \
        "./$name") >>"$log" 2>&1 || rc=$?
    if [ $rc -eq 0 ]; then
        echo "PASS    $name"
        pass=$((pass + 1))
    elif [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
        echo "TIMEOUT $name (after ${TIMEOUT:-60} s; see $log)"
        fail=$((fail + 1)); failed+=("$name")
    else
        echo "FAIL    $name (exit status $rc; see $log)"
        fail=$((fail + 1)); failed+=("$name")
    fi
done <"$tests/selected"
echo "libportals tests: $pass passed, $fail failed of $total"
status=0
if [ "${REQUIRE_ALL:-0}" = 1 ]; then
    for n in "${failed[@]}"; do
        case " ${ALLOW_FAIL:-} " in
            *" $n "*) echo "libportals tests: $n failed (allowed: ALLOW_FAIL)" ;;
            *) echo "libportals tests: $n failed" >&2; status=1 ;;
        esac
    done
fi
exit $status
