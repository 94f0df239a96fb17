#!/usr/bin/env bash
# Retrieval quality of search_documents on SciFact's 809 training claims
# (../shared/fixtures/scifact-train): nDCG@10, recall@50 and MRR@10 of
# hybrid (the default fusion, and reciprocal rank fusion as
# `hybrid_rrf`), vector and keyword mode, abstracts ranked by their best passage,
# with the latency of the same calls. The corpus (5,183 abstracts) is
# ingested once into database dp_bench_quality and .data/bench/quality-index
# and reused; BENCH_QUALITY_REBUILD=1 rebuilds it. SCIFACT_DIR points
# elsewhere. BENCH_QUALITY_SETTINGS='{"search_bm25": {"k1": 0.9}}' runs with
# other admin settings; BENCH_QUALITY_CHUNKING=target,max,overlap ingests
# other passage sizes into a database of their own (docs/search.md).
set -euo pipefail
cd "$(dirname "$0")/.."
fixture="${SCIFACT_DIR:-../shared/fixtures/scifact-train}"
if [[ ! -f "$fixture/corpus.jsonl" ]]; then
    echo "quality: the SciFact fixture is not in $fixture (set SCIFACT_DIR); skipped"
    exit 0
fi
cargo build --release -q -p data-plane-handlers --example bench_quality
"${CARGO_TARGET_DIR:-target}"/release/examples/bench_quality "$fixture"
