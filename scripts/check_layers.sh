#!/usr/bin/env bash
# Holds the layering of docs/ARCHITECTURE.md (normal dependencies only;
# dev-dependencies may use anything):
# - only the binary knows HTTP: no library crate depends, directly or not, on
#   axum, the server framework (tower itself is allowed: reqwest, the HTTP
#   client of the embedding and web crates, is built on it);
# - the bottom layer does no IO: the shared types, the registry, the agent and
#   the extraction crate never compile sqlx, the database driver;
# - data-plane-extract, underneath ingest and web, depends on no other
#   data-plane crate;
# - data-plane-testkit is test support: a dev-dependency, or optional behind a
#   crate's `testing` feature, never part of a default build.
set -euo pipefail
cd "$(dirname "$0")/.."
status=0
depends_on() { # crate, dependency
    cargo tree -q -p "$1" -e normal --prefix none 2>/dev/null | grep -q "^$2 v"
}
for crate in data-plane-types data-plane-registry data-plane-handlers data-plane-store \
    data-plane-search data-plane-embed data-plane-extract data-plane-ingest data-plane-web \
    data-plane-agent data-plane-modules data-plane-runs; do
    if depends_on "$crate" axum; then
        echo "layering: $crate depends on axum; only apps/data-plane may serve HTTP" >&2
        status=1
    fi
done
for crate in data-plane-types data-plane-registry data-plane-agent data-plane-extract; do
    if depends_on "$crate" sqlx; then
        echo "layering: $crate depends on sqlx; the bottom layer does no IO (docs/ARCHITECTURE.md)" >&2
        status=1
    fi
done
if cargo tree -q -p data-plane-extract -e normal --prefix none 2>/dev/null |
    grep -v "^data-plane-extract v" | grep -q "^data-plane-"; then
    echo "layering: data-plane-extract depends on another data-plane crate; it must sit underneath them all" >&2
    status=1
fi
for crate in data-plane data-plane-types data-plane-registry data-plane-handlers data-plane-store \
    data-plane-search data-plane-embed data-plane-extract data-plane-ingest data-plane-web \
    data-plane-agent data-plane-modules data-plane-runs; do
    if depends_on "$crate" data-plane-testkit; then
        echo "layering: $crate depends on data-plane-testkit; it is for dev-dependencies only" >&2
        status=1
    fi
done
exit $status
