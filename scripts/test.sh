#!/usr/bin/env bash
# The project's test command (README "Run the tests"): every test this machine can run.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo test --workspace --release
