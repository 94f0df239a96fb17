#!/usr/bin/env bash
# Holds the layering of docs/ARCHITECTURE.md ("Layers, and what holds
# them"). Normal dependencies only; dev-dependencies may use anything.
#
# 1. Every workspace crate has a declared layer (LAYER below), and no crate
#    depends directly on a crate of its own layer or one above it.
# 2. Only the binary knows HTTP: no library crate depends, directly or not,
#    on axum (tower itself is allowed: reqwest is built on it).
# 3. No database driver below the store: a crate that does not depend on
#    data-plane-store never compiles sqlx.
# 4. data-plane-extract, underneath ingest and web, depends on no other
#    data-plane crate.
# 5. data-plane-testkit is test support: never part of a default build.
# 6. Who writes SQL: sqlx's query functions and macros appear only in the
#    store (crates/store/src) and in the tool handlers (handlers/src); the
#    binary and every other crate call the store.
# 7. The binary's HTTP layer has no circles: a route module of
#    apps/data-plane/src/http (a file, or a file with a folder of its own
#    parts, like mcp.rs and mcp/) imports the HTTP infrastructure
#    (HTTP_INFRA) and the crate's own modules, never another route module;
#    the infrastructure imports no route; and outside http/ only the CLI
#    (which starts the server) names `crate::http`.
#
# Any cargo error, a crate missing from LAYER or a LAYER entry that is not a
# workspace crate stops the check with a failure: nothing passes unchecked.
set -euo pipefail
cd "$(dirname "$0")/.."

# The layers, bottom (0) to top. A crate may depend on crates of lower
# layers only.
declare -A LAYER=(
    [data-plane-types]=0
    [data-plane-testkit]=0
    [data-plane-extract]=1
    [data-plane-embed]=1
    [data-plane-store]=1
    [data-plane-web]=2
    [data-plane-search]=2
    [data-plane-registry]=2
    [data-plane-ingest]=3
    [data-plane-agent]=3
    [data-plane-handlers]=4
    [data-plane-modules]=4
    [data-plane-runs]=4
    [data-plane]=5
)

status=0
fail() {
    echo "layering: $*" >&2
    status=1
}

# `cargo tree` for one crate's normal dependencies, one "name vX.Y.Z" a
# line. Called only at the top level (never in a condition, where `set -e`
# is off), so a cargo failure (an unknown crate, a broken manifest) ends the
# check with a failure.
deps() { # crate, extra cargo tree arguments
    local out
    if ! out=$(cargo tree -q -p "$1" -e normal --prefix none "${@:2}" 2>&1); then
        echo "layering: cargo tree -p $1 failed:" >&2
        echo "$out" >&2
        exit 2
    fi
    awk 'NF {print $1}' <<<"$out" | sort -u
}

# The workspace's crates, and LAYER, name the same set.
if ! members=$(cargo tree -q --workspace --depth 0 -e normal --prefix none 2>&1); then
    echo "layering: cargo tree --workspace failed:" >&2
    echo "$members" >&2
    exit 2
fi
members=$(awk 'NF {print $1}' <<<"$members" | sort -u)
[[ -n "$members" ]] || { echo "layering: cargo tree listed no workspace crate" >&2; exit 2; }
for crate in $members; do
    [[ -n "${LAYER[$crate]:-}" ]] || fail "$crate has no layer in scripts/check_layers.sh; declare one"
done
for crate in "${!LAYER[@]}"; do
    grep -qx "$crate" <<<"$members" || fail "LAYER names $crate, which is not a workspace crate"
done

# Each crate's whole normal tree and its direct dependencies, read once.
declare -A TREE DIRECT
for crate in $members; do
    TREE[$crate]=$(deps "$crate")
    direct=$(deps "$crate" --depth 1)
    DIRECT[$crate]=$(grep -vx "$crate" <<<"$direct" || true)
done

depends_on() { # crate, dependency (anywhere in its normal tree)
    grep -qx "$2" <<<"${TREE[$1]}"
}

# 1. Direct dependencies point downwards.
for crate in $members; do
    own=${LAYER[$crate]:-}
    [[ -n "$own" ]] || continue
    for dep in $(grep '^data-plane' <<<"${DIRECT[$crate]}" || true); do
        theirs=${LAYER[$dep]:-}
        if [[ -z "$theirs" ]]; then
            fail "$crate depends on $dep, which has no layer"
        elif ((theirs >= own)); then
            fail "$crate (layer $own) depends on $dep (layer $theirs); dependencies point to lower layers only"
        fi
    done
