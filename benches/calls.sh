#!/usr/bin/env bash
# The cheapest tool call over HTTP (document_info) against a route that
# authenticates the same way and runs `SELECT 1`, and /healthz: the real
# router on 127.0.0.1 over a test database, driven by wrk at 1 and 64
# connections. Prints p50/p99/requests per second and each as a ratio to the
# trivial-query route of the same run; then PostgreSQL's own ceiling for the
# same transaction (pgbench, pipelined into one round trip) and the HTTP
# call's share of it, then that share again from BENCH_PAIRS (3) back-to-back
# pairs of the two and their median. BENCH_SECONDS sets each run's length.
set -euo pipefail
cd "$(dirname "$0")/.."

# shellcheck source=benches/lib/wrk.sh
source benches/lib/wrk.sh
cargo build --release -q -p data-plane --example bench_calls
RUST_LOG=warn "${CARGO_TARGET_DIR:-target}/release/examples/bench_calls" "${BENCH_SECONDS:-8}"
