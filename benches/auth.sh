#!/usr/bin/env bash
# A request authenticated with an OpenID provider's token (RS256, from the
# tests' oidc-provider) against one with the server's own HS256 token, on a
# route that does nothing else: wrk at 1 and 64 connections, each as a
# ratio to HS256 in the same run; then the first request of a token (the
# verification itself). BENCH_SECONDS sets each wrk run's length.
set -euo pipefail
cd "$(dirname "$0")/.."

# shellcheck source=benches/lib/wrk.sh
source benches/lib/wrk.sh
cargo build --release -q -p data-plane --example bench_auth
RUST_LOG=warn "${CARGO_TARGET_DIR:-target}/release/examples/bench_auth" "${BENCH_SECONDS:-5}"
