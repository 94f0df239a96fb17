#!/usr/bin/env bash
# grep_documents latency on a few thousand documents (the demo corpus'
# PostgreSQL manual, replicated), with and without the trigram prefilter index.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -q -p data-plane-handlers --example bench_grep
"${CARGO_TARGET_DIR:-target}/release/examples/bench_grep" "${BENCH_GREP_DOCUMENTS:-3000}" "${DEMO_CORPUS:-.data/corpus/demo}"
