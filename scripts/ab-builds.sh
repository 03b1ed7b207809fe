# Sourced by the A/B scripts (scripts/ab-*.sh) that compare two builds, and by the scripts that
# run a given build's programs: the cargo profile
# whose programs they run, their usage text and the check that both builds hold the programs.
# Not a script to run.

# PROFILE: the profile folder inside each target directory that holds the programs (default
# release; the published figures are of release-lto builds, see benches/README.md).
profile=${PROFILE:-release}

# ab_usage SCRIPT FIRST LAST: the script's header comment (its lines FIRST to LAST), then
# PROFILE's line.
ab_usage() {
    sed -n "$2,$3p" "$1" | sed 's/^# \{0,1\}//'
    echo "PROFILE=NAME runs each target directory's NAME/ programs (default release)."
}

# ab_require SCRIPT_NAME DIR... -- PROGRAM...: exits 2, naming it, when a program is missing
# from a DIR's profile folder.
ab_require() {
    local name=$1 dirs=() dir bin
    shift
    while [ $# -gt 0 ] && [ "$1" != -- ]; do
        dirs+=("$1")
        shift
    done
    shift
    for dir in "${dirs[@]}"; do
        for bin in "$@"; do
            [ -x "$dir/$profile/$bin" ] || {
                echo "$name: $dir/$profile/$bin is missing: build it with cargo build --profile $profile" >&2
                exit 2
            }
        done
    done
}

# require_programs SCRIPT_NAME DIR PROGRAM...: exits 2, naming it, when a program is missing
# from DIR itself (a folder of built programs, e.g. target/pgo/release-lto).
require_programs() {
    local name=$1 dir=$2 program
    shift 2
    for program in "$@"; do
        [ -x "$dir/$program" ] || { echo "$name: $dir/$program is missing" >&2; exit 2; }
    done
}

# ab_order TURN OLD NEW: sets `order` to the two builds' "LABEL DIR" entries in the order turn
# TURN (from 1) runs them: old first in odd turns, new first in even ones, so that neither
# build always runs right after the other.
ab_order() {
    if [ $(($1 % 2)) -eq 0 ]; then
        order=("new $3" "old $2")
    else
        order=("old $2" "new $3")
    fi
}

# ab_median: the median of the numbers on standard input, one per line ("-" if none).
ab_median() {
    sort -g | awk '{ v[NR] = $1 } END { if (NR) print v[int((NR + 1) / 2)]; else print "-" }'
}
