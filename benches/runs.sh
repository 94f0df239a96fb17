#!/usr/bin/env bash
# Chat runs against the real router, a test database and the fake
# OpenAI-compatible model on 127.0.0.1: microseconds per streamed event
# through a run (numbered, kept, recorded in PostgreSQL) against the stream
# as it was before runs (nothing recorded), their ratio, how long after the
# last text the client reads `done` both ways (a run's last event waits for
# the table), and replay throughput of a finished run over HTTP and from
# the table.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -q -p data-plane --example bench_runs
"${CARGO_TARGET_DIR:-target}"/release/examples/bench_runs
