"""Ranking metrics for one query, their means, and latency percentiles: pure functions.

Conventions follow trec_eval / pytrec_eval (what BEIR reports), so figures are comparable
with published ones:

- ``ranking`` is a list of document ids, best first, without repeats.
- ``qrels`` maps document id -> graded relevance; a grade above 0 means relevant.
- nDCG uses the grade itself as gain (trec_eval's ``ndcg_cut``), discounted by
  log2(rank + 1); the ideal ranking is all judged documents sorted by grade.
- Average precision divides by *all* relevant documents, found or not, so a
  shallow ranking cannot score well by returning few documents.
- Queries without any relevant document are not scored at all (the caller skips them),
  because every metric here would be undefined or trivially 0 for them.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

Qrels = Mapping[str, int]


def _relevant(qrels: Qrels) -> set[str]:
    return {doc for doc, grade in qrels.items() if grade > 0}


def dcg_at_k(gains: Sequence[float], k: int) -> float:
    return sum(g / math.log2(rank + 2) for rank, g in enumerate(gains[:k]))


def ndcg_at_k(ranking: Sequence[str], qrels: Qrels, k: int) -> float:
    """Graded nDCG@k: DCG of the ranking over DCG of the best possible ranking."""
    ideal = dcg_at_k(sorted((g for g in qrels.values() if g > 0), reverse=True), k)
    if ideal == 0:
        return 0.0
    gains = [max(qrels.get(doc, 0), 0) for doc in ranking[:k]]
    return dcg_at_k(gains, k) / ideal


def average_precision(ranking: Sequence[str], qrels: Qrels) -> float:
    """Mean of precision@rank over the ranks of relevant documents, over all relevant ones."""
    relevant = _relevant(qrels)
    if not relevant:
        return 0.0
    found, total = 0, 0.0
    for rank, doc in enumerate(ranking, 1):
        if doc in relevant:
            found += 1
            total += found / rank
    return total / len(relevant)


def reciprocal_rank(ranking: Sequence[str], qrels: Qrels, k: int) -> float:
    """1 / rank of the first relevant document within the top ``k``, else 0."""
    relevant = _relevant(qrels)
    return next((1.0 / rank for rank, d in enumerate(ranking[:k], 1) if d in relevant), 0.0)


def recall_at_k(ranking: Sequence[str], qrels: Qrels, k: int) -> float:
    relevant = _relevant(qrels)
    return len(relevant.intersection(ranking[:k])) / len(relevant) if relevant else 0.0


def hit_rate(ranking: Sequence[str], qrels: Qrels, k: int) -> float:
    """1 if any relevant document is in the top ``k``: "did the generator get anything"."""
    return float(bool(_relevant(qrels).intersection(ranking[:k])))


def query_metrics(ranking: Sequence[str], qrels: Qrels, depth: int) -> dict[str, float]:
    """The report's metrics for one query. Cut-offs deeper than ``depth`` are left out:
    Recall@100 of a 30-deep ranking would silently read as Recall@30."""
    out = {
        "ndcg@10": ndcg_at_k(ranking, qrels, 10),
        "map": average_precision(ranking[:depth], qrels),
        "mrr@10": reciprocal_rank(ranking, qrels, 10),
        "recall@10": recall_at_k(ranking, qrels, 10),
        "hit@10": hit_rate(ranking, qrels, 10),
    }
    if depth >= 100:
        out["recall@100"] = recall_at_k(ranking, qrels, 100)
    return out


def mean_metrics(per_query: Sequence[Mapping[str, float]]) -> dict[str, float]:
    """Macro average over queries (every query counts the same)."""
    if not per_query:
        return {}
    names = per_query[0].keys()
    return {name: sum(q[name] for q in per_query) / len(per_query) for name in names}


def percentile(values: Sequence[float], p: float) -> float:
    """Linear interpolation between closest ranks (numpy's default), ``p`` in 0..100."""
    if not values:
        raise ValueError("percentile of no values")
    ordered = sorted(values)
    position = (len(ordered) - 1) * p / 100
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def latency_summary(seconds: Sequence[float]) -> dict[str, float]:
    """Milliseconds: mean and the percentiles a latency budget is written against."""
    if not seconds:
        return {}
    ms = [s * 1000 for s in seconds]
    return {
        "mean_ms": sum(ms) / len(ms),
        "p50_ms": percentile(ms, 50),
        "p90_ms": percentile(ms, 90),
        "p95_ms": percentile(ms, 95),
        "p99_ms": percentile(ms, 99),
        "max_ms": max(ms),
    }


def wilson_interval(hits: int, total: int, z: float = 1.96) -> tuple[float, float]:
    """The 95% Wilson interval of ``hits / total``: what a proportion on a small sample
    can be trusted to be (26 of 27 is 96%, and the interval reaches down to 81%)."""
    if not total:
        return 0.0, 1.0
    p = hits / total
    centre = p + z * z / (2 * total)
    spread = z * math.sqrt(p * (1 - p) / total + z * z / (4 * total * total))
    return (centre - spread) / (1 + z * z / total), (centre + spread) / (1 + z * z / total)
