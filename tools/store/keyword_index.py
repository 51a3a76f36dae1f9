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

The FTS5 index lists where each word occurs; candidates are the chunks whose
query words add up best, and they are scored exactly with the BM25 the retrieval
figures were measured with (k1 1.5, b 0.75, Lucene's idf), from their stored tokens
and the document frequencies of the query words. FTS5's own ``bm25()`` is not used:
ranking with it cost 3 microseconds per matching chunk (0.2 s for a long query at
100k chunks), and its idf is zero for a word in half the chunks, which in a small
collection (a dozen pages all naming the product) throws good matches away.
"""

from __future__ import annotations

import math
import sqlite3
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from tools.text import tokenize

K1, B = 1.5, 0.75
# candidates scored again from their tokens, per result asked for: the pool's scores
# leave out the words not read
CANDIDATE_FACTOR, MIN_CANDIDATES = 4, 50
POOL = 1000  # chunks scored from their occurrences and lengths, per round
# chunks whose occurrences one search reads before it tries the rarer words alone (see
# search); the budget doubles while a word left out could still change the top k, up to
# MAX_POSTINGS: past that, the commonest words only rescore the candidates.
# bench/bench_scale.py measures the agreement with exhaustive BM25; these values were
# chosen with it (docs_corpus/performance.md)
POSTINGS_BUDGET, MAX_POSTINGS = 40_000, 320_000
MAX_CACHED_COUNTS = 100_000  # words whose chunk counts are kept (see KeywordIndex)

# A chunk's length in tokens as BM25 counts it (an empty chunk counts one, as rank-bm25's).
_LENGTH = "MAX(1, LENGTH({0}.tokens) - LENGTH(REPLACE({0}.tokens, ' ', '')) + ({0}.tokens != ''))"
SCHEMA = f"""
CREATE VIRTUAL TABLE IF NOT EXISTS chunk_terms USING fts5(
    tokens, content='chunks', content_rowid='rowid', tokenize="unicode61 tokenchars '''’'"
);
CREATE VIRTUAL TABLE IF NOT EXISTS chunk_term_counts USING fts5vocab(chunk_terms, row);
CREATE VIRTUAL TABLE IF NOT EXISTS chunk_term_occurrences USING fts5vocab(chunk_terms, instance);
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


def _varint(blob: bytes) -> int:
    """SQLite's variable-length integer (7 bits a byte, high bit: more follow)."""
    value = 0
    for byte in blob:
        value = (value << 7) | (byte & 0x7F)
        if byte < 0x80:
            break
    return value


def best(scored: list[tuple[str, float]], k: int) -> list[tuple[str, float]]:
    """The ``k`` best (chunk id, score) pairs with a positive score; ties by id."""
    scored.sort(key=lambda item: (-item[1], item[0]))
    return [(cid, score) for cid, score in scored[:k] if score > 0]


@dataclass(frozen=True)
class Query:
    """A query's terms (repeats kept) with the statistics BM25 needs, read once."""

    terms: list[str]
    containing: dict[str, int]  # chunks holding each term the index knows
    idf: dict[str, float]
    avg: float

    def weight(self, term: str) -> float:
        """idf x (k1 + 1) x how often the query repeats the term."""
        return self.idf[term] * (K1 + 1) * self.terms.count(term)

    def scores(self, rows: Iterable[tuple[str, str]]) -> dict[str, float]:
        """BM25 of each (chunk id, stored tokens) row: how every index rescores chunks."""
        return {cid: bm25(self.terms, text.split(), self.idf, self.avg) for cid, text in rows}

    def bound(self, terms: Iterable[str]) -> float:
        """The most a chunk holding only ``terms`` can score: BM25 per term stays below
        idf * (k1 + 1) however often the term occurs."""
        return sum(self.weight(t) for t in terms)


class KeywordIndex:
    """Searches the FTS5 index in a manifest database. Besides the connection it holds only
    the chunk counts of words recently searched for, valid for one ``generation`` of the
    manifest (bumped by every commit that changes chunks, in any process)."""

    def __init__(
        self,
        db: sqlite3.Connection,
        generation: Callable[[], int],
        postings_budget: int = POSTINGS_BUDGET,
        max_postings: int = MAX_POSTINGS,
        pool: int = POOL,
    ) -> None:
        self._db = db
        self._generation = generation
        self._budget, self._max, self._pool = postings_budget, max_postings, pool
        self._counts: tuple[int, dict[str, int]] = (-1, {})

    def _containing(self, terms: Iterable[str]) -> dict[str, int]:
        """How many chunks hold each term (terms in none left out). FTS5 counts them by
        walking the term's whole list of occurrences (2-10 ms for a common word at a
        million chunks, paid twice a question), so counts are kept until the next commit.
        A count is kept only when no commit landed while it was read; each generation gets
        a new dict, so a slow reader never files old counts under a new generation."""
        generation = self._generation()
        at, known = self._counts
        if at != generation or len(known) > MAX_CACHED_COUNTS:
            known = {}
            self._counts = (generation, known)
        read = {}
        for term in dict.fromkeys(terms):
            if term not in known:
                found = self._db.execute(
                    "SELECT doc FROM chunk_term_counts WHERE term = ?", (term,)
                ).fetchone()
                read[term] = found[0] if found else 0
        if read and self._generation() == generation:
            known.update(read)
        counts = {t: read[t] if t in read else known[t] for t in dict.fromkeys(terms)}
        return {t: n for t, n in counts.items() if n}

    def _query(self, query: str) -> Query:
        terms = tokenize(query)
        chunks, tokens = self._db.execute("SELECT chunks, tokens FROM chunk_totals").fetchone()
        containing = self._containing(terms)
        idf = {t: lucene_idf(chunks, n) for t, n in containing.items()}
        return Query(terms, containing, idf, tokens / max(1, chunks))

    def search(self, query: str, k: int) -> list[tuple[str, float]]:
        """Top ``k`` (chunk id, BM25 score) pairs with a positive score, best first.

        Each query word's occurrences come from the FTS5 index. The chunks they point to
        are pooled (the ``pool`` best by term frequency alone when there are more),
        scored with BM25 from the occurrences and FTS5's chunk lengths; when words were
        left out, the best are scored again from their stored tokens. A common word
        in a million chunks has a hundred thousand occurrences, so words are read rarest
        first while they fit in the postings budget. A word left out can only matter if
        it alone could outscore the k-th result (``Query.bound``); while one could, the
        budget doubles and more words are read, up to ``max_postings``."""
        q = self._query(query)
        rarest = sorted(q.containing, key=q.containing.__getitem__)
        if not rarest or k <= 0:
            return []
        last = self._db.execute("SELECT MAX(rowid) FROM chunks").fetchone()[0] or 0
        frequency = np.zeros(last + 1, np.float32)  # saturated tf x idf: picks the pool
        lengths = np.zeros(last + 1, np.float32)  # of the chunks pooled so far
        occurrences: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        budget = self._budget
        while True:
            postings = 0
            for word in rarest[len(occurrences) :]:  # the next rarest words that fit
                if postings and postings + q.containing[word] > budget:
                    break
                occurrences[word] = self._occurrences(word, last)
                chunks, tf = occurrences[word]
                frequency[chunks] += q.weight(word) * tf / (tf + K1)
                postings += q.containing[word]
            pool, partial = self._pooled(q, frequency, occurrences, lengths)
            left = rarest[len(occurrences) :]
            # a pooled chunk's true score is at least its partial one (the words not read
            # can only add), so the k-th partial score bounds the k-th true one from below
            kth = np.partition(partial, len(partial) - k)[len(partial) - k] if len(pool) >= k else 0
            if not left or kth >= q.bound(left) or budget >= self._max:
                order = np.argsort(-partial, kind="stable")
                if not left:  # every word was read: the pool's scores are BM25 already
                    return self._named(pool[order[:k]], partial[order[:k]])
                want = max(MIN_CANDIDATES, CANDIDATE_FACTOR * k)
                return self._rescored(q, pool[order[:want]], k)
            budget *= 2  # each round reads at least as much as all before it

    def _occurrences(self, word: str, last: int) -> tuple[np.ndarray, np.ndarray]:
        """The chunks (rowids, ascending) holding ``word``, and how often each does."""
        (listed,) = self._db.execute(
            "SELECT group_concat(doc) FROM chunk_term_occurrences WHERE term = ?", (word,)
        ).fetchone()
        rowids = np.fromstring(listed or "", dtype=np.int64, sep=",")  # 14x np.array(split)
        return np.unique(rowids[rowids <= last], return_counts=True)  # later: not in frequency

    def _pooled(
        self,
        q: Query,
        frequency: np.ndarray,
        occurrences: dict[str, tuple[np.ndarray, np.ndarray]],
        lengths: np.ndarray,
    ) -> tuple[np.ndarray, np.ndarray]:
        """The pool's rowids and their BM25 over the words read so far."""
        pool = np.flatnonzero(frequency)
        if len(pool) > self._pool:
            pool = pool[np.argpartition(-frequency[pool], self._pool - 1)[: self._pool]]
        norm = K1 * (1 - B + B * self._lengths(pool, lengths) / q.avg)
        partial = np.zeros(len(pool))
        for word, (chunks, tf) in occurrences.items():
            if not len(chunks):  # a commit removed its chunks after the counts were read
                continue
            at = np.minimum(np.searchsorted(chunks, pool), len(chunks) - 1)
            held = np.where(chunks[at] == pool, tf[at], 0)
            partial += q.weight(word) * held / (held + norm)
        return pool, partial

    def _named(self, rowids: np.ndarray, scores: np.ndarray) -> list[tuple[str, float]]:
        """(chunk id, score) pairs with a positive score, best first."""
        ids = dict(
            self._db.execute(
                f"SELECT rowid, id FROM chunks WHERE rowid IN ({','.join(map(str, rowids))})"
            ).fetchall()
        )
        pairs = zip(rowids.tolist(), scores.tolist(), strict=True)
        return best([(ids[r], score) for r, score in pairs if r in ids], len(rowids))

    def _rescored(self, q: Query, chosen: np.ndarray, k: int) -> list[tuple[str, float]]:
        """The top ``k`` of ``chosen`` by BM25 over every query word, from their tokens."""
        rows = self._db.execute(
            f"SELECT id, tokens FROM chunks WHERE rowid IN ({','.join(map(str, chosen))})"
        ).fetchall()
        return best(list(q.scores(rows).items()), k)

    def _lengths(self, rowids: np.ndarray, known: np.ndarray) -> np.ndarray:
        """Chunk lengths in tokens, from FTS5's own table of them (a varint per chunk):
        reading the tokens instead cost 45 ms for 5,000 chunks. ``known`` holds the lengths
        read by earlier rounds of the same search (0: not read), most of the next pool."""
        unread = np.sort(rowids[known[rowids] == 0])
        for start in range(0, len(unread), 5000):
            part = unread[start : start + 5000]
            rows = self._db.execute(
                f"SELECT id, sz FROM chunk_terms_docsize WHERE id IN ({','.join(map(str, part))})"
            ).fetchall()
            known[[r[0] for r in rows]] = [b[0] if b[0] < 0x80 else _varint(b) for _, b in rows]
            known[part[known[part] == 0]] = 1  # removed by a commit since: any length will do
        return np.maximum(1, known[rowids])

    def score(self, query: str, rows: Sequence[tuple[str, str]]) -> dict[str, float]:
        """BM25 score of each (chunk id, stored tokens) row, however low it ranks."""
        if not rows:
            return {}
        q = self._query(query)
        return q.scores(rows)
