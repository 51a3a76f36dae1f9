"""The manifest of a PostgreSQL collection: ``tools.store.manifest.Manifest`` in a schema.

The same methods with the same meaning, so ``tools.store.collection`` and the ingestion
pipeline use either: both are ``tools.store.manifest.ManifestBase``, which holds the logic in
SQL both databases run, and this class supplies PostgreSQL's side of its hooks. The
tables are the SQLite ones (``tools.store.manifest.TABLES``) with two additions, a file's
chunks, their keyword postings (``tools.store.pg_keywords``) and its version record
commit in one transaction, and vector writes still go before that commit and deletions
after it. Writers to one schema
take a transaction-scoped advisory lock where SQLite takes its write lock (BEGIN
IMMEDIATE), so generations still rise by one per commit in commit order.

Text key columns use the "C" collation: files and sources list in code-point order and
chunk ids compare as SQLite's BINARY does, whatever the database's locale.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import psycopg
from psycopg import sql

from tools.config import redacted_url
from tools.store import pg_keywords
from tools.store.manifest import CHUNK_COLUMNS, TABLES, ManifestBase
from tools.store.pg_keywords import PgKeywordIndex
from tools.store.postgres import connect, lock_key, question_marks, use_schema

_SCHEMA = (
    TABLES.format(key='TEXT COLLATE "C"', blob="BYTEA", autoincrement="")
    + """
-- length: the chunk's length in tokens as BM25 counts it (an empty chunk counts one)
ALTER TABLE chunks ADD COLUMN IF NOT EXISTS
    length INTEGER GENERATED ALWAYS AS (GREATEST(1, cardinality(string_to_array(tokens, ' '))))
        STORED;
