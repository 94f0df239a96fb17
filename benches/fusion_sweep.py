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
        for hits, weight in ((row.get("vector", []), vector_weight), (row.get("keyword", []), 1 - vector_weight)):
            hits = hits[:depth]
            if not hits:
                continue
            values = [h[2] for h in hits]
            lo, hi = min(values), max(values)
            for chunk, path, s in hits:
                if scale == "min-max":
                    scaled = (s - lo) / (hi - lo) if hi > lo else 1.0
                else:  # by the best only
                    scaled = s / hi if hi else 0.0
                score[chunk] = score.get(chunk, 0.0) + weight * scaled
                abstract[chunk] = path
        return abstracts(abstract[c] for c in sorted(score, key=lambda c: -score[c]))

    return fuse


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
    for depth in (10, 30):
        report(f"convex min-max 0.5 depth={depth}", convex(0.5, depth, "min-max"))


if __name__ == "__main__":
    main()
