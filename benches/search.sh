#!/usr/bin/env bash
# search_documents on a 100k-chunk corpus (the demo corpus's manual with real
# embeddings, filled up with chunks stitched from it): p50/p95/p99 latency of
# hybrid, vector and keyword mode with the embedding's share apart, the same
# hybrid search as one SQL statement (pgvector + ts_rank, RRF in SQL) and the
# ratio, and recall@10 of vector search under filters that keep 1% of the
# chunks. The corpus is built once (database dp_bench_search and
# .data/bench/search-index) and reused; BENCH_SEARCH_REBUILD=1 rebuilds it.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -q -p data-plane-handlers --example bench_search
"${CARGO_TARGET_DIR:-target}"/release/examples/bench_search "${DEMO_CORPUS:-.data/corpus/demo}"
