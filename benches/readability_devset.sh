#!/usr/bin/env bash
# Builds a development set for readable extraction beyond the 20 given
# fixtures, from test pages that established extractors ship in their source
# distributions on PyPI, and a venv with two reference extractors to score
# beside ours (benches/readability_others.py).
#
# Lays each set out as the fixtures are: .data/readability-dev/<set>/<page>/
# source.html plus expected.txt (the reference main text). Nothing here is
# committed (.data is ignored by git) and nothing is redistributed.
#
# Sets and their licences (read before use; only sets whose licence allows
# copying and use are taken):
#   newspaper4k  MIT (LICENSE of the newspaper4k sdist, which covers its
#                tests/data): tests/data/html/<page>.html with the article
#                text newspaper keeps in tests/data/txt/<page>.txt. News pages
#                in English, Spanish, Latvian, Arabic, Chinese, Japanese,
#                Korean, Thai and Burmese.
# Looked at and not used: trafilatura (Apache-2.0) ships pages but its
# expected text lives only inside test code; readability-lxml, goose3,
# newspaper3k, justext, boilerpy3, breadability and readabilipy ship no test
# pages in their sdists; html-text ships pages with the whole page's text,
# not a main content; dragnet and extractnet sdists do not build their
# metadata here.
set -euo pipefail
cd "$(dirname "$0")/.."

DEV=.data/readability-dev
DL=.data/readability-downloads
VENV=.data/venv
NEWSPAPER4K=0.9.6
READABILITY_LXML=0.9
TRAFILATURA=2.3.1

mkdir -p "$DEV" "$DL"

if [ ! -x "$VENV/bin/python" ]; then
    python3 -m venv "$VENV"
    "$VENV/bin/pip" install -q --upgrade pip
fi
"$VENV/bin/pip" install -q "readability-lxml==$READABILITY_LXML" "trafilatura==$TRAFILATURA"

sdist="$DL/newspaper4k-$NEWSPAPER4K.tar.gz"
if [ ! -f "$sdist" ]; then
    "$VENV/bin/pip" download -q --no-deps --no-binary :all: "newspaper4k==$NEWSPAPER4K" -d "$DL"
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
tar -xzf "$sdist" -C "$work"
src="$work/newspaper4k-$NEWSPAPER4K"
out="$DEV/newspaper4k"
rm -rf "$out"
mkdir -p "$out"
cp "$src/LICENSE" "$out/LICENSE.newspaper4k"
count=0
for html in "$src"/tests/data/html/*.html; do
    name=$(basename "$html" .html)
    txt="$src/tests/data/txt/$name.txt"
    [ -f "$txt" ] || continue
    mkdir -p "$out/$name"
    cp "$html" "$out/$name/source.html"
    cp "$txt" "$out/$name/expected.txt"
    count=$((count + 1))
done
cat >"$out/README.md" <<EOF
# newspaper4k test pages ($count pages)

From the source distribution of newspaper4k $NEWSPAPER4K on PyPI
(tests/data/html and tests/data/txt), under the MIT licence
(LICENSE.newspaper4k here). Each folder holds \`source.html\` (the page as
saved) and \`expected.txt\` (the article text newspaper4k's tests expect: the
body paragraphs, without title, captions or lists of links). The pages
themselves are copies of news sites; they are used here only to measure
extraction locally and are never committed or redistributed.

Laid out by benches/readability_devset.sh; scored by benches/readability.sh.
EOF
echo "newspaper4k: $count pages in $out"
