#!/usr/bin/env bash
# `make run`: set up what is missing, build the release binary, migrate, ingest
# the demo corpus and serve. The build needs nothing the set-up installs on a
# machine of this kind (a Rust toolchain and a C compiler), so it starts first,
# in the background, and compiles while the set-up waits on apt, pip and
# PostgreSQL; the set-up keeps the terminal (sudo may ask for a password).
# Then the build's output is shown from its first line while it finishes.
set -euo pipefail
shopt -s inherit_errexit

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

BIN="${CARGO_TARGET_DIR:-target}/release/data-plane"
DEMO_CORPUS="${DEMO_CORPUS:-.data/corpus/demo}"
DEMO_SPACE="${DEMO_SPACE:-demo}"
# `local`: install (once) and start a small local chat model, and chat with it.
MODEL="${MODEL:-}"
if [[ -n "$MODEL" && "$MODEL" != local ]]; then
    echo "run: MODEL must be 'local' or empty, got '$MODEL'" >&2
    exit 2
fi
BUILD_LOG=".data/build/cargo-release.log"
BUILD=(cargo build --release -p data-plane)

mkdir -p "$(dirname "$BUILD_LOG")"
started="$(date +%s)"

# In a session of its own, so that stopping it stops its compilers too.
setsid "${BUILD[@]}" --color="$([[ -t 1 ]] && echo always || echo never)" >"$BUILD_LOG" 2>&1 &
build_pid=$!
# A failed set-up, or Ctrl-C at any point before the build ends, stops the
# build too (the traps make the shell exit on a signal, which runs EXIT).
tail_pid=""
trap 'kill -TERM -- -"$build_pid" $tail_pid 2>/dev/null || true' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

bash scripts/setup.sh --no-browser
if [[ "$MODEL" == local ]]; then
    bash scripts/local-model.sh install
fi

echo "build: cargo build --release (started with the set-up; its output so far, then as it comes)"
# In the background so that `wait` returns at once on a signal.
tail -n +1 -f --pid="$build_pid" "$BUILD_LOG" &
tail_pid=$!
wait "$tail_pid" || true
build_rc=0
wait "$build_pid" || build_rc=$?
trap - EXIT INT TERM
if ((build_rc != 0)); then
    # A compiler package the set-up has just installed may be what it lacked:
    # one more try in the foreground shows the error, if any, as cargo prints it.
    echo "build: the background build failed (exit $build_rc); building again now that the set-up is done"
    "${BUILD[@]}"
fi
build_s=$(($(date +%s) - started))
echo "build: done, ${build_s}s since make run started"

answers() { python3 -c 'import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=2)' "$1" >/dev/null 2>&1; }

phase_started="$(date +%s)"
"$BIN" migrate
echo "migrate: done in $(($(date +%s) - phase_started))s"
if [[ "$MODEL" == local ]]; then
    port="${LOCAL_MODEL_PORT:-8081}"
    models_url="http://127.0.0.1:$port/v1/models"
    if answers "$models_url"; then
        echo "run: port $port already answers as a model server; stop it or set LOCAL_MODEL_PORT" >&2
        exit 1
    fi
    mkdir -p .data/llm
    # Its own session, stopped with the server when this shell ends.
    setsid bash scripts/local-model.sh serve >>.data/llm/server.log 2>&1 &
    model_pid=$!
    trap 'kill -TERM -- -"$model_pid" 2>/dev/null || true' EXIT
    ready=0
    for _ in $(seq 240); do
        answers "$models_url" && ready=1 && break
        kill -0 "$model_pid" 2>/dev/null || { echo "run: the local model server stopped; see .data/llm/server.log" >&2; exit 1; }
        sleep 0.5
    done
    if ((!ready)); then
        echo "run: the local model server did not answer within 2 minutes; see .data/llm/server.log" >&2
        exit 1
    fi
    export OPENAI_BASE_URL="http://127.0.0.1:$port/v1"
    export DATA_PLANE_MODEL="${LOCAL_MODEL_ALIAS:-gemma-3-270m}"
    # A small model on a CPU writes a few dozen tokens a second: answers are
    # kept short unless asked otherwise.
    export DATA_PLANE_MODEL_MAX_TOKENS="${DATA_PLANE_MODEL_MAX_TOKENS:-512}"
    # llama-cpp-python reads the older field only.
    export DATA_PLANE_MODEL_MAX_TOKENS_FIELD=max_tokens
    # The first turn reads the prompt and the tool definitions cold: up to a
    # minute or more on two cores before the first token.
    export DATA_PLANE_MODEL_TIMEOUT="${DATA_PLANE_MODEL_TIMEOUT:-180}"
    unset OPENAI_API_KEY
    echo "run: chatting with $DATA_PLANE_MODEL at $OPENAI_BASE_URL (a very small model: expect short, often wrong answers)"
