"""Runs two reference extractors, readability-lxml and trafilatura, over
fixture sets laid out as source.html per page, and saves what each keeps so
examples/bench_readability.rs scores them with the same tokeniser and
scorer as ours, side by side.

Usage: readability_others.py OUT_DIR SET_DIR...
Writes OUT_DIR/<set>/<page>/readability-lxml.html (Document.summary()) and
OUT_DIR/<set>/<page>/trafilatura.txt (extract() with its defaults). Each
extractor is given the page's bytes and reads their charset itself, as it
would in use. Run with the venv benches/readability_devset.sh makes.
"""

import sys
from pathlib import Path

import trafilatura
from readability import Document


def main() -> None:
    out = Path(sys.argv[1])
    for set_dir in map(Path, sys.argv[2:]):
        pages = sorted(p for p in set_dir.iterdir() if (p / "source.html").is_file())
        for page in pages:
            raw = (page / "source.html").read_bytes()
            dest = out / set_dir.name / page.name
            dest.mkdir(parents=True, exist_ok=True)
            try:
                summary = Document(raw).summary()
            except Exception as e:  # a failure scores as an empty extraction
                print(f"readability-lxml failed on {page}: {e}", file=sys.stderr)
                summary = ""
            (dest / "readability-lxml.html").write_text(summary, encoding="utf-8")
            try:
                text = trafilatura.extract(raw) or ""
            except Exception as e:
                print(f"trafilatura failed on {page}: {e}", file=sys.stderr)
                text = ""
            (dest / "trafilatura.txt").write_text(text, encoding="utf-8")
        print(f"{set_dir.name}: {len(pages)} pages", file=sys.stderr)


if __name__ == "__main__":
    main()
