#!/usr/bin/env bash
# Retrieval levers beyond the fusion, tried offline on the quality
# benchmark's dump (benches/quality_levers.py says which and how):
#
#   BENCH_QUALITY_DUMP=/tmp/quality.jsonl bash benches/quality.sh
#   bash benches/quality_levers.sh /tmp/quality.jsonl
#
# Needs the benchmark's database (dp_bench_quality, reached through
# DATABASE_OWNER_URL's server) and psql; sets up ONNX Runtime from PyPI in
# the venv benches/embed.sh uses. The first run embeds every sentence of
# the corpus twice and passes every passage through the model once more
# for late chunking (about 20 minutes on two cores), keeping the vectors
# in .data/bench/quality-levers; later runs take about five minutes.
#
# `make bench` runs it without a dump, and then it only says how to run it.
set -euo pipefail
cd "$(dirname "$0")/.."
if [[ $# -lt 1 ]]; then
    echo "quality_levers: skipped (give it a dump: BENCH_QUALITY_DUMP=FILE bash benches/quality.sh, then bash benches/quality_levers.sh FILE)"
    exit 0
fi
dump="$1"
if [[ ! -s "$dump" ]]; then
    echo "quality_levers: no dump at $dump (write one with BENCH_QUALITY_DUMP=$dump bash benches/quality.sh)" >&2
    exit 1
fi
MODEL_DIR="${DATA_PLANE_MODEL_DIR:-.data/model/all-MiniLM-L6-v2}"
ONNX_VENV=.data/bench-onnx-venv
owner="${DATABASE_OWNER_URL:-postgres://data_plane_owner:data_plane_owner@127.0.0.1:5432/data_plane?sslmode=disable}"
# The same server and parameters, the benchmark's database.
base="${owner%%\?*}"
params=""
[[ "$owner" == *\?* ]] && params="?${owner#*\?}"
db="${base%/*}/dp_bench_quality$params"

if ! "$ONNX_VENV/bin/python" -c 'import onnx, onnxruntime, safetensors, snowballstemmer, tokenizers' 2>/dev/null; then
    echo "setting up $ONNX_VENV with onnxruntime from PyPI (once)" >&2
    python3 -m venv "$ONNX_VENV"
    "$ONNX_VENV/bin/pip" install --quiet --disable-pip-version-check onnx onnxruntime numpy safetensors tokenizers snowballstemmer
fi
"$ONNX_VENV/bin/python" benches/quality_levers.py "$dump" --model "$MODEL_DIR" --db "$db" \
    --fixture "${SCIFACT_DIR:-../shared/fixtures/scifact-train}"
