#!/usr/bin/env bash
# A chat run's server killed with SIGKILL mid-answer, another server process
# over the same database taking the run over: seconds from the kill to the
# run's `resumed` event and to its `done` on the survivor (p50, p99, max over
# repeated kills, with the default 10 s lease). docs/runs.md, "Takeover".
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -q -p data-plane --bin data-plane --example bench_takeover
"${CARGO_TARGET_DIR:-target}"/release/examples/bench_takeover
