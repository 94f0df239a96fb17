#!/usr/bin/env bash
# Every document tool over HTTP on the 100k-chunk corpus of benches/search.sh:
# a real `data-plane serve` (release build) on 127.0.0.1 driven by wrk, each
# tool at 1 connection (latency) and at 64 connections (throughput), printing
# p50/p95/p99 in ms and requests/s. wrk and the server share the machine's
# cores, so throughput figures are a floor. BENCH_SECONDS sets each run's length,
# BENCH_ONLY picks benchmarks by name, BENCH_BIN runs a binary built elsewhere.
set -euo pipefail
cd "$(dirname "$0")/.."

SECONDS_PER_RUN="${BENCH_SECONDS:-8}"
PORT="${BENCH_PORT:-18089}"
DB=dp_bench_search
BASE="http://127.0.0.1:$PORT"
DATA=.data/bench/http
OWNER_URL="${DATA_PLANE_TEST_OWNER_URL:-postgres://data_plane_owner:data_plane_owner@127.0.0.1:5432/postgres?sslmode=disable}"

# shellcheck source=benches/lib/wrk.sh
source benches/lib/wrk.sh

# The corpus (database and keyword index) comes from the search benchmark.
if ! psql "$OWNER_URL" -tAc "SELECT 1 FROM pg_database WHERE datname = '$DB'" | grep -q 1; then
    echo "building the 100k-chunk corpus first (benches/search.sh)" >&2
    bash benches/search.sh >/dev/null
fi

# BENCH_BIN runs a binary built elsewhere (another profile, an older commit),
# to compare two builds on the same corpus.
if [[ -n "${BENCH_BIN:-}" ]]; then
    BIN="$BENCH_BIN"
else
    cargo build --release -q -p data-plane
    BIN=./target/release/data-plane
fi
mkdir -p "$DATA"
ln -sfn "$PWD/.data/bench/search-index" "$DATA/index"
export DATABASE_URL="postgres://data_plane_app:data_plane_app@127.0.0.1:5432/$DB?sslmode=disable"
export DATABASE_OWNER_URL="${OWNER_URL%/*}/$DB"
export DATA_PLANE_DATA_DIR="$DATA" DATA_PLANE_ADDR="127.0.0.1:$PORT" RUST_LOG=warn
export DATA_PLANE_MODEL_DIR="${DATA_PLANE_MODEL_DIR:-$PWD/.data/model/all-MiniLM-L6-v2}"

$BIN migrate >/dev/null
# The search corpus has no tables: the demo corpus's CSV data sets give
# query_documents something to read (skipped when already there).
DATASETS="${DEMO_CORPUS:-.data/corpus/demo}/datasets"
if [[ -d "$DATASETS" ]]; then
    $BIN ingest "$DATASETS" --space library --source datasets >/dev/null
fi
TOKEN=$($BIN token --user bench-http@example.com --space library)
$BIN serve --no-migrate >"$DATA/server.log" 2>&1 &
SERVER=$!
trap 'kill $SERVER 2>/dev/null; wait $SERVER 2>/dev/null || true' EXIT
for _ in $(seq 1 120); do
    curl -sf "$BASE/readyz" >/dev/null 2>&1 && break
    sleep 0.5
done
curl -sf "$BASE/readyz" >/dev/null || { echo "the server did not start; see $DATA/server.log" >&2; exit 1; }
# A run calls query_documents far more often than its daily limit per user
# allows: lift the limit for this deployment, as an admin would.
ADMIN=$($BIN token --user bench-admin@example.com --role admin)
curl -sf -X PUT "$BASE/v1/admin/settings" -H "Authorization: Bearer $ADMIN" \
    -H 'content-type: application/json' \
    -d '{"tool_rate_limits": {"query_documents": {"daily_limit": null}}}' >/dev/null

# Ids to call the tools with, found through the API itself.
api() { curl -sf -H "Authorization: Bearer $TOKEN" -H 'content-type: application/json' "$@"; }
SPACE=$(api "$BASE/v1/spaces" | python3 -c 'import json,sys; print([s["id"] for s in json.load(sys.stdin)["spaces"] if s["name"]=="library"][0])')
read -r SOURCE DOC CSV TABLE < <(python3 - "$BASE" "$TOKEN" "$SPACE" <<'PY'
import json, sys, urllib.request
base, token, space = sys.argv[1:4]
def call(path, body=None):
    req = urllib.request.Request(base + path, data=None if body is None else json.dumps(body).encode(),
        headers={"Authorization": "Bearer " + token, "content-type": "application/json"})
    return json.load(urllib.request.urlopen(req))
def first(pattern):
    hits = call("/v1/tools/find_by_name/execute", {"args": {"pattern": pattern, "limit": 1}, "spaceId": space})
    matches = hits["data"]["documents"] if hits.get("success") else []
    if not matches:
        sys.exit(f"no document matches {pattern} in the bench space: {json.dumps(hits)[:300]}")
    return {"id": matches[0]["document_id"]}
sources = call(f"/v1/spaces/{space}/sources")["sources"]
doc = first("**/*.html")
csv = first("**/*.csv")
info = call("/v1/tools/document_info/execute", {"args": {"document_id": csv["id"]}})
table = info["data"]["metadata"]["tables"][0]["name"]
print(sources[0]["id"], doc["id"], csv["id"], table)
PY
)

