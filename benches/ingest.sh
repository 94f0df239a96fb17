#!/usr/bin/env bash
# Ingestion of the demo corpus (or DEMO_CORPUS): end-to-end chunks/s against
# the same chunks embedded alone, their ratio, and the CPU that two
# replicas following the ingest spend on their keyword indexes (changes
# batched, the default) as a share of the ingest's own.
# BENCH_INGEST_UNBATCHED=1 makes the second replica commit change by change.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -q -p data-plane --bin data-plane --example bench_ingest
"${CARGO_TARGET_DIR:-target}/release/examples/bench_ingest" "${DEMO_CORPUS:-.data/corpus/demo}"
