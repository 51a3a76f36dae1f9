"""BM25 keyword search (rank-bm25) over a collection's committed chunks.

Tokenisation matters more than the BM25 variant: lower-casing, dropping
punctuation and stopwords, and Snowball stemming lift nDCG@10 on CACM by about
0.15 over whitespace tokens (see the field notes), so every text goes through
``tokenize`` both at ingestion and at query time.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from functools import lru_cache

import numpy as np
import snowballstemmer
from rank_bm25 import BM25Okapi

# Stored chunk tokens must come from the same tokenisation as query tokens: bump this
# whenever ``tokenize`` changes, so old collections are rebuilt instead of mismatching.
TOKENIZER_VERSION = 1
_WORD = re.compile(r"[a-z0-9]+(?:['’][a-z]+)?")
_STEMMER = snowballstemmer.stemmer("english")
STOPWORDS = frozenset(
    """a about above after again against all am an and any are as at be because been before
    being below between both but by can did do does doing down during each few for from further
    had has have having he her here hers herself him himself his how i if in into is it its
    itself just me more most my myself no nor not now of off on once only or other our ours
    ourselves out over own same she should so some such than that the their theirs them
    themselves then there these they this those through to too under until up very was we were
    what when where which while who whom why will with you your yours yourself yourselves""".split()
)


class _LuceneBM25(BM25Okapi):
    """BM25 with Lucene's idf, log(1 + (N - n + 0.5) / (n + 0.5)), which is never negative.

    rank-bm25's Okapi idf goes negative for terms in over half the chunks, which in a
    small collection (a dozen pages all mentioning the product) zeroes out good matches.
    """

    def _calc_idf(self, nd: dict[str, int]) -> None:
        n = self.corpus_size
        self.idf = {t: math.log(1 + (n - df + 0.5) / (df + 0.5)) for t, df in nd.items()}


@lru_cache(maxsize=200_000)
def _stem(word: str) -> str:
    return _STEMMER.stemWord(word)


def tokenize(text: str) -> list[str]:
    return [_stem(w) for w in _WORD.findall(text.lower()) if w not in STOPWORDS]


class KeywordIndex:
    """An immutable BM25 index; rebuilt (cheaply) whenever the collection changes."""

    def __init__(self, ids: Sequence[str], token_lists: Sequence[Sequence[str]]) -> None:
        self.ids = list(ids)
        self._position = {cid: i for i, cid in enumerate(self.ids)}
        # rank-bm25 divides by the corpus size, so an empty corpus needs special-casing
        self._bm25 = _LuceneBM25([list(t) or [""] for t in token_lists]) if self.ids else None

    def search(self, query: str, k: int) -> list[tuple[str, float]]:
        """Top ``k`` (chunk id, BM25 score) pairs with a positive score, best first."""
        terms = tokenize(query)
        if self._bm25 is None or not terms:
            return []
        scores = self._bm25.get_scores(terms)
        top = np.argsort(-scores)[:k]
        return [(self.ids[i], float(scores[i])) for i in top if scores[i] > 0]

    def scores(self, query: str, ids: Sequence[str]) -> dict[str, float]:
        """BM25 score of each of ``ids`` (0 for an unknown id), however low it ranks."""
        terms = tokenize(query)
        known = [cid for cid in ids if cid in self._position]
        if self._bm25 is None or not terms or not known:
            return dict.fromkeys(ids, 0.0)
        values = self._bm25.get_batch_scores(terms, [self._position[c] for c in known])
        return dict.fromkeys(ids, 0.0) | dict(zip(known, map(float, values), strict=True))
