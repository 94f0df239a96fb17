#!/usr/bin/env bash
# Readable extraction against the readability fixtures (20 real pages):
# token precision/recall/F1 of the text and metadata agreement per field.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -q -p data-plane-extract --example bench_readability
"${CARGO_TARGET_DIR:-target}/release/examples/bench_readability" "${READABILITY_FIXTURES:-../shared/fixtures/readability}"
