"""Tries hybrid fusions offline on the lists the quality benchmark dumped.

    BENCH_QUALITY_DUMP=/tmp/quality.jsonl bash benches/quality.sh
    python3 benches/fusion_sweep.py /tmp/quality.jsonl

Each line of the dump holds one SciFact claim's vector and keyword passages
as search_documents returned them (`[chunk id, abstract, score]`, best
first, up to 50 each) and its judged abstracts. This script fuses them in
several ways and prints nDCG@10 and recall@50 per fusion, abstracts ranked
by their best passage, as benches/quality.sh scores the tool itself. It
only reorders what the retrievers returned, so it measures fusions, not
retrievers; the chosen one is then confirmed by benches/quality.sh.
"""

import json
import math
import statistics
import sys


def ndcg(ranked, relevant, k=10):
    dcg = sum(relevant.get(d, 0) / math.log2(i + 2) for i, d in enumerate(ranked[:k]))
    ideal = sorted(relevant.values(), reverse=True)
    idcg = sum(g / math.log2(i + 2) for i, g in enumerate(ideal[:k]))
    return dcg / idcg if idcg else 0.0


def recall(ranked, relevant, k=50):
    return sum(1 for d in ranked[:k] if d in relevant) / max(1, len(relevant))


def abstracts(order):
    seen, out = set(), []
    for a in order:
        if a not in seen:
            seen.add(a)
            out.append(a)
    return out


def rrf(k, depth):
    def fuse(row):
        score, abstract = {}, {}
        for hits in (row.get("vector", []), row.get("keyword", [])):
            for rank, (chunk, path, _) in enumerate(hits[:depth]):
                score[chunk] = score.get(chunk, 0.0) + 1.0 / (k + rank + 1)
                abstract[chunk] = path
        return abstracts(abstract[c] for c in sorted(score, key=lambda c: -score[c]))

    return fuse


def convex(vector_weight, depth, scale):
    def fuse(row):
        score, abstract = {}, {}
        for side, hits, weight in (
            ("vector", row.get("vector", []), vector_weight),
            ("keyword", row.get("keyword", []), 1 - vector_weight),
        ):
            hits = hits[:depth]
            if not hits:
                continue
            values = [h[2] for h in hits]
            for (chunk, path, _), scaled in zip(hits, scaled_scores(values, scale, side == "vector")):
                score[chunk] = score.get(chunk, 0.0) + weight * scaled
                abstract[chunk] = path
        return abstracts(abstract[c] for c in sorted(score, key=lambda c: -score[c]))

    return fuse


def scaled_scores(values, scale, is_vector):
    """One list's scores on the scale the fusion adds them on."""
    lo, hi = min(values), max(values)
    mean, sd = statistics.mean(values), statistics.pstdev(values) or 1.0
    if scale == "min-max":
        return [(v - lo) / (hi - lo) if hi > lo else 1.0 for v in values]
    if scale == "by-best":
        return [v / hi if hi else 0.0 for v in values]
    if scale == "z-score":
        return [(v - mean) / sd for v in values]
    if scale == "mean-3sd":  # distribution-based: mean ± 3 standard deviations to 0..1
        return [(v - mean + 3 * sd) / (6 * sd) for v in values]
    if scale == "cosine-as-is":  # the vector list's cosines unscaled, keyword by its best
        return values if is_vector else [v / hi if hi else 0.0 for v in values]
    raise ValueError(scale)


def main():
    rows = [json.loads(line) for line in open(sys.argv[1])]

    def report(name, fuse):
        n = [ndcg(fuse(r), r["relevant"]) for r in rows]
        c = [recall(fuse(r), r["relevant"]) for r in rows]
        print(f"{name:40} ndcg@10 {sum(n) / len(n):.4f}  recall@50 {sum(c) / len(c):.4f}")

    for k in (10, 30, 60, 100):
        report(f"rrf k={k} depth=50", rrf(k, 50))
    for depth in (10, 20, 30):
        report(f"rrf k=60 depth={depth}", rrf(60, depth))
    for scale in ("min-max", "by-best"):
        for w in (0.3, 0.4, 0.45, 0.5, 0.55, 0.6, 0.7):
            report(f"convex {scale} vector_weight={w}", convex(w, 50, scale))
    for scale in ("z-score", "mean-3sd", "cosine-as-is"):
        for w in (0.4, 0.5, 0.6):
            report(f"convex {scale} vector_weight={w}", convex(w, 50, scale))
    for depth in (10, 30):
        report(f"convex min-max 0.5 depth={depth}", convex(0.5, depth, "min-max"))


if __name__ == "__main__":
    main()
