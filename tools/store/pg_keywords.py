"""BM25 keyword search over a PostgreSQL collection's committed chunks.

The same scores as ``tools.store.keyword_index`` (tokenisation, k1 1.5, b 0.75, Lucene's idf,
repeated query words counting again). PostgreSQL has no FTS5, and its own full-text
ranking is not BM25, so the index is ours: postings in ``chunk_terms``, filled from each
chunk's stored tokens by a trigger on ``chunks``, so a chunk and its postings are written
in one transaction (the manifest commit stays the single commit point) and a rollback
that puts retired chunks back re-indexes them; deleting a chunk deletes its postings.

Why bounded: exact BM25 reads every posting of every query word, and a common word sits
in a tenth of the chunks (at a million chunks, 184 ms median and 1.1 s at p95 for
questions; docs_corpus/performance.md). Each posting therefore carries its *impact*,
the term-frequency part of its BM25 score (``tf / (tf + k1 (1 - b + b length / L))``,
below 1), computed at the collection's reference length L (its mean chunk length when
it got its first chunks, then fixed, so a word's postings keep one order). An index on
(word, impact) hands a search each word's best postings first, and the search reads
only the top ``depth`` of each word (see ``PgKeywordIndex.search``), with a bound on
what the unread ones can add. The word counts idf needs are kept in ``term_chunks`` by
the same triggers, so no search counts postings.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import psycopg
from psycopg import pq

from tools.store.keyword_index import K1, B, Query, best, lucene_idf
from tools.text import tokenize

# postings read per query word in a bounded search's first round, and in its second and
# last; POOL chunks (at least twice the k asked for) are rescored from their tokens per
# round; a query whose words have at most EXACT_POSTINGS postings in all is scored
# exactly in one statement, the faster way at that size. Chosen with bench/bench_scale.py
# on questions it does not report; the alternatives measured and their figures are in
# docs_corpus/performance.md ("Retrieval at scale: PostgreSQL against the embedded store").
DEPTH, MAX_DEPTH, POOL = 1000, 24_000, 600
EXACT_POSTINGS = 30_000

# A posting's impact from its term frequency ``tf`` (an SQL expression), its chunk's
# ``length`` and the collection's ``reference_length``.
_IMPACT = f"({{tf}})::float8 / (({{tf}}) + {K1} * (1 - {B} + {B} * length / reference_length))"

# Created with the manifest's tables, in the same transaction (``PgManifest``), and run
# again on a collection made before a table or column existed: columns added later are
# ALTERed in and filled, so an older collection gets them when it is opened. The trigger
# functions name their tables in the schema of the table that fired them, not through
# the session's search_path: a connection with another search_path (one copying the
# schema for a snapshot) and a renamed schema keep their postings right. Triggers fire
# once per statement with all the rows it wrote (one COPY of a file's chunks updates the
# totals once, not per chunk).
SCHEMA = (
    """
CREATE TABLE IF NOT EXISTS chunk_terms (
    chunk_id TEXT COLLATE "C" NOT NULL REFERENCES chunks(id) ON DELETE CASCADE,
    term TEXT COLLATE "C" NOT NULL, tf INTEGER NOT NULL,
    length INTEGER NOT NULL  -- the chunk's, kept here so a search never joins chunks
);
-- (word, chunk) is unique by construction (the trigger groups by both); the impact
-- index below serves every lookup the old primary key did
ALTER TABLE chunk_terms DROP CONSTRAINT IF EXISTS chunk_terms_pkey;
ALTER TABLE chunk_terms ADD COLUMN IF NOT EXISTS impact REAL;
CREATE TABLE IF NOT EXISTS chunk_totals (
    one INTEGER PRIMARY KEY CHECK (one = 1), chunks BIGINT NOT NULL, tokens BIGINT NOT NULL
);
ALTER TABLE chunk_totals ADD COLUMN IF NOT EXISTS reference_length DOUBLE PRECISION;
INSERT INTO chunk_totals SELECT 1, COUNT(*), COALESCE(SUM(length), 0), AVG(length) FROM chunks
ON CONFLICT DO NOTHING;
UPDATE chunk_totals SET reference_length = tokens::float8 / chunks
WHERE reference_length IS NULL AND chunks > 0;
UPDATE chunk_terms SET impact = """
    + _IMPACT.format(tf="tf")
    + """
FROM chunk_totals WHERE impact IS NULL;
ALTER TABLE chunk_terms ALTER COLUMN impact SET NOT NULL;
CREATE INDEX IF NOT EXISTS chunk_terms_chunk ON chunk_terms(chunk_id);
CREATE INDEX IF NOT EXISTS chunk_terms_impact
    ON chunk_terms(term, impact DESC) INCLUDE (chunk_id, tf, length);
