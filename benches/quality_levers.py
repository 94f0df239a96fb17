"""Tries retrieval levers beyond the fusion offline, on SciFact's training claims.

    BENCH_QUALITY_DUMP=/tmp/quality.jsonl bash benches/quality.sh
    bash benches/quality_levers.sh /tmp/quality.jsonl

Reads the claims' vector and keyword passages from the quality benchmark's
dump (see benches/fusion_sweep.py), every passage's stored embedding from
the benchmark's database, and embeds what a lever needs with the same
model through ONNX Runtime (the graph of benches/embed_onnx.py, which
matches our engine to a cosine of 0.999+). Abstracts are ranked and scored
as benches/quality.sh scores the tool (nDCG@10 and recall@50, abstracts by
their best passage), and every list is scaled as the default fusion scales
it (mean ± 3 standard deviations to 0..1) before a weighted sum.

The levers:

- dense pseudo-relevance feedback (Rocchio): the query vector plus beta
  times the mean of the top k passages' vectors (of the fused, the vector
  or the keyword list), searched again exactly over every passage, and
  fused with the keyword list;
- a bonus for passages both retrievers found (CombMNZ-style);
- fusing abstracts rather than passages (each side's best passage per
  abstract, optionally plus a share of its second best);
- one vector per abstract for its title, as a third list;
- one vector per sentence (the sentence alone, and the title followed by
  the sentence), an abstract scored by its best sentence: alone, fused
  with the keyword list, three ways with the passage vectors too, and as a
  reranker of the two lists' candidates only (at several weights and
  depths, to show how sharp its best setting is);
- other keyword units, each scored by BM25 written here (Snowball's
  English stemmer, as Tantivy's, and one field): whole abstracts, the
  title in the text or left out; passages with their title in the text;
  single sentences, an abstract scored by its best. Each alone, fused with
  the passage vectors, and fused with the title + sentence vectors;
- the forms the server could search, scored as the tool scores itself
  (passage lists 150 deep, fused passage by passage, abstracts by their
  best passage): passage vectors, title + sentence vectors and late-chunked
  title + piece vectors (each passage through the model once, its pieces
  pooled from the same pass), against our keyword list's replica, passages
  with their title in the text, and either with a share of the whole
  abstract's BM25 added to each passage's score.

The sentence vectors (about 45,000 per variant; some 8 minutes each on two
cores) and the late-chunked vectors (some 6 minutes) are kept in CACHE and
reused.
"""

import argparse
import collections
import hashlib
import json
import math
import pathlib
import re
import subprocess
import sys

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).parent))
from embed_onnx import build_graph  # noqa: E402
from fusion_sweep import abstracts, ndcg, recall, scaled_scores  # noqa: E402

# Sentence ends: . ! or ? then space, then what starts a sentence.
SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9(\[])")
# Words as Tantivy's default tokenizer cuts them: runs of letters and digits.
WORD = re.compile(r"[^\W_]+")


class Terms:
    """Lower-cased, stemmed words, as our keyword index holds them."""

    def __init__(self):
        import snowballstemmer

        self.stemmer = snowballstemmer.stemmer("english")
        self.known = {}

    def __call__(self, text):
        out = []
        for word in WORD.findall(text.lower()):
            stem = self.known.get(word)
            if stem is None:
                stem = self.known[word] = self.stemmer.stemWord(word)
            out.append(stem)
        return out


class Bm25:
    """BM25 over one field of a fixed set of units (Lucene's idf)."""

    def __init__(self, units, k1, b):
        self.k1, self.b = k1, b
        self.postings = collections.defaultdict(list)
        self.lengths = np.array([len(u) for u in units], dtype=np.float64)
        for i, unit in enumerate(units):
            for term, count in collections.Counter(unit).items():
                self.postings[term].append((i, count))
        self.norm = k1 * (1 - b + b * self.lengths / max(self.lengths.mean(), 1e-9))

    def scores(self, terms):
        n = len(self.lengths)
        total = np.zeros(n)
        for term in set(terms):
            posting = self.postings.get(term)
            if not posting:
                continue
            idf = math.log(1 + (n - len(posting) + 0.5) / (len(posting) + 0.5))
            units = np.fromiter((i for i, _ in posting), dtype=np.int64, count=len(posting))
            tf = np.fromiter((c for _, c in posting), dtype=np.float64, count=len(posting))
            total[units] += idf * tf * (self.k1 + 1) / (tf + self.norm[units])
        return total


