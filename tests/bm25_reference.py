"""The keyword index this service had before it moved to SQLite FTS5: rank-bm25 in
memory, rebuilt from every chunk's tokens. Kept as the reference the FTS5 index must
score exactly like (tests/unit/test_keyword_index.py); the product no longer uses it.
bench/bench_scale.py measures the old code itself, from git, as its baseline."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from rank_bm25 import BM25Okapi

from tools.store.keyword_index import lucene_idf
from tools.text import tokenize


class LuceneBM25(BM25Okapi):
    """rank-bm25's Okapi BM25 (k1 1.5, b 0.75) with Lucene's never-negative idf."""

    def _calc_idf(self, nd: dict[str, int]) -> None:
        self.idf = {t: lucene_idf(self.corpus_size, df) for t, df in nd.items()}


class MemoryKeywordIndex:
    def __init__(self, ids: Sequence[str], token_lists: Sequence[Sequence[str]]) -> None:
        self.ids = list(ids)
        self._position = {cid: i for i, cid in enumerate(self.ids)}
        self._bm25 = LuceneBM25([list(t) or [""] for t in token_lists])

    def search(self, query: str, k: int) -> list[tuple[str, float]]:
        terms = tokenize(query)
        if not terms:
            return []
        scores = self._bm25.get_scores(terms)
        top = np.argsort(-scores, kind="stable")[:k]
        return [(self.ids[i], float(scores[i])) for i in top if scores[i] > 0]

    def scores(self, query: str, ids: Sequence[str]) -> dict[str, float]:
        terms = tokenize(query)
        known = [cid for cid in ids if cid in self._position]
        values = self._bm25.get_batch_scores(terms, [self._position[c] for c in known])
        return dict.fromkeys(ids, 0.0) | dict(zip(known, map(float, values), strict=True))