-- chunks holding each word (a word whose chunks are all gone stays, at 0)
CREATE TABLE IF NOT EXISTS term_chunks (
    term TEXT COLLATE "C" PRIMARY KEY, chunks BIGINT NOT NULL
);
INSERT INTO term_chunks SELECT term, COUNT(*) FROM chunk_terms GROUP BY term
ON CONFLICT DO NOTHING;
CREATE OR REPLACE FUNCTION chunks_added() RETURNS trigger LANGUAGE plpgsql AS $fn$
BEGIN
    EXECUTE format($q$
        UPDATE %1$I.chunk_totals SET chunks = chunks + n, tokens = tokens + total,
            reference_length = COALESCE(reference_length, total::float8 / NULLIF(n, 0))
        FROM (SELECT COUNT(*) AS n, COALESCE(SUM(length), 0) AS total FROM added) AS delta
    $q$, TG_TABLE_SCHEMA);
    EXECUTE format($q$
        WITH posted AS (
            INSERT INTO %1$I.chunk_terms (chunk_id, term, tf, length, impact)
            SELECT id, term, COUNT(*), length, """
    + _IMPACT.format(tf="COUNT(*)")
    + """
            FROM added, unnest(string_to_array(tokens, ' ')) AS term, %1$I.chunk_totals
            GROUP BY id, term, length, reference_length
            RETURNING term
        )
        INSERT INTO %1$I.term_chunks SELECT term, COUNT(*) FROM posted GROUP BY term
        ON CONFLICT (term) DO UPDATE SET chunks = term_chunks.chunks + EXCLUDED.chunks
    $q$, TG_TABLE_SCHEMA);
    RETURN NULL;
END $fn$;
CREATE OR REPLACE FUNCTION chunks_removed() RETURNS trigger LANGUAGE plpgsql AS $fn$
BEGIN
    EXECUTE format($q$
        UPDATE %1$I.chunk_totals SET chunks = chunks - n, tokens = tokens - total
        FROM (SELECT COUNT(*) AS n, COALESCE(SUM(length), 0) AS total FROM removed) AS delta
    $q$, TG_TABLE_SCHEMA);
    EXECUTE format($q$
        UPDATE %1$I.term_chunks AS t SET chunks = t.chunks - gone.n
        FROM (
            SELECT term, COUNT(DISTINCT id) AS n
            FROM removed, unnest(string_to_array(tokens, ' ')) AS term GROUP BY term
        ) AS gone
        WHERE t.term = gone.term
    $q$, TG_TABLE_SCHEMA);
    RETURN NULL;
END $fn$;
CREATE OR REPLACE TRIGGER chunks_added AFTER INSERT ON chunks
REFERENCING NEW TABLE AS added FOR EACH STATEMENT EXECUTE FUNCTION chunks_added();
CREATE OR REPLACE TRIGGER chunks_removed AFTER DELETE ON chunks
REFERENCING OLD TABLE AS removed FOR EACH STATEMENT EXECUTE FUNCTION chunks_removed();
"""
)
# The tables those triggers fill from ``chunks``: a copy of the schema copies the chunks
# and lets the triggers build these (copying them too would count every chunk twice).
DERIVED_TABLES = ("chunk_terms", "chunk_totals", "term_chunks")
# The newest of them: a schema without it was made by an older version (``PgManifest``).
NEWEST_TABLE = "term_chunks"

# Exact BM25 over every posting of the query's words, in one statement: the search when
# the depth covers every posting anyway (a small collection, rare words) or there are at
# most EXACT_POSTINGS, and the reference the bounded search is measured against. Each
# chunk's words are summed in query order, as ``keyword_index.bm25`` does, so equal
# chunks tie exactly. Every score is positive: within one snapshot a word is in at most
# all chunks, so its idf is above 0.
_EXACT = """
WITH totals AS (
    SELECT chunks::float8 AS n, tokens::float8 / GREATEST(chunks, 1) AS avg FROM chunk_totals
), postings AS MATERIALIZED (
    SELECT p.chunk_id, p.tf, p.length, q.position, w.chunks AS containing
    FROM unnest(%(terms)s::text[]) WITH ORDINALITY AS q(term, position)
    JOIN term_chunks w ON w.term = q.term
    JOIN chunk_terms p ON p.term = q.term
)
SELECT p.chunk_id,
    SUM(
        ln(1 + (n - containing + 0.5) / (containing + 0.5)) * p.tf * %(k1_plus_1)s
        / (p.tf + %(k1)s * (1 - %(b)s + %(b)s * p.length / avg))
        ORDER BY p.position
    ) AS score