def top(scores, keys, n=50):
    """The n best (key, score) pairs, best first."""
    n = min(n, len(scores))
    best = np.argpartition(-scores, n - 1)[:n]
    best = best[np.argsort(-scores[best], kind="stable")]
    return [(keys[i], float(scores[i])) for i in best]


class Encoder:
    def __init__(self, model_dir):
        import onnx
        import onnxruntime as ort
        from tokenizers import Tokenizer

        graph = build_graph(model_dir)
        # The last hidden state (a row per word piece, before the mean pooling)
        # as a second output, for late chunking.
        pooled = next(n for n in reversed(graph.graph.node) if n.op_type == "ReduceMean").input[0]
        graph.graph.output.append(onnx.helper.make_tensor_value_info(pooled, onnx.TensorProto.FLOAT, None))
        options = ort.SessionOptions()
        options.intra_op_num_threads = 2
        self.session = ort.InferenceSession(graph.SerializeToString(), options, providers=["CPUExecutionProvider"])
        self.tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
        self.tokenizer.no_padding()
        # Our engine reads at most 256 word pieces, as the model was trained.
        self.tokenizer.enable_truncation(256)

    def __call__(self, text):
        return self.pieces(text)[0]

    def pieces(self, text):
        """The text's embedding, its word pieces' last hidden states and their
        character spans in the text."""
        encoding = self.tokenizer.encode(text)
        ids = np.array(encoding.ids, dtype=np.int64)
        embedding, hidden = self.session.run(None, {"input_ids": ids})
        return embedding[0], np.asarray(hidden).reshape(len(ids), -1), encoding.offsets


