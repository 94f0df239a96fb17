#!/usr/bin/env bash
# search_documents and ingestion as the corpus grows: hybrid, vector and
# keyword latency (p50/p95/p99, with and without the query embedding) and
# ingestion throughput (the whole pipeline, the store, the keyword index) at
# 10k and 100k chunks, and 1M with BENCH_SCALE=1m, then how each figure grew
# beside the corpus. Each size is built once into a database of its own
# (dp_bench_scale_<size>, .data/bench/scale-<size>-index) and reused;
# BENCH_SCALE_REBUILD=1 rebuilds. See docs/search.md.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -q -p data-plane-handlers --example bench_scale
"${CARGO_TARGET_DIR:-target}"/release/examples/bench_scale "${DEMO_CORPUS:-.data/corpus/demo}"