-- the last version number handed out, as SQLite keeps an AUTOINCREMENT's: a number is
-- never used twice (an empty run's version is deleted, not reused), and, unlike a
-- sequence's, it goes back with a transaction that rolls back (a refused rollback
-- leaves no gap in the version numbers)
CREATE TABLE IF NOT EXISTS version_counter (
    one INTEGER PRIMARY KEY CHECK (one = 1), last INTEGER NOT NULL
);
"""
)
_RETIRED = ("retired_chunks", "retired_documents", "retired_files")


class PgManifest(ManifestBase):
    """A collection's manifest in one PostgreSQL schema, with its BM25 postings."""

    _db: psycopg.Connection

    def __init__(self, url: str, schema: str) -> None:
        """Open the manifest in ``schema``, creating its tables the first time."""
        self.location = f"{redacted_url(url)}#{schema}"
        self._schema = schema
        # not the key of postgres.writer_lock: an ingestion holds that one on another
        # connection for its whole run, and its own commits would wait for it forever
        self._lock = lock_key(schema, "manifest")
        self._db = connect(url)
        try:
            use_schema(self._db, schema)
            # a long query's postings (200k rows at 100k chunks) are grouped and summed
            # in memory rather than sorted on disk (the default is 4 MB)
            self._db.execute("SET work_mem = '64MB'")
            self._create()
        except BaseException:
            self._db.close()
            raise
        self.keywords = self.keyword_index()

    def _create(self) -> None:
        """The schema and tables, made once under the write lock: concurrent DDL on the
        same names fails (duplicate keys in the catalogs, "tuple concurrently updated"),
        so the first opener builds them all in one transaction and the others find them."""
        if self._ready():
            return
        with self._write_lock():
            if not self._ready():
                self._db.execute(
                    sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(self._schema))
                )
                self._db.execute(_SCHEMA)
                self._db.execute(pg_keywords.SCHEMA)

    def _ready(self) -> bool:
        """Whether the tables exist as this version makes them (the keyword index's newest
        table is made last; a schema without it is brought up to date by ``_create``)."""
        row = self._db.execute(
            "SELECT 1 FROM pg_tables WHERE schemaname = %s AND tablename = %s",
            (self._schema, pg_keywords.NEWEST_TABLE),
        )
        return row.fetchone() is not None

    def keyword_index(
        self,
        postings_budget: int = pg_keywords.DEPTH,
        max_postings: int = pg_keywords.MAX_DEPTH,
        pool: int = pg_keywords.POOL,
    ) -> PgKeywordIndex:
        """The keyword index over this manifest, with the SQLite index's limits read per
        query word: ``postings_budget`` postings of each word first, at most
        ``max_postings``, and ``pool`` chunks rescored (``pg_keywords.PgKeywordIndex``)."""
        return PgKeywordIndex(self._db, postings_budget, max_postings, pool)

    def identity(self) -> int | None:
        """The schema's oid: another value means the collection was dropped (None) or
        made again under this handle, as a new inode does for a manifest file. A lost
        connection (the database restarted) reads as None too, so a long-lived server
        opens the collection again instead of failing every request."""
        try:
            row = self._db.execute(
                "SELECT oid FROM pg_namespace WHERE nspname = %s", (self._schema,)
            ).fetchone()
        except psycopg.OperationalError:
            return None
        return int(row[0]) if row else None

    def size_bytes(self) -> int:
        """Disk space of the manifest's tables with their indexes (not the vectors'), what
        gc reports as freed."""
        row = self._db.execute(
            "SELECT COALESCE(SUM(pg_total_relation_size(c.oid)), 0) FROM pg_class c "
            "JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = %s AND c.relkind = 'r' AND c.relname <> 'vectors'",
            (self._schema,),
        )
        return int(row.fetchone()[0])

    # --- ManifestBase's hooks ---------------------------------------------------------------
    @property
    def _commit_key(self) -> str:
        """``location``: every ``PgManifest`` of this process on the same database and
        schema is one manifest, as every ``Manifest`` on one file is."""
        return self.location

    @contextmanager
    def _write_lock(self) -> Iterator[None]:
        with self._db.transaction():
            # the write lock: no other commit to this schema until ours
            self._db.execute("SELECT pg_advisory_xact_lock(%s)", (self._lock,))
            yield

    def _execute(self, query: str, params: Sequence[Any] = ()) -> psycopg.Cursor[Any]:
        return self._db.execute(question_marks(query), params)

    def _execute_many(self, query: str, rows: Iterable[Sequence[Any]]) -> None:
        with self._db.cursor() as cur:
            cur.executemany(question_marks(query), rows)

    def _in_lists(self, ids: Iterable[str]) -> Iterator[tuple[str, list[Any]]]:
        """One array parameter, however many ids."""
        yield "= ANY(?)", [list(ids)]

    def _add_version(self, *, finished: bool) -> int:
        """Numbered from ``version_counter`` (see the schema): never reused, and no gap
        when the transaction rolls back."""
        now = time.time()
        row = self._db.execute(
            "WITH next AS (INSERT INTO version_counter VALUES (1, 1) ON CONFLICT (one) "
            "DO UPDATE SET last = version_counter.last + 1 RETURNING last) "
            "INSERT INTO versions SELECT last, %s, %s FROM next RETURNING version",
            (now, now if finished else None),
        )
        return int(row.fetchone()[0])

    def _insert_chunks(self, rows: Iterable[tuple[Any, ...]]) -> None:
        """One COPY: the chunk trigger then indexes the file's chunks in one statement."""
        with (
            self._db.cursor() as cur,
            cur.copy(f"COPY chunks ({CHUNK_COLUMNS}) FROM STDIN") as copy,
        ):
            for row in rows:
                copy.write_row(row)

    def _compact(self) -> None:
        """VACUUM FULL of the retired tables, as SQLite's VACUUM gives the space back. It
        locks the tables it rewrites, but no search reads these: only rollback, gc, orphan
        removal and ingestion do, each under the collection's writer lock."""
        self._db.execute(
            sql.SQL("VACUUM FULL {}").format(sql.SQL(", ").join(map(sql.Identifier, _RETIRED)))
        )
