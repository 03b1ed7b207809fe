#!/usr/bin/env bash
# Builds rgasnet's libportals (the Portals 4 C API over the native engine) and libpmi (PMI-1
# over rgasnet's bootstrap), and stages them with their headers for C programs:
#
#   scripts/libportals.sh TARBALL DIR
#
# TARBALL  the Portals 4 reference implementation's release tarball: only its standard header
#          include/portals4.h is used (the types of the ABI); nothing of the reference
#          implementation is built or linked
# DIR      work directory; afterwards it holds
#            DIR/src                      the unpacked tarball
#            DIR/install/include          portals4.h, pmi.h (and portals4/pmi.h)
#            DIR/install/lib              libportals.so(.4), libportals.a, libpmi.so, libpmi.a
#            DIR/install/bin/rgasnetrun   the launcher
# and prints PORTALS_PREFIX=DIR/install. Compile with -IDIR/install/include, link with
# -LDIR/install/lib -lportals -lpmi, run with rgasnetrun -n N ./prog (LD_LIBRARY_PATH, or
# link with -Wl,-rpath).
#
# Environment: CARGO_TARGET_DIR (default <repo>/target), PROFILE (a cargo profile: release-lto,
# release or debug; default release-lto, the profile with link-time optimisation across the
# crates that Cargo.toml defines for the C libraries).
set -euo pipefail
tarball=${1:?usage: $0 TARBALL DIR}
dir=${2:?usage: $0 TARBALL DIR}
[ -f "$tarball" ] || { echo "libportals: $tarball not found" >&2; exit 3; }
root=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
profile=${PROFILE:-release-lto}
target=${CARGO_TARGET_DIR:-$root/target}
if [ ! -f "$dir/src/include/portals4.h" ] || [ "$tarball" -nt "$dir/src/include/portals4.h" ]; then
    rm -rf "$dir/src"
    mkdir -p "$dir/src"
    tar xzf "$tarball" -C "$dir/src" --strip-components=1
    touch "$dir/src/include/portals4.h"
fi
# Cargo's name for the profile whose output goes to target/debug is "dev".
flag=(--profile "$profile")
[ "$profile" = debug ] && flag=(--profile dev)
(cd "$root" && PORTALS4_INCLUDE="$dir/src/include" cargo build -q "${flag[@]}" \
    -p rgasnet-libportals -p rgasnet-libpmi -p rgasnet-launcher) ||
    { echo "libportals: cargo build failed" >&2; exit 1; }
out=$target/$profile
inst=$dir/install
rm -rf "$inst"
mkdir -p "$inst/include/portals4" "$inst/lib" "$inst/bin"
cp "$dir/src/include/portals4.h" "$inst/include/"
cp "$root/launcher/libpmi/include/pmi.h" "$inst/include/"
cp "$root/launcher/libpmi/include/pmi.h" "$inst/include/portals4/pmi.h"
cp "$out/libportals.so" "$inst/lib/libportals.so.4"
ln -s libportals.so.4 "$inst/lib/libportals.so"
cp "$out/libportals.a" "$out/libpmi.so" "$out/libpmi.a" "$inst/lib/"
cp "$out/rgasnetrun" "$inst/bin/"
echo "PORTALS_PREFIX=$inst"
