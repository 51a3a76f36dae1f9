"""BM25 keyword search over a collection's committed chunks, on disk in its manifest.

Tokenisation matters more than the BM25 variant: lower-casing, dropping
punctuation and stopwords, and Snowball stemming lift nDCG@10 on CACM by about
0.15 over whitespace tokens (see the field notes), so every text goes through
``tokenize`` both at ingestion and at query time.

The index is an SQLite FTS5 table over the tokens the manifest already stores for
each chunk, kept in step by triggers. A chunk and its index entry are therefore
written in one transaction (the manifest commit stays the single commit point), no
process holds the index in memory, opening a collection costs nothing, and an
ingestion by another process is visible at the next query.

FTS5 finds the candidates; they are then scored with the BM25 the retrieval
figures were measured with (k1 1.5, b 0.75, Lucene's idf), from the stored
tokens and the document frequencies of the query terms. FTS5's own ``bm25()``
ranks the candidates but is not the score: its idf is zero for a term in half
the chunks, which in a small collection (a dozen pages all naming the product)
throws good matches away.
"""

from __future__ import annotations

import math
import re
import sqlite3
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache

import snowballstemmer

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
K1, B = 1.5, 0.75
# FTS5 ranks every chunk that holds a query term and hands over this many times k for
# exact scoring: enough that its different idf never pushes a top-k chunk out
CANDIDATE_FACTOR, MIN_CANDIDATES = 5, 100
# chunks FTS5 may rank for one search before rarer words alone are tried (see search):
# FTS5 ranks about a chunk per microsecond here
POSTINGS_BUDGET = 20_000

# A chunk's length in tokens as BM25 counts it (an empty chunk counts one, as rank-bm25's).
_LENGTH = "MAX(1, LENGTH({0}.tokens) - LENGTH(REPLACE({0}.tokens, ' ', '')) + ({0}.tokens != ''))"
SCHEMA = f"""
CREATE VIRTUAL TABLE IF NOT EXISTS chunk_terms USING fts5(
    tokens, content='chunks', content_rowid='rowid', tokenize="unicode61 tokenchars '''’'"
);
CREATE VIRTUAL TABLE IF NOT EXISTS chunk_term_counts USING fts5vocab(chunk_terms, row);
CREATE TABLE IF NOT EXISTS chunk_totals (
    one INTEGER PRIMARY KEY CHECK (one = 1), chunks INTEGER NOT NULL, tokens INTEGER NOT NULL
);
CREATE TRIGGER IF NOT EXISTS chunk_added AFTER INSERT ON chunks BEGIN
    INSERT INTO chunk_terms(rowid, tokens) VALUES (new.rowid, new.tokens);
    UPDATE chunk_totals SET chunks = chunks + 1, tokens = tokens + {_LENGTH.format("new")};
END;
CREATE TRIGGER IF NOT EXISTS chunk_removed AFTER DELETE ON chunks BEGIN
    INSERT INTO chunk_terms(chunk_terms, rowid, tokens) VALUES ('delete', old.rowid, old.tokens);
    UPDATE chunk_totals SET chunks = chunks - 1, tokens = tokens - {_LENGTH.format("old")};
END;
"""


def prepare(db: sqlite3.Connection) -> None:
    """Create the index, and fill it once for a collection made before it existed.

    ``db`` must be in autocommit mode. REPLACE deletes rows without firing delete
    triggers unless recursive triggers are on, which would leave stale index entries."""
    db.execute("PRAGMA recursive_triggers = ON")
    db.executescript(SCHEMA)
    if db.execute("SELECT 1 FROM chunk_totals").fetchone():
        return
    db.execute("BEGIN IMMEDIATE")
    try:
        if not db.execute("SELECT 1 FROM chunk_totals").fetchone():  # another process won
            db.execute("INSERT INTO chunk_terms(chunk_terms) VALUES ('rebuild')")
            db.execute(
                "INSERT INTO chunk_totals SELECT 1, COUNT(*), COALESCE(SUM("
                + _LENGTH.format("chunks")
                + "), 0) FROM chunks"
            )
        db.execute("COMMIT")
    except BaseException:
        db.execute("ROLLBACK")
        raise


@lru_cache(maxsize=200_000)
def _stem(word: str) -> str:
    return _STEMMER.stemWord(word)


def tokenize(text: str) -> list[str]:
    return [_stem(w) for w in _WORD.findall(text.lower()) if w not in STOPWORDS]


