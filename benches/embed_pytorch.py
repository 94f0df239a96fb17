"""Reference side of the embedding benchmark: PyTorch sentence-transformers.

Three commands, all reading the model from the same directory the Rust crate uses:

  prepare   build the benchmark texts (chunks of ~100-250 word pieces of real prose;
            needs only the `tokenizers` package)
  bench     time sentence-transformers on those texts and print figures
  reference write reference vectors for the crate's correctness test fixture
"""

import argparse
import html.parser
import json
import pathlib
import re
import sys
import time


class _TextOnly(html.parser.HTMLParser):
    """Collects visible text of an HTML page, one paragraph per block element."""

    _SKIP = {"script", "style", "head", "title"}
    _BLOCKS = {"p", "li", "dd", "dt", "pre", "h1", "h2", "h3", "h4", "td", "div", "tr"}

    def __init__(self):
        super().__init__()
        self.parts = []
        self._skip_depth = 0

    def handle_starttag(self, tag, attrs):
        if tag in self._SKIP:
            self._skip_depth += 1
        elif tag in self._BLOCKS:
            self.parts.append("\n\n")

    def handle_endtag(self, tag):
        if tag in self._SKIP and self._skip_depth:
            self._skip_depth -= 1
        elif tag in self._BLOCKS:
            self.parts.append("\n\n")

    def handle_data(self, data):
        if not self._skip_depth:
            self.parts.append(data)


def _paragraphs(path):
    raw = path.read_text(encoding="utf-8", errors="replace")
    if path.suffix in (".html", ".htm"):
        parser = _TextOnly()
        parser.feed(raw)
        raw = "".join(parser.parts)
    for block in re.split(r"\n\s*\n", raw):
        text = " ".join(block.split())
        # Navigation crumbs and table cells are not prose.
        if len(text.split()) >= 8:
            yield text


def _sources(corpus):
    corpus = pathlib.Path(corpus)
    files = []
    if corpus.is_dir():
        files = sorted(p for p in corpus.rglob("*") if p.suffix in (".html", ".htm", ".md", ".txt"))
    if not files:
        files = sorted(p for p in pathlib.Path("/usr/share/common-licenses").glob("*") if p.is_file())
    return files


def prepare(args):
    # The model's own tokenizer file through the `tokenizers` package alone,
    # so the texts can be made without PyTorch (benches/embed.sh makes them
    # with ONNX Runtime's small venv): word pieces without [CLS] and [SEP].
    from tokenizers import Tokenizer

    wordpieces = Tokenizer.from_file(str(pathlib.Path(args.model) / "tokenizer.json"))
    wordpieces.no_truncation()
    wordpieces.no_padding()

    class _Pieces:
        @staticmethod
        def tokenize(text):
            return wordpieces.encode(text, add_special_tokens=False).tokens

    tokenizer = _Pieces()
    # Targets cycle evenly through 100..250 word pieces, like a chunker's output.
    targets = [100 + (i * 37) % 151 for i in range(args.count)]
    texts, current, current_tokens = [], [], 0
    for path in _sources(args.corpus):
        for paragraph in _paragraphs(path):
            for sentence in re.split(r"(?<=[.!?])\s+", paragraph):
                n = len(tokenizer.tokenize(sentence))
                if n > 250:
                    continue  # a code listing or table flattened into one line
                if current and current_tokens + n > targets[len(texts)] + 20:
                    texts.append(" ".join(current))
                    current, current_tokens = [], 0
                    if len(texts) == args.count:
                        break
                current.append(sentence)
                current_tokens += n
                if current_tokens >= targets[len(texts)]:
                    texts.append(" ".join(current))
                    current, current_tokens = [], 0
                    if len(texts) == args.count:
                        break
            if len(texts) == args.count:
                break
        if len(texts) == args.count:
            break
    if len(texts) < args.count:
        sys.exit(f"only {len(texts)} texts of prose found under {args.corpus}, {args.count} wanted")
    pathlib.Path(args.out).write_text(json.dumps(texts), encoding="utf-8")


def bench(args):
    import torch
    from sentence_transformers import SentenceTransformer

    torch.set_num_threads(args.threads)
    texts = json.loads(pathlib.Path(args.texts).read_text(encoding="utf-8"))
    model = SentenceTransformer(args.model, device="cpu")
    model.max_seq_length = 256
    tokens = sum(min(len(ids), 256) for ids in model.tokenizer(texts)["input_ids"])
    model.encode(texts[: args.batch_size], batch_size=args.batch_size)  # warm-up
    best = None
    for _ in range(args.repeat):
        start = time.perf_counter()
        with torch.inference_mode():
            model.encode(texts, batch_size=args.batch_size, normalize_embeddings=True)
        elapsed = time.perf_counter() - start
        best = elapsed if best is None else min(best, elapsed)
    print(f"embed.pytorch.texts {len(texts)}")
    print(f"embed.pytorch.threads {args.threads}")
    print(f"embed.pytorch.batch_size {args.batch_size}")
    print(f"embed.pytorch.seconds {best:.3f}")
    print(f"embed.pytorch.sentences_per_s {len(texts) / best:.1f}")
    print(f"embed.pytorch.tokens_per_s {tokens / best:.0f}")


def reference(args):
    from sentence_transformers import SentenceTransformer

    sentences = json.loads(pathlib.Path(args.sentences).read_text(encoding="utf-8"))
    model = SentenceTransformer(args.model, device="cpu")
    model.max_seq_length = 256
    vectors = model.encode(sentences, normalize_embeddings=True)
    fixture = [
        {"text": text, "embedding": [round(float(x), 7) for x in vector]}
        for text, vector in zip(sentences, vectors)
    ]
    # One entry per line keeps the committed fixture readable in a diff.
    lines = ",\n".join(json.dumps(entry, ensure_ascii=False) for entry in fixture)
    pathlib.Path(args.out).write_text("[\n" + lines + "\n]\n", encoding="utf-8")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("prepare")
    p.add_argument("--model", required=True)
    p.add_argument("--corpus", required=True)
    p.add_argument("--count", type=int, default=500)
    p.add_argument("--out", required=True)
    b = sub.add_parser("bench")
    b.add_argument("--model", required=True)
    b.add_argument("--texts", required=True)
    b.add_argument("--threads", type=int, default=2)
    b.add_argument("--batch-size", type=int, default=32)
    b.add_argument("--repeat", type=int, default=2)
    r = sub.add_parser("reference")
    r.add_argument("--model", required=True)
    r.add_argument("--sentences", required=True)
    r.add_argument("--out", required=True)
    args = parser.parse_args()
    {"prepare": prepare, "bench": bench, "reference": reference}[args.command](args)


if __name__ == "__main__":
    main()
