#!/usr/bin/env bash
# Text tool-call parser throughput (MB/s) on a long reply with calls, whole
# and in 16-byte deltas, against the parser as it was before the Mistral,
# Llama, Python and schema-typed forms.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -q -p data-plane-agent --example bench_textcalls
"${CARGO_TARGET_DIR:-target}/release/examples/bench_textcalls" "${BENCH_TEXTCALLS_MB:-8}" "${BENCH_TEXTCALLS_ROUNDS:-5}"
