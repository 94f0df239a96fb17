#!/usr/bin/env bash
# Storage and index scale on a synthetic corpus of 100k chunks: load time, database size, index sizes.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -q -p data-plane --example bench_storage
./target/release/examples/bench_storage "${BENCH_CHUNKS:-100000}"
