#!/usr/bin/env bash
# Holds the layering of docs/ARCHITECTURE.md: only the binary knows HTTP.
# Fails when a library crate depends, directly or not, on axum, the server
# framework (normal dependencies; dev-dependencies may use anything). tower
# itself is allowed: reqwest, the HTTP client of the embedding and web
# crates, is built on it. Also holds that data-plane-extract, underneath
# ingest and web, depends on no other data-plane crate.
set -euo pipefail
cd "$(dirname "$0")/.."
status=0
for crate in data-plane-registry data-plane-handlers data-plane-store data-plane-search \
    data-plane-embed data-plane-extract data-plane-ingest data-plane-web data-plane-agent; do
    if cargo tree -q -p "$crate" -e normal --prefix none 2>/dev/null | grep -q "^axum v"; then
        echo "layering: $crate depends on axum; only apps/data-plane may serve HTTP" >&2
        status=1
    fi
done
if cargo tree -q -p data-plane-extract -e normal --prefix none 2>/dev/null |
    grep -v "^data-plane-extract v" | grep -q "^data-plane-"; then
    echo "layering: data-plane-extract depends on another data-plane crate; it must sit underneath them all" >&2
    status=1
fi
exit $status
