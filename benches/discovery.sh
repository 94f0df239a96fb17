#!/usr/bin/env bash
# Tool discovery: per agent profile, the cl100k_base tokens of the tool list
# sent up front against the three discovery meta-tools (search_tools,
# describe_tool, execute_tool), and the extra model steps and tokens of a
# scripted discovery turn against the direct one, on the fake model.
# Offline and in seconds; the figures are counts, not timings, so the debug
# build the tests already made serves.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build -q -p data-plane --example bench_discovery
"${CARGO_TARGET_DIR:-target}/debug/examples/bench_discovery"