done

# 2. Only the binary serves HTTP.
for crate in $members; do
    [[ "$crate" == data-plane ]] && continue
    if depends_on "$crate" axum; then
        fail "$crate depends on axum; only apps/data-plane may serve HTTP"
    fi
done

# 3. No database driver below the store.
for crate in $members; do
    [[ "$crate" == data-plane-store ]] && continue
    if ! depends_on "$crate" data-plane-store && depends_on "$crate" sqlx; then
        fail "$crate depends on sqlx without the store; no database driver below the store"
    fi
done

# 4. Extraction underneath everything of ours.
ours=$(grep '^data-plane' <<<"${TREE[data-plane-extract]}" || true)
if [[ "$ours" != data-plane-extract ]]; then
    fail "data-plane-extract depends on another data-plane crate; it must sit underneath them all"
fi

# 5. The test kit stays out of default builds.
for crate in $members; do
    [[ "$crate" == data-plane-testkit ]] && continue
    if depends_on "$crate" data-plane-testkit; then
        fail "$crate depends on data-plane-testkit; it is for dev-dependencies only"
    fi
done

# 6. SQL is written in the store and the handlers only.
sql='sqlx::(query|query_as|query_scalar|query_with|query_as_with|query_scalar_with|raw_sql|QueryBuilder)\b|\b(query|query_as|query_scalar|query_file|query_file_as)!\(|use sqlx::\{?[^;]*\b(query|query_as|query_scalar|raw_sql|QueryBuilder)\b'
while IFS= read -r hit; do
    fail "SQL outside the store and the handlers: $hit"
done < <(find apps crates handlers -path '*/src/*' -name '*.rs' \
    -not -path 'crates/store/*' -not -path 'handlers/*' -print0 |
    xargs -0 grep -nE "$sql" || true)

# 7. Route modules never import each other.
HTTP_INFRA=(mod context extract sse ui_stream)
http=apps/data-plane/src/http
routes=()
for file in "$http"/*.rs; do
    name=$(basename "$file" .rs)
    [[ " ${HTTP_INFRA[*]} " == *" $name "* ]] || routes+=("$name")
done
((${#routes[@]} > 0)) || fail "no route module found in $http"
route_pattern="(super|crate::http)::(\{[^}]*\b)?($(IFS='|'; echo "${routes[*]}"))\b"
for file in "$http"/*.rs; do
    name=$(basename "$file" .rs)
    [[ "$name" == mod ]] && continue # the router names every route
    while IFS= read -r hit; do
        fail "$file imports a route module: $hit (route modules share only the HTTP infrastructure: ${HTTP_INFRA[*]})"
    done < <(grep -nE "$route_pattern" "$file" | grep -vE "::$name\b" || true)
done
# A route's own parts (http/NAME/*.rs) reach the rest through crate::http
# or super::super; their super is the route itself.
parts_pattern="(super::super|crate::http)::(\{[^}]*\b)?($(IFS='|'; echo "${routes[*]}"))\b"
for dir in "$http"/*/; do
    [[ -d "$dir" ]] || continue
    name=$(basename "$dir")
    [[ " ${routes[*]} " == *" $name "* ]] || fail "$dir is the folder of no route module ($http/$name.rs)"
    for file in "$dir"*.rs; do
        while IFS= read -r hit; do
            fail "$file imports a route module: $hit (route modules share only the HTTP infrastructure: ${HTTP_INFRA[*]})"
        done < <(grep -nE "$parts_pattern" "$file" | grep -vE "::$name\b" || true)
    done
done
while IFS= read -r hit; do
    fail "outside http/, only the CLI may name crate::http: $hit"
done < <(grep -nE 'crate::http\b' apps/data-plane/src/*.rs | grep -v '^apps/data-plane/src/cli.rs:' || true)

if ((status == 0)); then
    echo "layering: ${#LAYER[@]} crates in their layers; HTTP, the database driver, the test kit and SQL where they belong; ${#routes[@]} route modules that import no other"
fi
exit $status
