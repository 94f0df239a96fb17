#!/usr/bin/env bash
# Ingestion throughput on the demo corpus (documents/s, chunks/s, embedding time separately).
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -q -p data-plane --example bench_ingest
./target/release/examples/bench_ingest "${DEMO_CORPUS:-.data/corpus/demo}"
