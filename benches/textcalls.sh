#!/usr/bin/env bash
# Text tool-call parser throughput (MB/s) on a long reply with calls, whole
# and in 16-byte deltas, against the parser as it was before the Mistral,
# Llama, Python and schema-typed forms. That parser is not in the tree: it
# is taken from the commit that last held it (BENCH_TEXTCALLS_BASELINE) for
# the run and removed after.
set -euo pipefail
cd "$(dirname "$0")/.."
baseline=${BENCH_TEXTCALLS_BASELINE:-14429cb70ed4e1a4c44c3a6bb8ac1df788f56284}
dir=crates/agent/examples/bench_textcalls
if ! git cat-file -e "$baseline:$dir/old.rs" 2>/dev/null; then
    echo "textcalls: commit $baseline (the old parser) is not in this clone's history; fetch it or set BENCH_TEXTCALLS_BASELINE" >&2
    exit 1
fi
cleanup() { rm -rf "$dir/old.rs" "$dir/old"; }
trap cleanup EXIT
mkdir -p "$dir/old"
git show "$baseline:$dir/old.rs" >"$dir/old.rs"
git show "$baseline:$dir/old/body.rs" >"$dir/old/body.rs"
cargo build --release -q -p data-plane-agent --example bench_textcalls --features bench-baseline
"${CARGO_TARGET_DIR:-target}/release/examples/bench_textcalls" "${BENCH_TEXTCALLS_MB:-8}" "${BENCH_TEXTCALLS_ROUNDS:-5}"