def passage_vectors(db_url):
    """Every passage's id, abstract and stored embedding."""
    sql = (
        "COPY (SELECT c.id, regexp_replace(d.path, '\\.txt$', ''), c.embedding::text, c.text"
        " FROM chunks c JOIN documents d ON d.id = c.document_id) TO STDOUT"
    )
    # Row-level security holds for the owner too: read as the system scope.
    out = subprocess.run(
        ["psql", db_url, "-Atq", "-c", "BEGIN", "-c", "SET LOCAL data_plane.system = on", "-c", sql, "-c", "COMMIT"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    ids, docs, vectors, texts = [], [], [], []
    for line in out.splitlines():
        chunk, doc, vector, text = line.split("\t")
        ids.append(int(chunk))
        docs.append(doc)
        vectors.append(json.loads(vector))
        # COPY's text format escapes these; the words are all BM25 needs.
        texts.append(text.replace("\\n", " ").replace("\\t", " ").replace("\\r", " "))
    return np.array(ids), docs, np.array(vectors, dtype=np.float32), texts


def abstract_sentences(corpus):
    """(abstract, sentence) for every sentence of every abstract's text, in order."""
    for doc in corpus:
        for sentence in SENTENCE_END.split(doc["text"].strip()):
            if sentence.strip():
                yield doc, sentence


def sentence_vectors(corpus, encode, cache, with_title):
    name = "title-sentence" if with_title else "sentence"
    vectors_file, docs_file = cache / f"{name}.npy", cache / f"{name}.json"
    if vectors_file.exists() and docs_file.exists():
        return json.loads(docs_file.read_text()), np.load(vectors_file)
    print(f"embedding every {name} of the corpus (once; kept in {cache})", file=sys.stderr, flush=True)
    docs, vectors = [], []
    for doc, sentence in abstract_sentences(corpus):
        docs.append(doc["_id"])
        vectors.append(encode(f"{doc['title']}\n\n{sentence}" if with_title else sentence))
    cache.mkdir(parents=True, exist_ok=True)
    np.save(vectors_file, np.array(vectors, dtype=np.float32))
    docs_file.write_text(json.dumps(docs))
    return docs, np.load(vectors_file)


def late_vectors(ids, docs, texts, title_of, encoder, cache):
    """Late chunking: each passage's embedding input (title, blank line,
    passage) goes through the model once, as ingestion embeds it, and each
    piece of the passage (its title line, its sentences) gets the mean of its
    own and the title's word pieces' last hidden states. No embedding beyond
    what ingestion does already. Returns each piece's passage (a row of
    `ids`) and its vector."""
    key = hashlib.sha1("\n".join(f"{i}\t{t}" for i, t in zip(ids.tolist(), texts)).encode()).hexdigest()[:12]
    path = cache / f"late-title-piece-{key}.npz"
    if path.exists():
        saved = np.load(path)
        return saved["owner"], saved["pieces"]
    print(f"late chunking every passage (once; kept in {path})", file=sys.stderr, flush=True)
    owner, pieces = [], []
    for row, (text, doc) in enumerate(zip(texts, docs)):
        title, body = title_of[doc].strip(), text.strip()
        prefix = f"{title}\n\n"
        spans, at = [], 0
        if body.startswith(title):  # the first passage: its title line is a piece
            spans.append((0, len(title)))
            at = len(title)
        for sentence in SENTENCE_END.split(body[at:]):
            sentence = sentence.strip()
            if sentence:
                start = body.index(sentence, at)
                spans.append((start, start + len(sentence)))
                at = start + len(sentence)
        _, hidden, offsets = encoder.pieces(prefix + body)
        starts = np.array([a for a, _ in offsets])
        ends = np.array([b for _, b in offsets])
        real = ends > starts  # [CLS] and [SEP] span nothing
        in_title = real & (ends <= len(title))
        for a, b in spans:
            inside = real & (starts >= len(prefix) + a) & (ends <= len(prefix) + b)
            if inside.any():  # a piece past the 256th word piece was not read
                vector = hidden[inside | in_title].mean(axis=0)
                pieces.append(vector / np.linalg.norm(vector))
                owner.append(row)
    cache.mkdir(parents=True, exist_ok=True)
    np.savez(path, owner=np.array(owner), pieces=np.array(pieces, dtype=np.float32))
    return np.array(owner), np.array(pieces, dtype=np.float32)


def sentence_passages(sentence_docs, sentences, docs, texts):
    """(sentence, passage) pairs: which passages (rows of `docs`) hold each
    sentence of its abstract (two where passages overlap)."""
    rows_of = collections.defaultdict(list)
    for row, doc in enumerate(docs):
        rows_of[doc].append(row)
    flat = [" ".join(t.split()) for t in texts]
    pairs = []
    for index, (doc, sentence) in enumerate(zip(sentence_docs, sentences)):
        words = " ".join(sentence.split())
        for row in rows_of[doc]:
            if words[:60] in flat[row] or words[-60:] in flat[row]:
                pairs.append((index, row))
    return np.array(pairs)


def scaled(items):
    """(key, score) pairs with the scores on the default fusion's scale."""
    if not items:
        return []
    return list(zip((k for k, _ in items), scaled_scores([v for _, v in items], "mean-3sd", False)))


def fuse(lists):
    """Weighted sum of scaled lists of (key, score), best first."""
    total = {}
    for items, weight in lists:
        for key, value in scaled(items):
            total[key] = total.get(key, 0.0) + weight * value
    return sorted(total, key=lambda k: -total[k])


def by_abstract(hits):
    """A passage list as (abstract, its best passage's score), best first."""
    best = {}
    for _, doc, score in hits:
        best.setdefault(doc, score)
    return list(best.items())


def passages(hits):
    return [(chunk, score) for chunk, _, score in hits]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("dump", type=pathlib.Path)
    parser.add_argument("--fixture", type=pathlib.Path, default=pathlib.Path("../shared/fixtures/scifact-train"))
    parser.add_argument("--model", type=pathlib.Path, required=True)
    parser.add_argument("--db", required=True, help="the quality benchmark's database (owner URL)")
    parser.add_argument("--cache", type=pathlib.Path, default=pathlib.Path(".data/bench/quality-levers"))
    args = parser.parse_args()

    rows = [json.loads(line) for line in args.dump.open()]
    claims = {q["_id"]: q["text"] for q in map(json.loads, (args.fixture / "queries.jsonl").open())}
    corpus = [json.loads(line) for line in (args.fixture / "corpus.jsonl").open()]
    encode = Encoder(args.model)
    query = {r["id"]: encode(claims[r["id"]]) for r in rows}
    ids, docs, vectors, texts = passage_vectors(args.db)
    row_of = {chunk: i for i, chunk in enumerate(ids)}
    doc_of = dict(zip(ids.tolist(), docs))

    baseline = []

    def report(name, rank, against=None):
        """rank(row) gives abstracts best first. Prints the mean nDCG@10 and
        recall@50, and the paired difference in nDCG@10 from the default
        fusion (or from `against`, per-claim scores), with one standard error
        over the claims. Returns the per-claim nDCG@10."""
        n, r = [], []
        for row in rows:
            ranked = rank(row)
            n.append(ndcg(ranked, row["relevant"]))
            r.append(recall(ranked, row["relevant"]))
        n = np.array(n)
        if not baseline:
            baseline.append(n)
        diff = n - (baseline[0] if against is None else against)
        error = diff.std(ddof=1) / np.sqrt(len(diff))
        print(
            f"{name:66} ndcg@10 {n.mean():.4f} ({diff.mean():+.4f} ± {error:.4f})  recall@50 {np.mean(r):.4f}",
            flush=True,
        )
        return n

    def held_out(name, ranks, against=None, against_name="the default fusion"):
        """ranks: a rank function per setting. Picks the best setting on a random half of
        the claims and scores it on the other half, both ways, over 200 splits: what the
        lever is worth when its setting is not chosen on the claims it is scored on."""
        scores = np.array([[ndcg(rank(row), row["relevant"]) for row in rows] for rank in ranks.values()])
        generator = np.random.default_rng(7)
        gains = []
        for _ in range(200):
            order = generator.permutation(len(rows))
            halves = (order[: len(rows) // 2], order[len(rows) // 2 :])
            for chosen_on, scored_on in (halves, halves[::-1]):
                best = scores[:, chosen_on].mean(axis=1).argmax()
                reference = baseline[0] if against is None else against
                gains.append(scores[best, scored_on].mean() - reference[scored_on].mean())
        gains = np.array(gains)
        print(
            f"{name:66} held out: {gains.mean():+.4f} over {against_name}"
            f" (5-95%: {np.percentile(gains, 5):+.4f} to {np.percentile(gains, 95):+.4f})",
            flush=True,
        )

    def as_abstracts(order):
        return abstracts(doc_of[c] for c in order)

    def hybrid(row, vector_weight=0.5):
        return fuse([(passages(row["vector"]), vector_weight), (passages(row["keyword"]), 1 - vector_weight)])

    report("the default fusion (mean-3sd, 0.5)", lambda row: as_abstracts(hybrid(row)))
    # The lists below that score abstracts fuse abstracts; this is their baseline.
    report(
        "the default fusion of abstracts (each list's best passage)",
        lambda row: fuse([(by_abstract(row["vector"]), 0.5), (by_abstract(row["keyword"]), 0.5)]),
    )

    # Dense pseudo-relevance feedback.
    def nearest(vector, n=50):
        scores = vectors @ vector
        top = np.argpartition(-scores, n)[:n]
        top = top[np.argsort(-scores[top])]
        return [(int(ids[i]), float(scores[i])) for i in top]

    def feedback(source, k, beta):
        def rank(row):
            if source == "fused":
                top = hybrid(row)[:k]
            else:
                top = [h[0] for h in row[source][:k]]
            moved = query[row["id"]].copy()
            if top:  # a list can be empty (a claim no keyword matches)
                moved += beta * vectors[[row_of[c] for c in top]].mean(axis=0)
                moved /= np.linalg.norm(moved)
            return as_abstracts(fuse([(nearest(moved), 0.5), (passages(row["keyword"]), 0.5)]))

        return rank

    for source in ("fused", "vector", "keyword"):
        for k in (3, 5, 10):
            for beta in (0.5, 1.0, 2.0):
                report(f"dense feedback from {source} top {k}, beta {beta}", feedback(source, k, beta))

    # A bonus for passages found by both retrievers.
    def both_bonus(bonus):
        def rank(row):
            found = {}
            for side in ("vector", "keyword"):
                for chunk, _, _ in row[side]:
                    found[chunk] = found.get(chunk, 0) + 1
            total = {}
            for side in ("vector", "keyword"):
                for chunk, value in scaled(passages(row[side])):
                    total[chunk] = total.get(chunk, 0.0) + 0.5 * value
            order = sorted(total, key=lambda c: -total[c] * (1 + bonus * (found[c] - 1)))
            return as_abstracts(order)

        return rank

    for bonus in (0.1, 0.3):
        report(f"found by both: score x {1 + bonus}", both_bonus(bonus))

    # Abstracts fused instead of passages.
    def abstract_fusion(vector_weight, second):
        def rank(row):
            total = {}
            for side, weight in (("vector", vector_weight), ("keyword", 1 - vector_weight)):
                per = {}
                for chunk, value in scaled(passages(row[side])):
                    per.setdefault(doc_of[chunk], []).append(value)
                for doc, values in per.items():
                    values.sort(reverse=True)
                    extra = second * values[1] if len(values) > 1 else 0.0
                    total[doc] = total.get(doc, 0.0) + weight * (values[0] + extra)
            return sorted(total, key=lambda d: -total[d])

        return rank

    for vector_weight in (0.45, 0.5, 0.55):
        for second in (0.0, 0.1, 0.3):
            report(f"abstracts fused, vector {vector_weight}, second best x {second}", abstract_fusion(vector_weight, second))

    # Title vectors as a third list.
    titles = np.array([encode(doc["title"]) for doc in corpus], dtype=np.float32)
    title_ids = [doc["_id"] for doc in corpus]

    def title_list(row, n=50):
        scores = titles @ query[row["id"]]
        top = np.argsort(-scores)[:n]
        return [(title_ids[i], float(scores[i])) for i in top]

    report("title vectors alone", lambda row: [d for d, _ in title_list(row)])
    for title_weight in (0.05, 0.1, 0.2):
        report(
            f"titles {title_weight}, passage vectors {0.5 - title_weight / 2:.3f}, keyword",
            lambda row: fuse(
                [
                    (title_list(row), title_weight),
                    (by_abstract(row["vector"]), 0.5 - title_weight / 2),
                    (by_abstract(row["keyword"]), 0.5 - title_weight / 2),
                ]
            ),
        )

    # Sentence vectors, an abstract scored by its best sentence.
    for with_title in (False, True):
        name = "title + sentence" if with_title else "sentence"
        sentence_docs, sentence_vecs = sentence_vectors(corpus, encode, args.cache, with_title)
        unique, index = np.unique(np.array(sentence_docs), return_inverse=True)
        position = {d: i for i, d in enumerate(unique)}
        best_of = {}
        for row in rows:
            best = np.full(len(unique), -1.0)
            np.maximum.at(best, index, sentence_vecs @ query[row["id"]])
            best_of[row["id"]] = best

        def sentence_list(row, n=50):
            best = best_of[row["id"]]
            order = np.argsort(-best)[:n]
            return [(unique[i], float(best[i])) for i in order]

        def candidates_only(row, deep=50):
            best = best_of[row["id"]]
            found = {d for _, d, _ in row["vector"][:deep]} | {d for _, d, _ in row["keyword"][:deep]}
            return sorted(((d, float(best[position[d]])) for d in found), key=lambda x: -x[1])

        report(f"{name} vectors alone", lambda row: [d for d, _ in sentence_list(row)])
        for weight in (0.4, 0.5, 0.6):
            report(
                f"{name} vectors {weight}, keyword {1 - weight:.1f}",
                lambda row: fuse([(sentence_list(row), weight), (by_abstract(row["keyword"]), 1 - weight)]),
            )
        for ws, wv in ((0.45, 0.1), (0.3, 0.2), (0.2, 0.3)):
            report(
                f"{name} {ws}, passage vectors {wv}, keyword {1 - ws - wv:.2f}",
                lambda row: fuse(
                    [
                        (sentence_list(row), ws),
                        (by_abstract(row["vector"]), wv),
                        (by_abstract(row["keyword"]), 1 - ws - wv),
                    ]
                ),
            )
        held_out(
            f"{name} vectors against the keyword list, weight 0.35-0.65",
            {
                weight: (
                    lambda row, weight=weight: fuse(
                        [(sentence_list(row), weight), (by_abstract(row["keyword"]), 1 - weight)]
                    )
                )
                for weight in (0.35, 0.4, 0.45, 0.5, 0.55, 0.6, 0.65)
            },
        )
        # How sharp the reranker's best setting is: its neighbours in weight and depth.
        for wc, wv, deep in ((0.4, 0.2, 50), (0.3, 0.2, 50), (0.4, 0.1, 50), (0.5, 0.1, 50), (0.4, 0.2, 20), (0.4, 0.2, 10)):
            report(
                f"{name} reranking the candidates {deep} deep {wc}, passages {wv}, keyword {1 - wc - wv:.1f}",
                lambda row: fuse(
                    [
                        (candidates_only(row, deep), wc),
                        (by_abstract(row["vector"]), wv),
                        (by_abstract(row["keyword"]), 1 - wc - wv),
                    ]
                ),
            )

    # Other keyword units. `sentence_list` is the title + sentence vectors' list now.
    terms = Terms()
    claim_terms = {row["id"]: terms(claims[row["id"]]) for row in rows}
    abstract_ids = [doc["_id"] for doc in corpus]
    title_of = {doc["_id"]: doc["title"] for doc in corpus}
    id_list = ids.tolist()
    sentences, sentence_of = [], []
    for doc, sentence in abstract_sentences(corpus):
        sentences.append(terms(sentence))
        sentence_of.append(doc["_id"])
    sentence_abstracts, sentence_index = np.unique(np.array(sentence_of), return_inverse=True)
    units = {
        "whole abstracts, title in the text": (
            [terms(f"{doc['title']} {doc['text']}") for doc in corpus],
            "abstract",
        ),
        "whole abstracts, no title": ([terms(doc["text"]) for doc in corpus], "abstract"),
        # A passage that is the title alone (a title too long to join the first
        # paragraph) is not given it twice.
        "passages, title in the text": (
            [terms(text if text.strip() == title_of[d].strip() else f"{title_of[d]} {text}") for text, d in zip(texts, docs)],
            "passage",
        ),
        "sentences, an abstract by its best": (sentences, "sentence"),
    }
    for unit, (tokens, kind) in units.items():
        for k1, b in ((0.5, 0.4), (1.2, 0.75), (1.2, 0.9)):
            bm25 = Bm25(tokens, k1, b)

            def unit_list(row):
                scores = bm25.scores(claim_terms[row["id"]])
                if kind == "abstract":
                    return top(scores, abstract_ids)
                if kind == "sentence":
                    best = np.zeros(len(sentence_abstracts))
                    np.maximum.at(best, sentence_index, scores)
                    return top(best, sentence_abstracts)
                return by_abstract((c, doc_of[c], v) for c, v in top(scores, id_list, 150))

            lists = {row["id"]: unit_list(row) for row in rows}
            label = f"BM25 of {unit}, k1 {k1} b {b}"
            report(f"{label}: alone", lambda row: [d for d, _ in lists[row["id"]]])
            report(
                f"{label}: 0.5, passage vectors 0.5",
                lambda row: fuse([(by_abstract(row["vector"]), 0.5), (lists[row["id"]], 0.5)]),
            )
            report(
                f"{label}: 0.5, title + sentence vectors 0.5",
                lambda row: fuse([(sentence_list(row), 0.5), (lists[row["id"]], 0.5)]),
            )
            held_out(
                f"{label}: title + sentence vectors 0.4-0.6",
                {
                    weight: (
                        lambda row, weight=weight: fuse(
                            [(sentence_list(row), weight), (lists[row["id"]], 1 - weight)]
                        )
                    )
                    for weight in (0.4, 0.45, 0.5, 0.55, 0.6)
                },
            )


    # The forms the server could search: passage lists 150 deep (the tool's
    # depth at `limit: 50`), fused passage by passage, abstracts ranked by
    # their best passage. The lists above are abstracts, 50 deep.
    print("--- passage lists, 150 deep, fused passage by passage", flush=True)
    deep = 150
    exact = {row["id"]: top(vectors @ query[row["id"]], id_list, deep) for row in rows}
    passage_units = units["passages, title in the text"][0]
    text_bm25 = Bm25([terms(text) for text in texts], 0.5, 0.4)
    title_bm25 = Bm25([terms(title_of[d]) for d in docs], 0.5, 0.4)
    in_text_bm25 = Bm25(passage_units, 0.5, 0.4)
    abstract_bm25 = Bm25(units["whole abstracts, title in the text"][0], 1.2, 0.75)
    row_of_abstract = {doc: i for i, doc in enumerate(abstract_ids)}
    passage_abstract = np.array([row_of_abstract[d] for d in docs])

    def keyword_scores(kind, claim):
        words = claim_terms[claim]
        if kind == "ours":  # our index: the text, and the title as a field of weight 0.2
            return text_bm25.scores(words) + 0.2 * title_bm25.scores(words)
        return in_text_bm25.scores(words)

    def with_abstract(scores, claim, share):
        """Each passage's score plus a share of its whole abstract's BM25, both
        divided by their best."""
        whole = abstract_bm25.scores(claim_terms[claim])
        return scores / max(scores.max(), 1e-9) + share * whole[passage_abstract] / max(whole.max(), 1e-9)

    keyword_lists = {}
    for kind in ("ours", "title in the text"):
        keyword_lists[kind] = {row["id"]: top(keyword_scores(kind, row["id"]), id_list, deep) for row in rows}
        for share in (0.5, 1.0):
            keyword_lists[f"{kind}, + {share} x its abstract's BM25"] = {
                row["id"]: top(with_abstract(keyword_scores(kind, row["id"]), row["id"], share), id_list, deep)
                for row in rows
            }

    # Title + sentence vectors, a passage scored by its best sentence.
    sentence_docs, sentence_vecs = sentence_vectors(corpus, encode, args.cache, True)
    pairs = sentence_passages(sentence_docs, [s for _, s in abstract_sentences(corpus)], docs, texts)
    # Late chunking: title + piece vectors from the passage's own pass.
    late_owner, late_pieces = late_vectors(ids, docs, texts, title_of, encode, args.cache)
    dense_lists = {"passage vectors": exact}
    dense_lists["title + sentence vectors"] = {}
    for row in rows:
        best = np.full(len(ids), -1.0)
        np.maximum.at(best, pairs[:, 1], (sentence_vecs @ query[row["id"]])[pairs[:, 0]])
        dense_lists["title + sentence vectors"][row["id"]] = top(best, id_list, deep)
    for mix in (0.0, 0.3):
        mixed = late_pieces + mix * vectors[late_owner]
        mixed /= np.linalg.norm(mixed, axis=1, keepdims=True)
        name = f"late title + piece vectors ({mix} x the passage's added), or the passage's"
        dense_lists[name] = {}
        for row in rows:
            best = vectors @ query[row["id"]]
            np.maximum.at(best, late_owner, mixed @ query[row["id"]])
            dense_lists[name][row["id"]] = top(best, id_list, deep)

    # Differences in this part are from today's lists in this form.
    today = report(
        "today's lists in this form (passage vectors 0.5, keyword (ours) 0.5)",
        lambda row: as_abstracts(fuse([(exact[row["id"]], 0.5), (keyword_lists["ours"][row["id"]], 0.5)])),
    )
    for dense, dense_list in dense_lists.items():
        report(f"{dense} alone", lambda row: as_abstracts(c for c, _ in dense_list[row["id"]]), today)
        for kind, keyword_list in keyword_lists.items():
            report(
                f"{dense} 0.5, keyword ({kind}) 0.5",
                lambda row: as_abstracts(fuse([(dense_list[row["id"]], 0.5), (keyword_list[row["id"]], 0.5)])),
                today,
            )
        for kind in ("ours", "title in the text"):
            held_out(
                f"{dense}, keyword ({kind}), 0.4-0.6",
                {
                    weight: (
                        lambda row, weight=weight, keyword_list=keyword_lists[kind]: as_abstracts(
                            fuse([(dense_list[row["id"]], weight), (keyword_list[row["id"]], 1 - weight)])
                        )
                    )
                    for weight in (0.4, 0.45, 0.5, 0.55, 0.6)
                },
                today,
                "today's lists in this form",
            )


if __name__ == "__main__":
    main()