fi
# Served in the background so that this script can say when it answers:
# "ready in" counts from the start of `make run` to the first 200 of
# /readyz (the keyword index has caught up). A signal to this shell reaches data-plane first; with a local
# model, the model server stops when data-plane does (the EXIT trap).
# The demo corpus is ingested beside the server rather than before it: the
# server answers as soon as it is built and migrated, and search finds the
# documents as they arrive (a second run finds them unchanged in seconds).
# The address is the environment's, else .env's (the binary reads .env
# itself), else the default, and is passed on so that the address polled
# is the one served.
addr="${DATA_PLANE_ADDR:-}"
if [[ -z "$addr" && -f .env ]]; then
    addr="$(sed -n 's/^[[:space:]]*\(export[[:space:]]*\)\{0,1\}DATA_PLANE_ADDR=//p' .env | tail -n 1)"
    addr="${addr%\"}" && addr="${addr#\"}" && addr="${addr%\'}" && addr="${addr#\'}"
fi
addr="${addr:-127.0.0.1:8080}"
host="${addr%:*}"
case "$host" in
    "" | 0.0.0.0) host=127.0.0.1 ;;
    "[::]") host="[::1]" ;;
esac
url="http://$host:${addr##*:}"
if answers "$url/healthz"; then
    echo "run: $url already answers; stop the server there or set DATA_PLANE_ADDR" >&2
    exit 1
fi
"$BIN" serve --addr "$addr" &
server_pid=$!
# Its lines are prefixed so they stand apart from the server's log; through
# the pipe it reports progress as lines, not a bar. In a session of its own,
# so that it stops with this script.
# shellcheck disable=SC2016 # expanded by the inner shell
setsid bash -c 'set -o pipefail
    started=$(date +%s)
    if "$0" ingest "$1" --space "$2" 2>&1 | sed -u "s/^/demo corpus: /"; then
        echo "demo corpus: done in $(($(date +%s) - started))s; search covers all of it"
    else
        echo "demo corpus: the ingest failed (above); the server goes on with what was stored" >&2
    fi' "$BIN" "$DEMO_CORPUS" "$DEMO_SPACE" &
ingest_pid=$!
trap 'kill -TERM "$server_pid" 2>/dev/null || true' TERM INT
trap 'kill -TERM -- -"$ingest_pid" 2>/dev/null || true; [[ -z "${model_pid:-}" ]] || kill -TERM -- -"$model_pid" 2>/dev/null || true' EXIT
ready=0
for _ in $(seq 600); do
    if answers "$url/readyz"; then
        elapsed=$(($(date +%s) - started))
        ingesting=""
        kill -0 "$ingest_pid" 2>/dev/null && ingesting="; the demo corpus is being ingested beside it"
        echo "ready in $((elapsed / 60))m $((elapsed % 60))s (the build ended ${build_s}s in): serving $url$ingesting"
        ready=1
        break
    fi
    kill -0 "$server_pid" 2>/dev/null || break
    sleep 0.1
done
if ((!ready)) && kill -0 "$server_pid" 2>/dev/null; then
    echo "run: $url is not ready (/readyz) after a minute; the server's log above says what it is doing" >&2
fi
rc=0
wait "$server_pid" || rc=$?
# A signal interrupts that wait (its status is the signal's): wait again
# for the server to stop, and end with its own status.
if kill -0 "$server_pid" 2>/dev/null; then
    rc=0
    wait "$server_pid" || rc=$?
fi
exit "$rc"
