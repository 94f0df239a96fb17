#!/usr/bin/env bash
# POST /v1/chat against the real router, a test database and the fake
# OpenAI-compatible model on 127.0.0.1: p50/p95/p99 from the model's first
# text byte reaching the server to the matching text_delta at the client,
# microseconds per streamed chunk through the server against reading the
# model directly, and server-side memory per idle stream (streams per GiB)
# next to a bare axum SSE endpoint, each server in a process of its own.
# BENCH_CHAT_STREAMS sets how many idle streams are opened (default 2000);
# the chat server holds two descriptors per stream (the client's and its
# request to the model), so `ulimit -n` caps it at about half that limit.
# BENCH_CHAT_ONLY=idle measures the idle streams alone.
set -euo pipefail
cd "$(dirname "$0")/.."
# The chat server holds two sockets per idle stream.
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
cargo build --release -q -p data-plane --example bench_chat
"${CARGO_TARGET_DIR:-target}"/release/examples/bench_chat
