#!/usr/bin/env bash
# Start-up time of an N-rank job (default 16) under each launcher, alternating (every repeat
# runs each launcher once, in rotating order), medians of REPS (default 5): wall time of
# `am_conformance topology` (bootstrap, network and shared-memory set-up, attach, a closing
# handshake of every rank with every other, exit).
#
#   scripts/bench-startup.sh [N] [REPS]
#
# Launchers: rgasnetrun (local spawner), salloc + rgasnetrun --spawner slurm, srun --mpi=pmix,
# srun --mpi=pmi2 and Open MPI's mpirun (the last three with binaries built with the pmix and
# pmi2 features); baselines of the same rotation: `srun -n N /bin/true` and
# `rgasnetrun -n N /bin/true` (the launchers' own cost, no rgasnet in the ranks). Slurm is this machine's private one (scripts/slurm-one-host.sh), stopped at
# the end. Prints one line per run, then a table of medians in milliseconds.
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-16}
reps=${2:-5}

cargo build --release -q -p rgasnet-tests --features pmix,pmi2 -p rgasnet-launcher
bin=$PWD/target/release
prog="$bin/am_conformance topology"

dir=$(mktemp -d)
trap 'scripts/slurm-one-host.sh stop "$dir" >/dev/null 2>&1; rm -rf "$dir"' EXIT
eval "$(scripts/slurm-one-host.sh start "$dir" "$n")"

declare -A cmd=(
    [rgasnetrun]="$bin/rgasnetrun -n $n $prog"
    [slurm-spawner]="salloc -Q -n $n $bin/rgasnetrun --spawner slurm -n $n $prog"
    [srun-pmix]="srun -Q --mpi=pmix -n $n $prog"
    [srun-pmi2]="srun -Q --mpi=pmi2 -n $n $prog"
    [mpirun]="mpirun --allow-run-as-root --oversubscribe -n $n $prog"
    [raw-rgasnetrun]="$bin/rgasnetrun -n $n /bin/true"
    [raw-srun]="srun -Q -n $n /bin/true"
)
order=(rgasnetrun slurm-spawner srun-pmix srun-pmi2 mpirun raw-rgasnetrun raw-srun)
results=$(mktemp)
for rep in $(seq "$reps"); do
    k=${#order[@]}
    for i in $(seq 0 $((k - 1))); do
        name=${order[$(((i + rep) % k))]}
        start=$(date +%s%N)
        if ! timeout 120 ${cmd[$name]} >/dev/null 2>"$dir/err"; then
            echo "$name failed: $(head -3 "$dir/err")" >&2
            exit 1
        fi
        ms=$((($(date +%s%N) - start) / 1000000))
        echo "$rep $name $ms"
        echo "$name $ms" >>"$results"
    done
done
echo
echo "Start-up of a $n-rank job (am_conformance topology), ms, medians of $reps alternating runs"
for name in "${order[@]}"; do
    med=$(awk -v k="$name" '$1 == k { print $2 }' "$results" | sort -n |
        awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }')
    printf '%-14s %8s\n' "$name" "$med"
done
rm -f "$results"