FROM postings p CROSS JOIN totals
GROUP BY p.chunk_id
ORDER BY score DESC, p.chunk_id
LIMIT %(k)s
"""

# The impact of each word's ``depth``-th best posting (None for a word in fewer chunks):
# a chunk not among a word's ``depth`` best holds it with at most this impact.
_LAST_READ = """
SELECT (SELECT impact FROM chunk_terms WHERE term = q.term
        ORDER BY impact DESC OFFSET %(skip)s LIMIT 1)
FROM unnest(%(terms)s::text[]) WITH ORDINALITY AS q(term, position) ORDER BY position
"""

# One round of a bounded search: each distinct query word's ``depth`` postings of highest
# impact, summed per chunk into its score over the postings read (``partial``) and the
# most it can still gain (``upper``): ``bound`` is the most a word adds to a chunk not
# among those read (0 when all were read), ``unseen`` their sum, the most a chunk found
# by no word can score. The ``pool`` chunks kept are those of highest estimate: a word's
# bound counts only as often as the word occurs in the chunks not read (``chance``;
# ``expected`` is the sum of bound x chance), so a chunk with a rare word's exact score
# outranks one whose upper bound is mostly common words' bounds. The last column is the
# highest upper bound among the chunks not kept, when the round is to ``prove`` its
# result (0 otherwise: the last round's result is returned anyway).
_ROUND = """
WITH q AS (
    SELECT * FROM unnest(
        %(terms)s::text[], %(weights)s::float8[], %(bounds)s::float8[], %(chances)s::float8[]
    ) AS q(term, weight, bound, chance)
), pooled AS MATERIALIZED (
    SELECT chunk_id, partial + %(unseen)s - seen AS upper,
        partial + %(expected)s - seen_expected AS estimate
    FROM (
        SELECT p.chunk_id, SUM(q.bound) AS seen, SUM(q.bound * q.chance) AS seen_expected,
            SUM(q.weight * p.tf / (p.tf + %(k1)s * (1 - %(b)s + %(b)s * p.length / %(avg)s)))
                AS partial
        FROM q CROSS JOIN LATERAL (
            SELECT chunk_id, tf, length FROM chunk_terms
            WHERE term = q.term ORDER BY impact DESC LIMIT %(depth)s
        ) AS p
        GROUP BY p.chunk_id
    ) AS summed
), kept AS MATERIALIZED (
    SELECT chunk_id, upper FROM pooled ORDER BY estimate DESC, chunk_id LIMIT %(pool)s
)
SELECT chunk_id, upper, (
    SELECT COALESCE(MAX(upper), 0) FROM pooled
    WHERE %(prove)s AND chunk_id NOT IN (SELECT chunk_id FROM kept)
)
FROM kept
"""


class PgKeywordIndex:
    """Searches the postings in a manifest's schema; holds nothing but the connection and
    its limits, so a commit by any process is seen by the next query."""

    def __init__(
        self,
        db: psycopg.Connection,
        depth: int = DEPTH,
        max_depth: int = MAX_DEPTH,
        pool: int = POOL,
        exact_postings: int = EXACT_POSTINGS,
    ) -> None:
        self._db = db
        self._depth, self._max_depth, self._pool = depth, max(depth, max_depth), pool
        self._exact_postings = exact_postings

    @contextmanager
    def _snapshot(self) -> Iterator[None]:
        """One snapshot for a search's statements, so the counts, lengths and postings
        agree although another process commits between them."""
        if self._db.info.transaction_status != pq.TransactionStatus.IDLE:
            yield  # already inside the caller's transaction
            return
        with self._db.transaction():
            self._db.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            yield

    def _query(self, terms: list[str]) -> tuple[Query, float, int]:
        """The query's statistics, the reference length impacts were computed with, and
        the number of chunks."""
        rows = self._db.execute(
            "SELECT t.chunks, t.tokens, t.reference_length, w.term, w.chunks "
            "FROM chunk_totals t LEFT JOIN term_chunks w ON w.term = ANY(%s) AND w.chunks > 0",
            (list(dict.fromkeys(terms)),),
        ).fetchall()
        chunks, tokens, reference = rows[0][:3]
        containing = {term: n for *_, term, n in rows if term is not None}
        idf = {term: lucene_idf(chunks, n) for term, n in containing.items()}
        return Query(terms, containing, idf, tokens / max(1, chunks)), reference or 1.0, chunks

    def search(self, query: str, k: int) -> list[tuple[str, float]]:
        """Top ``k`` (chunk id, BM25 score) pairs with a positive score, best first, ties
        by chunk id.

        When ``depth`` covers every posting of the query's words, or they have at most
        ``exact_postings`` in all, exact BM25 in one statement. Otherwise a round
        (``_ROUND``) reads ``depth`` postings per word and rescores from their tokens the
        pool of chunks likeliest to score most; its result is exact (the same ids and
        scores as exhaustive BM25) when its k-th score beats both what a chunk outside the
        pool and what a chunk no word found could reach. If not, a second and last round
        reads ``max_depth`` postings per word, and its rescored pool's best are returned,
        exact or not (bench/bench_scale.py measures how often they agree with exhaustive
        BM25)."""
        terms = tokenize(query)
        if not terms or k <= 0:
            return []
        with self._snapshot():
            q, reference, chunks = self._query(terms)
            if not q.containing:
                return []
            depth = self._depth
            postings = sum(q.containing.values())
            while max(q.containing.values()) > depth and postings > self._exact_postings:
                last = depth >= self._max_depth
                found, exact = self._round(q, (reference, chunks), depth, k, last)
                if exact or last:
                    return found
                depth = self._max_depth
            return self._exact(terms, k)

    def _exact(self, terms: list[str], k: int) -> list[tuple[str, float]]:
        rows = self._db.execute(
            _EXACT, {"terms": terms, "k": k, "k1": K1, "k1_plus_1": K1 + 1, "b": B}
        )
        return [(cid, float(score)) for cid, score in rows]

    def _round(
        self, q: Query, totals: tuple[float, int], depth: int, k: int, last: bool
    ) -> tuple[list[tuple[str, float]], bool]:
        """The best ``k`` of one round's pool, and whether they are provably exact (the
        ``last`` round does not try). A round before the last that cannot prove its result
        (its k-th highest upper bound does not beat what a chunk left out could reach)
        returns nothing, unscored."""
        (reference, chunks), words = totals, list(q.containing)
        last_read = self._db.execute(_LAST_READ, {"terms": words, "skip": depth - 1}).fetchall()
        stretch = self._stretch(q.avg, reference)
        bounds = [
            q.weight(w) * min(1.0, impact * stretch) if impact is not None else 0.0
            for w, (impact,) in zip(words, last_read, strict=True)
        ]
        # how often a chunk outside a word's ``depth`` best holds it
        chances = [max(0, q.containing[w] - depth) / max(1, chunks - depth) for w in words]
        unseen = sum(bounds)
        rows = self._db.execute(
            _ROUND,
            {
                "terms": words,
                "weights": [q.weight(w) for w in words],
                "bounds": bounds,
                "chances": chances,
                "unseen": unseen,
                "expected": sum(b * c for b, c in zip(bounds, chances, strict=True)),
                "depth": depth,
                "k1": K1,
                "b": B,
                "avg": q.avg,
                "pool": max(self._pool, 2 * k),
                "prove": not last,
            },
        ).fetchall()
        if not rows:
            return [], True
        if last:  # returned exact or not, so not proved
            return best(self._scored(q, [r[0] for r in rows]), k), False
        bar = max(unseen, rows[0][2])
        if bar > 0:
            uppers = sorted((r[1] for r in rows), reverse=True)
            if len(uppers) < k or uppers[k - 1] <= bar:
                return [], False
        found = best(self._scored(q, [r[0] for r in rows]), k)
        return found, bar == 0 or (len(found) == k and found[-1][1] > bar)

    @staticmethod
    def _stretch(avg: float, reference: float) -> float:
        """How far a chunk's impact at the current mean length can exceed the one stored
        at the reference length: tf / (tf + k1 (1 - b + b len / avg)) over the stored
        value is at most avg / reference when the mean has grown (and at most 1 when it
        has shrunk). The margin covers REAL's rounding of the stored impact."""
        return max(1.0, avg / reference) * (1 + 1e-6)

    def _scored(self, q: Query, ids: Sequence[str]) -> list[tuple[str, float]]:
        """BM25 of each chunk in ``ids`` from its stored tokens."""
        rows = self._db.execute("SELECT id, tokens FROM chunks WHERE id = ANY(%s)", (list(ids),))
        return list(q.scores(rows).items())

    def score(self, query: str, rows: Sequence[tuple[str, str]]) -> dict[str, float]:
        """BM25 score of each (chunk id, stored tokens) row, however low it ranks."""
        if not rows:
            return {}
        q = self._query(tokenize(query))[0]
        return q.scores(rows)
