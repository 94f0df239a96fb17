#!/usr/bin/env bash
# Embedding throughput: our local engine (own BERT pass) against ONNX Runtime
# on the same model, machine and texts, in float32 and with int8 weights
# (dynamic quantisation), and against PyTorch sentence-transformers. Ours
# runs twice: as the server does (`embed.local.`, DATA_PLANE_EMBEDDING_PRECISION
# or auto: 8-bit where the CPU has AVX-512 VNNI) and in float32
# (`embed.local_float32.`). Prints sentences/s and tokens/s for each and the
# ratios ours/onnxruntime, ours/onnxruntime_int8, ours/pytorch and
# local_float32/onnxruntime.
# Query latency: one ten-word search query embedded alone, ours against ONNX
# Runtime running the same model (benches/embed_onnx.py builds the graph),
# p50/p99 and the ratio ours/onnxruntime.
# EMBED_SWEEP=1 also times other batch sizes and thread counts;
# EMBED_PYTORCH=0 skips PyTorch (a venv of several GB).
set -euo pipefail
cd "$(dirname "$0")/.."

MODEL_DIR="${DATA_PLANE_MODEL_DIR:-.data/model/all-MiniLM-L6-v2}"
CORPUS="${DEMO_CORPUS:-.data/corpus/demo}"
VENV=.data/bench-venv
ONNX_VENV=.data/bench-onnx-venv
TEXTS=.data/bench/embed_texts.json
THREADS="${EMBED_BENCH_THREADS:-2}"

if [[ ! -f "$MODEL_DIR/model.safetensors" ]]; then
    echo "embedding model missing in $MODEL_DIR: run \`make setup\`" >&2
    exit 1
fi

# ONNX Runtime from PyPI in a small venv of its own (no PyTorch needed); it
# also makes the texts (the `tokenizers` package alone reads the model's
# word pieces).
if ! "$ONNX_VENV/bin/python" -c 'import onnx, onnxruntime, safetensors, tokenizers' 2>/dev/null; then
    echo "setting up $ONNX_VENV with onnxruntime from PyPI (once)" >&2
    python3 -m venv "$ONNX_VENV"
    "$ONNX_VENV/bin/pip" install --quiet --disable-pip-version-check onnx onnxruntime numpy safetensors tokenizers
fi
export TOKENIZERS_PARALLELISM=false HF_HUB_OFFLINE=1 TRANSFORMERS_VERBOSITY=error

# Prose from the PostgreSQL manual when the demo corpus is there, else the
# licence texts every Debian system carries.
if [[ ! -s "$TEXTS" ]]; then
    mkdir -p "$(dirname "$TEXTS")"
    source_dir="$CORPUS/postgresql-manual"
    [[ -d "$source_dir" ]] || source_dir="$CORPUS"
    "$ONNX_VENV/bin/python" benches/embed_pytorch.py prepare \
        --model "$MODEL_DIR" --corpus "$source_dir" --count 500 --out "$TEXTS"
fi

cargo build --release -q -p data-plane-embed --example bench_embed

sweep=()
[[ "${EMBED_SWEEP:-0}" == 1 ]] && sweep=(--sweep)
bench_embed="${CARGO_TARGET_DIR:-target}/release/examples/bench_embed"
# The float32 query vector is the one ONNX Runtime's float graph must match.
float32=$(RAYON_NUM_THREADS="$THREADS" "$bench_embed" "$MODEL_DIR" "$TEXTS" --precision float32 \
    --query-vector .data/bench/query_vector.json | sed 's/^embed\.local\./embed.local_float32./')
echo "$float32"
ours=$(RAYON_NUM_THREADS="$THREADS" "$bench_embed" "$MODEL_DIR" "$TEXTS" \
    --precision "${DATA_PLANE_EMBEDDING_PRECISION:-auto}" "${sweep[@]}")
echo "$ours"

query=$(sed -n 's/^pub const QUERY: &str = "\(.*\)";$/\1/p' crates/embed/examples/bench_embed.rs)
onnx=$("$ONNX_VENV/bin/python" benches/embed_onnx.py --model "$MODEL_DIR" --query "$query" \
    --ours .data/bench/query_vector.json --threads "$THREADS" --texts "$TEXTS" 2>/dev/null)
echo "$onnx"
ours_query=$(awk '$1 == "embed.local.query_p50_ms" {print $2}' <<<"$ours")
onnx_query=$(awk '$1 == "embed.onnxruntime.query_p50_ms" {print $2}' <<<"$onnx")
awk -v a="$ours_query" -v b="$onnx_query" 'BEGIN {printf "embed.query_p50_ratio_local_over_onnxruntime %.2f\n", a / b}'
ours_rate=$(awk '$1 == "embed.local.sentences_per_s" {print $2}' <<<"$ours")
for side in onnxruntime onnxruntime_int8; do
    rate=$(awk -v k="embed.$side.sentences_per_s" '$1 == k {print $2}' <<<"$onnx")
    awk -v a="$ours_rate" -v b="$rate" -v s="$side" 'BEGIN {printf "embed.ratio_local_over_%s %.2f\n", s, a / b}'
done
float32_rate=$(awk '$1 == "embed.local_float32.sentences_per_s" {print $2}' <<<"$float32")
onnx_rate=$(awk '$1 == "embed.onnxruntime.sentences_per_s" {print $2}' <<<"$onnx")
awk -v a="$float32_rate" -v b="$onnx_rate" 'BEGIN {printf "embed.ratio_local_float32_over_onnxruntime %.2f\n", a / b}'

if [[ "${EMBED_PYTORCH:-1}" == 0 ]]; then
    exit 0
fi
# The PyTorch side lives in its own venv; installing is skipped once it works.
if ! "$VENV/bin/python" -c 'import sentence_transformers, torch' 2>/dev/null; then
    echo "setting up $VENV with torch and sentence-transformers from PyPI (several GB, once)" >&2
    python3 -m venv "$VENV"
    "$VENV/bin/pip" install --quiet --disable-pip-version-check sentence-transformers
fi
theirs=$("$VENV/bin/python" benches/embed_pytorch.py bench \
    --model "$MODEL_DIR" --texts "$TEXTS" --threads "$THREADS" 2>/dev/null)
echo "$theirs"
theirs_rate=$(awk '$1 == "embed.pytorch.sentences_per_s" {print $2}' <<<"$theirs")
awk -v a="$ours_rate" -v b="$theirs_rate" 'BEGIN {printf "embed.ratio_local_over_pytorch %.2f\n", a / b}'