def lucene_idf(chunks: int, containing: int) -> float:
    """Lucene's idf, never negative: rank-bm25's Okapi idf goes below zero for a term in
    over half the chunks and would zero out good matches in a small collection."""
    return math.log(1 + (chunks - containing + 0.5) / (containing + 0.5))


def bm25(terms: Sequence[str], tokens: Sequence[str], idf: dict[str, float], avg: float) -> float:
    """One chunk's BM25 score for ``terms`` (repeated terms count again, as rank-bm25's)."""
    norm = K1 * (1 - B + B * max(1, len(tokens)) / avg)
    total = 0.0
    for term in terms:
        if term in idf and (tf := tokens.count(term)):
            total += idf[term] * tf * (K1 + 1) / (tf + norm)
    return total


@dataclass(frozen=True)
class _Query:
    """A query's terms (repeats kept) with the statistics BM25 needs, read once."""

    terms: list[str]
    containing: dict[str, int]  # chunks holding each term the index knows
    idf: dict[str, float]
    avg: float

    def bound(self, terms: Iterable[str]) -> float:
        """The most a chunk holding only ``terms`` can score: BM25 per term stays below
        idf * (k1 + 1) however often the term occurs."""
        return sum(self.idf[t] * (K1 + 1) * self.terms.count(t) for t in terms)


class KeywordIndex:
    """Searches the FTS5 index in a manifest database; holds nothing but the connection."""

    def __init__(self, db: sqlite3.Connection, postings_budget: int = POSTINGS_BUDGET) -> None:
        self._db = db
        self._budget = postings_budget

    def _query(self, query: str) -> _Query:
        terms = tokenize(query)
        chunks, tokens = self._db.execute("SELECT chunks, tokens FROM chunk_totals").fetchone()
        containing = {}
        for term in dict.fromkeys(terms):
            found = self._db.execute(
                "SELECT doc FROM chunk_term_counts WHERE term = ?", (term,)
            ).fetchone()
            if found:
                containing[term] = found[0]
        idf = {t: lucene_idf(chunks, n) for t, n in containing.items()}
        return _Query(terms, containing, idf, tokens / max(1, chunks))

    def search(self, query: str, k: int) -> list[tuple[str, float]]:
        """Top ``k`` (chunk id, BM25 score) pairs with a positive score, best first.

        FTS5 ranks every chunk that matches, which costs about a microsecond per chunk: a
        common word in a million chunks would take a second. So candidates come from the
        rarest words first, as many as fit in the postings budget; a word left out can
        only matter if it alone could outscore the k-th result (``_Query.bound``), and
        then the next rarest word is added and the search runs again."""
        q = self._query(query)
        rarest = sorted(q.containing, key=q.containing.__getitem__)
        if not rarest or k <= 0:
            return []
        used, postings = 0, 0
        while used < len(rarest) and (
            not used or postings + q.containing[rarest[used]] <= self._budget
        ):
            postings += q.containing[rarest[used]]
            used += 1
        while True:
            ranked = self._ranked(q, rarest[:used], k)
            left = rarest[used:]
            if not left or (len(ranked) >= k and ranked[k - 1][1] >= q.bound(left)):
                return ranked
            used += 1

    def _ranked(self, q: _Query, words: list[str], k: int) -> list[tuple[str, float]]:
        rows = self._db.execute(
            "SELECT c.id, c.tokens FROM chunk_terms JOIN chunks c ON c.rowid = chunk_terms.rowid "
            "WHERE chunk_terms MATCH ? ORDER BY chunk_terms.rank LIMIT ?",
            (" OR ".join(f'"{t}"' for t in words), max(MIN_CANDIDATES, CANDIDATE_FACTOR * k)),
        ).fetchall()
        scored = [(cid, bm25(q.terms, text.split(), q.idf, q.avg)) for cid, text in rows]
        scored.sort(key=lambda item: (-item[1], item[0]))
        return [(cid, score) for cid, score in scored[:k] if score > 0]

    def score(self, query: str, rows: Sequence[tuple[str, str]]) -> dict[str, float]:
        """BM25 score of each (chunk id, stored tokens) row, however low it ranks."""
        if not rows:
            return {}
        q = self._query(query)
        return {cid: bm25(q.terms, text.split(), q.idf, q.avg) for cid, text in rows}
