#!/usr/bin/env bash
# The project's test command (README "Run the tests"): every test this machine can run.
# Tests that need OpenSSH or Open MPI skip themselves when those are missing; the summary at
# the end lists every skipped test with the reason and the apt-get line that fixes it.
set -euo pipefail
cd "$(dirname "$0")/.."

skip_log=$(mktemp)
trap 'rm -f "$skip_log"' EXIT
export RGASNET_SKIP_LOG="$skip_log"

# The default members: every crate but the bindings of optional libraries (Cargo.toml).
cargo test --release

# The launcher's MPI bootstrap (feature `mpi`) needs Open MPI (mpirun, mpicc) and libclang to
# build rsmpi's bindings.
have_libclang() {
    compgen -G "/usr/lib/llvm-*/lib/libclang*.so*" >/dev/null ||
        compgen -G "/usr/lib/*/libclang*.so*" >/dev/null
}
if command -v mpirun >/dev/null && command -v mpicc >/dev/null && have_libclang; then
    cargo test -p rgasnet-launcher --features mpi --release
else
    echo "SKIPPED: rgasnet-launcher --features mpi (tests/mpi.rs) — Open MPI or libclang missing; fix: apt-get install -y openmpi-bin libopenmpi-dev libclang-dev" >>"$skip_log"
fi

# Cluster launch through PMI (features pmix, pmi2): ranks that srun --mpi=pmix|pmi2 and mpirun
# start without rgasnetrun, against the one-host Slurm of scripts/slurm-one-host.sh.
if pkg-config --exists pmix 2>/dev/null && [ -f /usr/include/slurm/pmi2.h ] && have_libclang; then
    cargo test -p rgasnet-launcher --features pmix,pmi2 --release --lib
    cargo test -p rgasnet-tests --features pmix,pmi2 --release --test slurm --test multihost
else
    echo "SKIPPED: PMIx/PMI-2 bootstrap (tests/tests/slurm.rs with --features pmix,pmi2) — libpmix, Slurm's pmi2.h or libclang missing; fix: apt-get install -y libpmix-dev libpmi2-0-dev libclang-dev pkg-config" >>"$skip_log"
fi

# The Portals library path (feature ref-impl) over Sandia's reference implementation, built
# from its release inside this clone (target/portals4-ref) when the tarball is at hand.
portals_tarball=${PORTALS4_TARBALL:-../shared/vendor/portals4-4e787c13.tar.gz}
if [ -f "$portals_tarball" ]; then
    echo "== Portals 4 reference implementation (scripts/portals4-ref.sh)"
    rc=0
    out=$(scripts/portals4-ref.sh "$portals_tarball" target/portals4-ref) || rc=$?
    if [ "$rc" = 0 ]; then
        portals_dir=${out#PORTALS4_DIR=}
        PORTALS4_DIR=$portals_dir LD_LIBRARY_PATH=$portals_dir/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} \
            cargo test -p rgasnet-portals --features ref-impl --release --test ref_smoke --test ref_ops --test ref_regions --test ref_ni
        # Jobs of 2 and 4 ranks started by rgasnetrun, talking through the library with ids
        # exchanged through rgasnet's bootstrap (tests/src/bin/ref_ring.rs); the AM
        # conformance suite over the `ref` engine (RGASNET_PORTALS=ref); the reproducers of
        # the library's bugs. One job at a time: the library loses messages under load.
        PORTALS4_DIR=$portals_dir LD_LIBRARY_PATH=$portals_dir/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} \
            RGASNET_TEST_PORTALS_LIBRARY=reference \
            cargo test -p rgasnet-tests --features ref-impl --release --test ref_impl \
            --test ref_conduit --test ref_impl_bugs -- --test-threads=1
    elif [ "$rc" = 3 ]; then
        echo "SKIPPED: Portals reference implementation (portals-backend/tests/ref_smoke.rs) — build tools missing; fix: apt-get install -y autoconf automake libtool libev-dev" >>"$skip_log"
    else
        exit "$rc"
    fi
