#!/usr/bin/env bash
# The README's main job: builds rgasnet and runs a 2-rank rgasnet job (an active-message demo),
# then a short AM benchmark (testam) next to the raw UDP baseline of this machine.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -q
bin=target/release
echo "== rgasnet-demo: 2 ranks exchanging Medium, Short and Long active messages"
"$bin/rgasnetrun" -n 2 -- "$bin/rgasnet-demo"
if [ -x "$bin/testam" ]; then
    echo
    echo "== testam (short run): AM round trips next to the raw UDP round trip"
    "$bin/rgasnetrun" -n 2 -- "$bin/testam" -i 300 --max-size 65536 --byte-budget 4M
fi
