#!/usr/bin/env bash
# Replicas behind HAProxy (docker/haproxy.cfg): the cheap call's throughput
# and chat starts per second through the balancer with 1, 2 and 3 replicas,
# each as a ratio to one replica without it, then the seconds a new replica
# with an empty data directory takes to be ready at BENCH_JOIN_CHUNKS
# chunks (100,000). BENCH_SECONDS sets each run's length. docs/operations.md, "Replicas behind a balancer".
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=benches/lib/wrk.sh
source benches/lib/wrk.sh
cargo build --release -q -p data-plane --bin data-plane --example bench_replicas
"${CARGO_TARGET_DIR:-target}"/release/examples/bench_replicas "${BENCH_SECONDS:-8}"