else
    echo "SKIPPED: Portals reference implementation (portals-backend/tests/ref_smoke.rs) — $portals_tarball not found; set PORTALS4_TARBALL to the portals4 release tarball" >>"$skip_log"
fi

# libportals (the Portals 4 C API over the native engine) and libpmi: the reference
# implementation's test/basic suite built against them and run under rgasnetrun, plus the
# library's own C tests, when the Portals release tarball is at hand (its header is the ABI).
if [ -f "$portals_tarball" ] && have_libclang; then
    echo "== libportals: test/basic and the C tests (scripts/libportals-tests.sh)"
    PORTALS4_INCLUDE=$PWD/target/libportals/src/include scripts/libportals.sh "$portals_tarball" target/libportals >/dev/null
    PORTALS4_INCLUDE=$PWD/target/libportals/src/include cargo test -p rgasnet-libportals --release
    REQUIRE_ALL=1 scripts/libportals-tests.sh "$portals_tarball" target/libportals
    scripts/libportals-c-tests.sh target/libportals/install
    # rgasnet-portals' Portals-library path over rgasnet's own libportals: the same put/get
    # test as over the reference implementation (a cross-check of both).
    CARGO_TARGET_DIR=$PWD/target/ref-over-libportals PORTALS4_DIR=$PWD/target/libportals/install \
        LD_LIBRARY_PATH=$PWD/target/libportals/install/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} \
        cargo test -p rgasnet-portals --features ref-impl --release --test ref_ops --test ref_regions --test ref_ni
    CARGO_TARGET_DIR=$PWD/target/ref-over-libportals PORTALS4_DIR=$PWD/target/libportals/install \
        LD_LIBRARY_PATH=$PWD/target/libportals/install/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} \
        RGASNET_TEST_PORTALS_LIBRARY=rgasnet \
        cargo test -p rgasnet-tests --features ref-impl --release --test ref_impl \
        --test ref_conduit --test ref_impl_bugs -- --test-threads=1
    # `rgasnet-bench compare --paths native,ref` over it (the README's native/ref figures).
    CARGO_TARGET_DIR=$PWD/target/ref-over-libportals PORTALS4_DIR=$PWD/target/libportals/install \
        LD_LIBRARY_PATH=$PWD/target/libportals/install/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} \
        cargo test -p rgasnet-bench --features ref-impl --release --test ref_compare
elif [ -f "$portals_tarball" ]; then
    echo "SKIPPED: libportals test/basic (scripts/libportals-tests.sh) — libclang missing; fix: apt-get install -y libclang-dev" >>"$skip_log"
else
    echo "SKIPPED: libportals test/basic (scripts/libportals-tests.sh) — $portals_tarball not found; set PORTALS4_TARBALL to the portals4 release tarball" >>"$skip_log"
fi

# GASNet-EX's own tests on the rgasnet conduit, when the GASNet-EX release is at hand (CI has
# it in ../shared/vendor). Built inside this clone, in target/gasnet-ex, once per run.
gasnet_tarball=${GASNET_TARBALL:-../shared/vendor/GASNet-2025.8.0.tar.gz}
if [ -f "$gasnet_tarball" ] && command -v autoconf >/dev/null && command -v automake >/dev/null; then
    echo "== GASNet-EX with the rgasnet conduit (scripts/gasnet-ex.sh, scripts/gasnet-ex-tests.sh)"
    scripts/gasnet-ex.sh "$gasnet_tarball" target/gasnet-ex
    scripts/gasnet-ex-tests.sh target/gasnet-ex
elif [ -f "$gasnet_tarball" ]; then
    echo "SKIPPED: GASNet-EX tests on the rgasnet conduit — autoconf or automake missing; fix: apt-get install -y autoconf automake" >>"$skip_log"
else
    echo "SKIPPED: GASNet-EX tests on the rgasnet conduit — $gasnet_tarball not found; set GASNET_TARBALL to a GASNet-EX 2025.8.0 release" >>"$skip_log"
fi

echo "== skipped tests"
if [ -s "$skip_log" ]; then
    sort -u "$skip_log"
else
    echo "none: every test ran"
fi