QUERIES=(
    "how do I reclaim disk space from dead rows"
    "create an index without blocking writes to the table"
    "difference between json and jsonb"
    "running total with a window function"
    "rank full text search results by relevance"
    "restore a database from a backup file"
    "which isolation level prevents phantom reads"
    "grant read access on all tables in a schema"
)

# One Lua script per tool: POSTs the bodies in turn, prints the percentiles.
run() {
    local name=$1 tool=$2 connections=$3
    shift 3
    local script="$DATA/$name.lua"
    {
        echo "wrk.method = 'POST'"
        echo "wrk.headers['Content-Type'] = 'application/json'"
        echo "wrk.headers['Authorization'] = 'Bearer $TOKEN'"
        echo "local bodies = {"
        for body in "$@"; do printf '  [==[%s]==],\n' "$body"; done
        echo "}"
        cat <<'LUA'
local i = 0
request = function()
  i = i + 1
  return wrk.format(nil, nil, nil, bodies[(i % #bodies) + 1])
end
done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format("RESULT %.3f %.3f %.3f %.1f %d\n",
    latency:percentile(50) / 1000, latency:percentile(95) / 1000,
    latency:percentile(99) / 1000, summary.requests / (summary.duration / 1e6),
    e.connect + e.read + e.write + e.status + e.timeout))
end
LUA
    } >"$script"
    # A failed call would be measured as fast: check one first.
    local first
    first=$(api -X POST "$BASE/v1/tools/$tool/execute" -d "$1")
    if ! grep -q '"success":true' <<<"$first"; then
        echo "$name: the call fails, not measured: $first" >&2
        return
    fi
    local threads=$((connections < 2 ? 1 : 2))
    local line
    line=$(wrk -t"$threads" -c"$connections" -d"${SECONDS_PER_RUN}s" -s "$script" "$BASE/v1/tools/$tool/execute" | grep '^RESULT')
    read -r _ p50 p95 p99 rps errors <<<"$line"
    printf 'http.%s.c%s p50_ms %s p95_ms %s p99_ms %s rps %s errors %s\n' "$name" "$connections" "$p50" "$p95" "$p99" "$rps" "$errors"
}

searches() {
    local mode=$1
    for q in "${QUERIES[@]}"; do printf '{"args":{"query":"%s","mode":"%s"}}\n' "$q" "$mode"; done
}

bench() {
    local name=$1 tool=$2
    shift 2
    # BENCH_ONLY="document_info search_hybrid" runs only those.
    if [[ -n "${BENCH_ONLY:-}" && " $BENCH_ONLY " != *" $name "* ]]; then return; fi
    for c in 1 64; do run "$name" "$tool" "$c" "$@"; done
}

mapfile -t HYBRID < <(searches hybrid)
mapfile -t VECTOR < <(searches vector)
mapfile -t KEYWORD < <(searches keyword)

bench document_info document_info "{\"args\":{\"document_id\":\"$DOC\"}}"
bench read_document read_document "{\"args\":{\"document_id\":\"$DOC\",\"max_length\":4000}}"
bench list_sources list_sources "{\"args\":{},\"spaceId\":\"$SPACE\"}"
bench list_folder_contents list_folder_contents "{\"args\":{\"source_id\":\"$SOURCE\"},\"spaceId\":\"$SPACE\"}"
bench folder_tree folder_tree "{\"args\":{\"source_id\":\"$SOURCE\",\"max_depth\":2},\"spaceId\":\"$SPACE\"}"
bench find_by_name find_by_name '{"args":{"pattern":"*vacuum*"}}' '{"args":{"pattern":"**/*.csv"}}'
bench grep_documents grep_documents '{"args":{"pattern":"VACUUM FULL"}}' '{"args":{"pattern":"pg_[a-z]+_size","regex":true}}'
bench query_documents query_documents "{\"args\":{\"document_id\":\"$CSV\",\"sql\":\"SELECT count(*) AS n FROM \\\"$TABLE\\\"\"}}"
bench search_hybrid search_documents "${HYBRID[@]}"
bench search_vector search_documents "${VECTOR[@]}"
bench search_keyword search_documents "${KEYWORD[@]}"
