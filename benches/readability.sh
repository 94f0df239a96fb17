#!/usr/bin/env bash
# Readable extraction against the readability fixtures (20 real pages) and,
# where benches/readability_devset.sh has laid them out, the development sets
# under .data/readability-dev: token precision/recall/F1 of the text per set,
# metadata agreement per field on the fixtures. With the venv that script
# makes, readability-lxml and trafilatura run on the same pages and are scored
# by the same scorer beside ours (READABILITY_OTHERS=0 skips them).
set -euo pipefail
cd "$(dirname "$0")/.."
sets=("${READABILITY_FIXTURES:-../shared/fixtures/readability}")
for dir in .data/readability-dev/*/; do
    [ -d "$dir" ] && sets+=("${dir%/}")
done
others=()
if [ "${READABILITY_OTHERS:-1}" != 0 ] && [ -x .data/venv/bin/python ]; then
    .data/venv/bin/python benches/readability_others.py .data/readability-others "${sets[@]}"
    others=(--others .data/readability-others)
fi
cargo build --release -q -p data-plane-extract --example bench_readability
"${CARGO_TARGET_DIR:-target}/release/examples/bench_readability" "${others[@]}" "${sets[@]}"
