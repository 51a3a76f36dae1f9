"""BM25 keyword search over a PostgreSQL collection's committed chunks.

The same scores as ``tools.store.keyword_index`` (tokenisation, k1 1.5, b 0.75, Lucene's idf,
repeated query words counting again), but exhaustive: PostgreSQL has no FTS5, and its
own full-text ranking is not BM25. Postings live in ``chunk_terms``, filled from each
chunk's stored tokens by a trigger on ``chunks``, so a chunk and its postings are written
in one transaction (the manifest commit stays the single commit point) and a rollback
that puts retired chunks back re-indexes them; deleting a chunk deletes its postings.
A search reads every posting of the query's words, so its time grows with how many
chunks hold them (about 60 ms for three words each in all of 10,000 chunks, under 1 ms
for a rare word): exact, where the SQLite index bounds what it reads.
"""

from __future__ import annotations

from collections.abc import Sequence

import psycopg

from tools.store.keyword_index import K1, B, bm25, lucene_idf
from tools.text import tokenize

# Created with the manifest's tables, in the same transaction (``PgManifest``). The
# trigger functions name their tables in the schema of the table that fired them, not
# through the session's search_path: a connection with another search_path (one copying
# the schema for a snapshot) and a renamed schema keep their postings right. Triggers
# fire once per statement with all the rows it wrote (one COPY of a file's chunks
# updates the totals once, not per chunk).
SCHEMA = """
CREATE TABLE IF NOT EXISTS chunk_terms (
    chunk_id TEXT COLLATE "C" NOT NULL REFERENCES chunks(id) ON DELETE CASCADE,
    term TEXT COLLATE "C" NOT NULL, tf INTEGER NOT NULL,
    length INTEGER NOT NULL,  -- the chunk's, kept here so a search never joins chunks
    PRIMARY KEY (term, chunk_id)
);
CREATE INDEX IF NOT EXISTS chunk_terms_chunk ON chunk_terms(chunk_id);
CREATE TABLE IF NOT EXISTS chunk_totals (
    one INTEGER PRIMARY KEY CHECK (one = 1), chunks BIGINT NOT NULL, tokens BIGINT NOT NULL
);
INSERT INTO chunk_totals SELECT 1, COUNT(*), COALESCE(SUM(length), 0) FROM chunks
ON CONFLICT DO NOTHING;
CREATE OR REPLACE FUNCTION chunks_added() RETURNS trigger LANGUAGE plpgsql AS $fn$
BEGIN
    EXECUTE format($q$
        INSERT INTO %1$I.chunk_terms (chunk_id, term, tf, length)
        SELECT id, term, COUNT(*), length
        FROM added, unnest(string_to_array(tokens, ' ')) AS term
        GROUP BY id, term, length
    $q$, TG_TABLE_SCHEMA);
    EXECUTE format($q$
        UPDATE %1$I.chunk_totals SET chunks = chunks + n, tokens = tokens + total
        FROM (SELECT COUNT(*) AS n, COALESCE(SUM(length), 0) AS total FROM added) AS delta
    $q$, TG_TABLE_SCHEMA);
    RETURN NULL;
END $fn$;
CREATE OR REPLACE FUNCTION chunks_removed() RETURNS trigger LANGUAGE plpgsql AS $fn$
BEGIN
    EXECUTE format($q$
        UPDATE %1$I.chunk_totals SET chunks = chunks - n, tokens = tokens - total
        FROM (SELECT COUNT(*) AS n, COALESCE(SUM(length), 0) AS total FROM removed) AS delta
    $q$, TG_TABLE_SCHEMA);
    RETURN NULL;
END $fn$;
CREATE OR REPLACE TRIGGER chunks_added AFTER INSERT ON chunks
REFERENCING NEW TABLE AS added FOR EACH STATEMENT EXECUTE FUNCTION chunks_added();
CREATE OR REPLACE TRIGGER chunks_removed AFTER DELETE ON chunks
REFERENCING OLD TABLE AS removed FOR EACH STATEMENT EXECUTE FUNCTION chunks_removed();
"""
# The tables those triggers fill from ``chunks``: a copy of the schema copies the chunks
# and lets the triggers build these (copying them too would count every chunk twice).
DERIVED_TABLES = ("chunk_terms", "chunk_totals")

# One statement, so the counts, the lengths and the postings come from one snapshot. The
# query words' postings are read once (materialised: planned on their own, they start
# from the word index even before PostgreSQL has statistics on a new collection), with
# each chunk's length, and each word's chunk count is counted from them (a grouped
# count: a window over 200k postings sorted them on disk). Each chunk's words are summed in query
# order with Python's arithmetic (``keyword_index.bm25``), so equal chunks tie exactly
# and ``score`` gives the same numbers. Every score is positive: within one snapshot a
# word is in at most all chunks, so its idf (``keyword_index.lucene_idf``) is above 0.
_SEARCH = """
WITH totals AS (
    SELECT chunks::float8 AS n, tokens::float8 / GREATEST(chunks, 1) AS avg FROM chunk_totals
), postings AS MATERIALIZED (
    SELECT p.chunk_id, p.tf, p.length, q.position
    FROM unnest(%(terms)s::text[]) WITH ORDINALITY AS q(term, position)
    JOIN chunk_terms p ON p.term = q.term
), df AS (
    SELECT position, COUNT(*) AS containing FROM postings GROUP BY position
)
SELECT p.chunk_id,
    SUM(
        ln(1 + (n - containing + 0.5) / (containing + 0.5)) * p.tf * %(k1_plus_1)s
        / (p.tf + %(k1)s * (1 - %(b)s + %(b)s * p.length / avg))
        ORDER BY p.position
    ) AS score
FROM postings p JOIN df USING (position) CROSS JOIN totals
GROUP BY p.chunk_id
ORDER BY score DESC, p.chunk_id
LIMIT %(k)s
"""

# The statistics ``score`` needs, per distinct query word, in one snapshot.
_STATISTICS = """
SELECT t.chunks, t.tokens, q.term, (SELECT COUNT(*) FROM chunk_terms p WHERE p.term = q.term)
FROM chunk_totals t, unnest(%s::text[]) AS q(term)
"""


class PgKeywordIndex:
    """Searches the postings in a manifest's schema; holds nothing but the connection, so
    a commit by any process is seen by the next query."""

    def __init__(self, db: psycopg.Connection) -> None:
        self._db = db

    def search(self, query: str, k: int) -> list[tuple[str, float]]:
        """Top ``k`` (chunk id, BM25 score) pairs with a positive score, best first, ties
        by chunk id."""
        terms = tokenize(query)
        if not terms or k <= 0:
            return []
        rows = self._db.execute(
            _SEARCH, {"terms": terms, "k": k, "k1": K1, "k1_plus_1": K1 + 1, "b": B}
        )
        return [(cid, float(score)) for cid, score in rows]

    def score(self, query: str, rows: Sequence[tuple[str, str]]) -> dict[str, float]:
        """BM25 score of each (chunk id, stored tokens) row, however low it ranks."""
        if not rows:
            return {}
        terms = tokenize(query)
        stats = self._db.execute(_STATISTICS, (list(dict.fromkeys(terms)),)).fetchall()
        idf = {term: lucene_idf(chunks, n) for chunks, _, term, n in stats if n}
        avg = stats[0][1] / max(1, stats[0][0]) if stats else 1.0  # no words: every score 0
        return {cid: bm25(terms, text.split(), idf, avg) for cid, text in rows}
