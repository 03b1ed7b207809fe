#!/usr/bin/env bash
# Builds Sandia's Portals 4 reference implementation from its release tarball into DIR
# (sources in DIR/src, installed in DIR/install: the PORTALS4_DIR of `--features ref-impl`),
# with its reliable UDP transport, as ../shared/vendor/README.md says it builds here.
# Re-runnable: an installation newer than the tarball is kept.
#
#   scripts/portals4-ref.sh TARBALL DIR     prints PORTALS4_DIR=DIR/install
#
# Needs autoconf, automake, libtool and libev (apt-get install -y autoconf automake libtool
# libev-dev); missing ones: one line naming them, exit status 3.
set -euo pipefail
tarball=${1:?usage: $0 TARBALL DIR}
dir=${2:?usage: $0 TARBALL DIR}
[ -f "$tarball" ] || { echo "portals4-ref: $tarball not found" >&2; exit 3; }
missing=()
for p in autoconf automake libtoolize make cc; do command -v "$p" >/dev/null || missing+=("$p"); done
[ -f /usr/include/ev.h ] || missing+=("libev (ev.h)")
if [ ${#missing[@]} -gt 0 ]; then
    echo "portals4-ref: missing ${missing[*]}: apt-get install -y autoconf automake libtool libev-dev" >&2
    exit 3
fi
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
lib="$dir/install/lib/libportals.so"
if [ -e "$lib" ] && [ "$lib" -nt "$tarball" ]; then
    echo "PORTALS4_DIR=$dir/install"
    exit 0
fi
rm -rf "$dir/src" "$dir/install"
mkdir -p "$dir/src"
tar xzf "$tarball" -C "$dir/src" --strip-components=1
log="$dir/build.log"
(
    cd "$dir/src"
    ./autogen.sh
    CFLAGS="-O2 -fcommon" ./configure --prefix="$dir/install" --enable-transport-udp \
        --enable-reliable-udp --enable-zero-mrs --disable-transport-ib --enable-testing
    make -j"$(nproc)"
    make install
) >"$log" 2>&1 || { tail -20 "$log" >&2; echo "portals4-ref: build failed; see $log" >&2; exit 1; }
echo "PORTALS4_DIR=$dir/install"
