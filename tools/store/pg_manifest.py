"""The manifest of a PostgreSQL collection: ``tools.manifest.Manifest`` in a schema.

The same methods with the same meaning, so ``tools.collection`` and the ingestion
pipeline use either: the tables mirror the SQLite ones, a file's chunks, their keyword
postings (``tools.store.pg_keywords``) and its version record commit in one transaction,
and vector writes still go before that commit and deletions after it. Writers to one
schema take a transaction-scoped advisory lock where SQLite takes its write lock (BEGIN
IMMEDIATE), so generations still rise by one per commit in commit order.

Text key columns use the "C" collation: files and sources list in code-point order and
chunk ids compare as SQLite's BINARY does, whatever the database's locale.
"""

from __future__ import annotations

import json
import time
import uuid
from array import array
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
from psycopg import sql

from tools.config import redacted_url
from tools.documents import Chunk, short_hash
from tools.manifest import _COMMITTED_HERE, DocumentEntry, FileRecord
from tools.store import pg_keywords
from tools.store.pg_keywords import PgKeywordIndex
from tools.store.postgres import connect, use_schema

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS files (
    file TEXT COLLATE "C" PRIMARY KEY, size BIGINT, mtime_ns BIGINT, config_hash TEXT,
    ingested_at DOUBLE PRECISION
);
CREATE TABLE IF NOT EXISTS documents (
    source TEXT COLLATE "C" PRIMARY KEY, file TEXT COLLATE "C" NOT NULL, doc_id TEXT NOT NULL,
    file_hash TEXT NOT NULL, kind TEXT, title TEXT, chunk_count INTEGER
);
CREATE INDEX IF NOT EXISTS documents_file ON documents(file);
-- length: the chunk's length in tokens as BM25 counts it (an empty chunk counts one)
CREATE TABLE IF NOT EXISTS chunks (
    id TEXT COLLATE "C" PRIMARY KEY, source TEXT COLLATE "C" NOT NULL, doc_id TEXT NOT NULL,
    chunk_index INTEGER, kind TEXT, text TEXT NOT NULL, tokens TEXT NOT NULL,
    metadata TEXT NOT NULL,
    length INTEGER GENERATED ALWAYS AS (GREATEST(1, cardinality(string_to_array(tokens, ' '))))
        STORED
);
CREATE INDEX IF NOT EXISTS chunks_source ON chunks(source);
CREATE INDEX IF NOT EXISTS chunks_doc ON chunks(doc_id, chunk_index);
CREATE TABLE IF NOT EXISTS versions (
    version INTEGER PRIMARY KEY, started_at DOUBLE PRECISION NOT NULL,
    finished_at DOUBLE PRECISION
);
-- the last version number handed out, as SQLite keeps an AUTOINCREMENT's: a number is
-- never used twice (an empty run's version is deleted, not reused), and, unlike a
-- sequence's, it goes back with a transaction that rolls back (a refused rollback
-- leaves no gap in the version numbers)
CREATE TABLE IF NOT EXISTS version_counter (
    one INTEGER PRIMARY KEY CHECK (one = 1), last INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS version_files (
    version INTEGER NOT NULL, file TEXT COLLATE "C" NOT NULL, action TEXT NOT NULL,
    content_hash TEXT NOT NULL, chunks INTEGER NOT NULL, PRIMARY KEY (version, file)
);
-- what each version replaced or removed, so the collection can go back to an earlier
-- version without re-embedding (their vectors stay in the store until gc)
CREATE TABLE IF NOT EXISTS retired_files (
    removed_in INTEGER NOT NULL, file TEXT COLLATE "C" NOT NULL, size BIGINT, mtime_ns BIGINT,
    config_hash TEXT, ingested_at DOUBLE PRECISION, PRIMARY KEY (removed_in, file)
);
CREATE TABLE IF NOT EXISTS retired_documents (
    removed_in INTEGER NOT NULL, source TEXT COLLATE "C" NOT NULL, file TEXT COLLATE "C" NOT NULL,
    doc_id TEXT NOT NULL, file_hash TEXT NOT NULL, kind TEXT, title TEXT, chunk_count INTEGER,
    PRIMARY KEY (removed_in, source)
);
CREATE TABLE IF NOT EXISTS retired_chunks (
    removed_in INTEGER NOT NULL, file TEXT COLLATE "C" NOT NULL, id TEXT COLLATE "C" NOT NULL,
    source TEXT COLLATE "C" NOT NULL, doc_id TEXT NOT NULL, chunk_index INTEGER, kind TEXT,
    text TEXT NOT NULL, tokens TEXT NOT NULL, metadata TEXT NOT NULL,
    PRIMARY KEY (removed_in, id)
);
CREATE INDEX IF NOT EXISTS retired_chunks_file ON retired_chunks(file, removed_in);
CREATE INDEX IF NOT EXISTS retired_chunks_id ON retired_chunks(id);
CREATE TABLE IF NOT EXISTS version_notes (version INTEGER PRIMARY KEY, note TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS pending_vectors (
    model TEXT NOT NULL, text_hash TEXT NOT NULL, vector BYTEA NOT NULL,
    PRIMARY KEY (model, text_hash)
);
"""
# the manifest's own tables (the schema also holds the vectors), for size_bytes
_TABLES = (
    "meta",
    "files",
    "documents",
    "chunks",
    "chunk_terms",
    "chunk_totals",
    "versions",
    "version_counter",
    "version_files",
    "retired_files",
    "retired_documents",
    "retired_chunks",
    "version_notes",
    "pending_vectors",
)
_RETIRED = ("retired_chunks", "retired_documents", "retired_files")
# the columns of a chunk that are written (its length is computed from its tokens)
_CHUNK = "id, source, doc_id, chunk_index, kind, text, tokens, metadata"


class PgManifest:
    def __init__(self, url: str, schema: str) -> None:
        """Open the manifest in ``schema``, creating its tables the first time."""
        self.location = f"{redacted_url(url)}#{schema}"
        self._schema = schema
        # not the key of postgres.writer_lock: an ingestion holds that one on another
        # connection for its whole run, and its own commits would wait for it forever
        self._lock = int(short_hash("rag-manifest", schema)[:15], 16)
        self._db = connect(url)
        try:
            use_schema(self._db, schema)
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
        with self._db.transaction():
            self._db.execute("SELECT pg_advisory_xact_lock(%s)", (self._lock,))
            if not self._ready():
                self._db.execute(
                    sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(self._schema))
                )
                self._db.execute(_SCHEMA)
                self._db.execute(pg_keywords.SCHEMA)

    def _ready(self) -> bool:
        """Whether the tables exist (the keyword index's are made last)."""
        row = self._db.execute(
            "SELECT 1 FROM pg_tables WHERE schemaname = %s AND tablename = 'chunk_totals'",
            (self._schema,),
        )
        return row.fetchone() is not None

    def keyword_index(self, **limits: int) -> PgKeywordIndex:
        """The keyword index over this manifest. ``limits`` (the SQLite index's
        postings_budget, max_postings, pool) are accepted and ignored: this search is
        exhaustive, so it has no bound to set."""
        return PgKeywordIndex(self._db)

    def close(self) -> None:
        self._db.close()

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
            "WHERE n.nspname = %s AND c.relname = ANY(%s)",
            (self._schema, list(_TABLES)),
        )
        return int(row.fetchone()[0])

    @contextmanager
    def _transaction(self) -> Iterator[psycopg.Connection]:
        ours = _COMMITTED_HERE.setdefault(self.location, set())
        bumped = None
        try:
            with self._db.transaction():
                # the write lock: no other commit to this schema until ours
                self._db.execute("SELECT pg_advisory_xact_lock(%s)", (self._lock,))
                before = self.generation()
                yield self._db
                if (after := self.generation()) != before:
                    bumped = after
                    ours.add(bumped)  # before COMMIT: a reader must never see it as foreign
        except BaseException:
            ours.discard(bumped)
            raise

    def committed_elsewhere(self, since: int, until: int) -> bool:
        """Whether a generation in (since, until] was committed by another process. Every
        ``PgManifest`` of this process on the same ``location`` counts as this process,
        as every ``Manifest`` on one file does."""
        here = _COMMITTED_HERE.get(self.location, set())
        return any(g not in here for g in range(since + 1, until + 1))

    def last_commit_at(self) -> float:
        """When the latest commit that changed chunks was made (0: before this was kept)."""
        return float(self.meta().get("committed_at", 0))

    # --- collection settings -------------------------------------------------------------
    def meta(self) -> dict[str, Any]:
        return {k: json.loads(v) for k, v in self._db.execute("SELECT key, value FROM meta")}

    def set_meta(self, values: dict[str, Any]) -> None:
        with self._transaction() as db, db.cursor() as cur:
            cur.executemany(
                "INSERT INTO meta VALUES (%s, %s) "
                "ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value",
                [(k, json.dumps(v)) for k, v in values.items()],
            )

    def generation(self) -> int:
        """Bumped by every commit that changes chunks, also by other processes: caches built
        from the manifest (the committed-id set) are keyed by it."""
        row = self._db.execute("SELECT value FROM meta WHERE key = 'generation'").fetchone()
        return int(row[0]) if row else 0

    @staticmethod
    def _bump(db: psycopg.Connection) -> None:
        db.execute(
            "INSERT INTO meta VALUES ('generation', '1') ON CONFLICT (key) "
            "DO UPDATE SET value = (meta.value::bigint + 1)::text"
        )
        db.execute(
            "INSERT INTO meta VALUES ('committed_at', %s) "
            "ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value",
            (str(time.time()),),
        )

    # --- files ------------------------------------------------------------------------------
    def file_record(self, file: str) -> FileRecord | None:
        row = self._db.execute(
            "SELECT file, size, mtime_ns, config_hash FROM files WHERE file = %s", (file,)
        ).fetchone()
        return FileRecord(*row) if row else None

    def files(self) -> list[str]:
        return [r[0] for r in self._db.execute("SELECT file FROM files ORDER BY file")]

    def sources(self) -> list[str]:
        return [r[0] for r in self._db.execute("SELECT source FROM documents ORDER BY source")]

    def document_hashes(self, file: str) -> dict[str, str]:
        rows = self._db.execute("SELECT source, file_hash FROM documents WHERE file = %s", (file,))
        return dict(rows.fetchall())

    def chunk_ids_of_file(self, file: str) -> set[str]:
        rows = self._db.execute(
            "SELECT c.id FROM chunks c JOIN documents d ON c.source = d.source WHERE d.file = %s",
            (file,),
        )
        return {r[0] for r in rows}

    def touch_file(self, record: FileRecord) -> None:
        with self._transaction() as db:
            db.execute(
                "INSERT INTO files VALUES (%s, %s, %s, %s, %s) ON CONFLICT (file) DO UPDATE SET "
                "size = EXCLUDED.size, mtime_ns = EXCLUDED.mtime_ns, "
                "config_hash = EXCLUDED.config_hash, ingested_at = EXCLUDED.ingested_at",
                (record.file, record.size, record.mtime_ns, record.config_hash, time.time()),
            )

    def replace_file(
        self,
        record: FileRecord,
        documents: Iterable[DocumentEntry],
        version: int | None = None,
    ) -> None:
        """Atomically swap everything known about ``record.file`` for ``documents``, and
        record the change in ``version`` (an ingestion run's) in the same transaction."""
        documents = list(documents)
        with self._transaction() as db:
            existed = db.execute("SELECT 1 FROM files WHERE file = %s", (record.file,)).fetchone()
            retire_in = self._first_touch(db, record.file, version)
            if version is not None:
                db.execute(
                    "INSERT INTO version_files VALUES (%s, %s, %s, %s, %s) "
                    "ON CONFLICT (version, file) DO UPDATE SET action = EXCLUDED.action, "
                    "content_hash = EXCLUDED.content_hash, chunks = EXCLUDED.chunks",
                    (
                        version,
                        record.file,
                        "changed" if existed else "added",
                        short_hash("file", *sorted(d.file_hash for d in documents)),
                        sum(len(d.chunks) for d in documents),
                    ),
                )
            self._delete_file(db, record.file, retire_in)
            self._bump(db)
            db.execute(
                "INSERT INTO files VALUES (%s, %s, %s, %s, %s)",
                (record.file, record.size, record.mtime_ns, record.config_hash, time.time()),
            )
            with db.cursor() as cur:
                cur.executemany(
                    "INSERT INTO documents VALUES (%s, %s, %s, %s, %s, %s, %s) "
                    "ON CONFLICT (source) DO UPDATE SET file = EXCLUDED.file, "
                    "doc_id = EXCLUDED.doc_id, file_hash = EXCLUDED.file_hash, "
                    "kind = EXCLUDED.kind, title = EXCLUDED.title, "
                    "chunk_count = EXCLUDED.chunk_count",
                    [
                        (
                            d.source,
                            record.file,
                            d.doc_id,
                            d.file_hash,
                            d.kind,
                            d.title,
                            len(d.chunks),
                        )
                        for d in documents
                    ],
                )
            # by id, the last row winning, as SQLite's INSERT OR REPLACE does
            rows = {
                c.id: (
                    c.id,
                    c.source,
                    c.doc_id,
                    c.chunk_index,
                    c.kind,
                    c.text,
                    " ".join(toks),
                    json.dumps(c.to_metadata()),
                )
                for doc in documents
                for c, toks in doc.chunks
            }
            # a replaced id is deleted and inserted again, so the trigger indexes it anew
            db.execute("DELETE FROM chunks WHERE id = ANY(%s)", (list(rows),))
            with db.cursor() as cur, cur.copy(f"COPY chunks ({_CHUNK}) FROM STDIN") as copy:
                for row in rows.values():
                    copy.write_row(row)

    def remove_file(self, file: str, version: int | None = None) -> None:
        with self._transaction() as db:
            retire_in = self._first_touch(db, file, version)
            if version is not None:
                db.execute(
                    "INSERT INTO version_files VALUES (%s, %s, 'removed', '', 0) "
                    "ON CONFLICT (version, file) DO UPDATE SET action = EXCLUDED.action, "
                    "content_hash = EXCLUDED.content_hash, chunks = EXCLUDED.chunks",
                    (version, file),
                )
            self._delete_file(db, file, retire_in)
            self._bump(db)

    # --- versions: one per ingestion run that changed something ------------------------
    def begin_version(self) -> int:
        with self._transaction() as db:
            return self._add_version(db, finished=False)

    @staticmethod
    def _add_version(db: psycopg.Connection, *, finished: bool) -> int:
        """A new version, numbered after every version ever made."""
        now = time.time()
        row = db.execute(
            "WITH next AS (INSERT INTO version_counter VALUES (1, 1) ON CONFLICT (one) "
            "DO UPDATE SET last = version_counter.last + 1 RETURNING last) "
            "INSERT INTO versions SELECT last, %s, %s FROM next RETURNING version",
            (now, now if finished else None),
        )
        return int(row.fetchone()[0])

    def finish_version(self, version: int) -> None:
        """Close a run's version; a run that changed nothing leaves no version behind."""
        with self._transaction() as db:
            if db.execute("SELECT 1 FROM version_files WHERE version = %s", (version,)).fetchone():
                db.execute(
                    "UPDATE versions SET finished_at = %s WHERE version = %s",
                    (time.time(), version),
                )
            else:
                db.execute("DELETE FROM versions WHERE version = %s", (version,))

    def versions(self) -> list[dict[str, Any]]:
        """Every version, oldest first, with what it changed (an interrupted run's version
        has ``finished_at`` None and lists the files it committed before it stopped)."""
        rows = self._db.execute(
            "SELECT v.version, v.started_at, v.finished_at, "
            "COUNT(*) FILTER (WHERE f.action = 'added'), "
            "COUNT(*) FILTER (WHERE f.action = 'changed'), "
            "COUNT(*) FILTER (WHERE f.action = 'removed'), "
            "n.note FROM versions v JOIN version_files f ON f.version = v.version "
            "LEFT JOIN version_notes n ON n.version = v.version "
            "GROUP BY v.version, n.note ORDER BY v.version"
        )
        keys = ("version", "started_at", "finished_at", "added", "changed", "removed", "note")
        return [dict(zip(keys, row, strict=True)) for row in rows]

    def version(self) -> int | None:
        """The latest version that changed files (None: none recorded yet)."""
        row = self._db.execute("SELECT MAX(version) FROM version_files").fetchone()
        return row[0] if row else None

    def files_at(self, version: int) -> dict[str, tuple[str, int]]:
        """What the collection held after ``version``: {file: (content hash, chunks)}."""
        held: dict[str, tuple[str, int]] = {}
        for file, action, content_hash, chunks in self._db.execute(
            "SELECT file, action, content_hash, chunks FROM version_files WHERE version <= %s "
            "ORDER BY version",
            (version,),
        ):
            if action == "removed":
                held.pop(file, None)
            else:
                held[file] = (content_hash, chunks)
        return held

    def _current_files(self) -> dict[str, tuple[str, int]]:
        """{file: (content hash, chunks)} as committed now, for files some version recorded
        (a file ingested before versions were kept has no past to go back to)."""
        rows = self._db.execute(
            "SELECT f.file, array_remove(array_agg(d.file_hash), NULL), "
            "COALESCE(SUM(d.chunk_count), 0) FROM files f "
            "LEFT JOIN documents d ON d.file = f.file "
            "WHERE f.file IN (SELECT file FROM version_files) GROUP BY f.file"
        )
        return {
            file: (short_hash("file", *sorted(hashes)), int(chunks))
            for file, hashes, chunks in rows
        }

    def restorable_from(self) -> int:
        """The oldest version ``rollback`` can go back to (gc raises it)."""
        return int(self.meta().get("restorable_from", 1))

    def check_restorable(self, target: int) -> None:
        """ValueError saying why the collection cannot be read or rolled back as of
        version ``target`` (no such version, or gc reclaimed it)."""
        known = {v["version"] for v in self.versions()}
        if target not in known:
            raise ValueError(f"no version {target} (versions: {sorted(known) or 'none'})")
        if target < self.restorable_from():
            raise ValueError(
                f"version {target} was reclaimed by gc; the oldest version kept is "
                f"{self.restorable_from()}"
            )

    def rollback(
        self, target: int, has_vectors: Callable[[set[str]], set[str]]
    ) -> tuple[int | None, set[str]]:
        """Make the collection hold what it held after version ``target``, as a new version
        noted "rollback to vN", in one transaction: files changed since are swapped back
        from the retired rows, nothing is re-embedded. ``has_vectors`` says which of the
        chunk ids to restore the vector store holds; if any is missing nothing changes.
        Returns the new version (None when the collection already holds ``target``) and
        the ids restored."""
        self.check_restorable(target)
        with self._transaction() as db:
            want, now = self.files_at(target), self._current_files()
            changed = sorted(f for f in want.keys() | now.keys() if want.get(f) != now.get(f))
            if not changed:
                return None, set()
            new = self._add_version(db, finished=True)
            db.execute("INSERT INTO version_notes VALUES (%s, %s)", (new, f"rollback to v{target}"))
            restored: set[str] = set()
            for file in changed:
                if file in now:
                    self._delete_file(db, file, new)
                if file not in want:
                    db.execute(
                        "INSERT INTO version_files VALUES (%s, %s, 'removed', '', 0)", (new, file)
                    )
                    continue
                restored |= self._restore(db, file, target)
                db.execute(
                    "INSERT INTO version_files VALUES (%s, %s, %s, %s, %s)",
                    (new, file, "changed" if file in now else "added", *want[file]),
                )
            if missing := restored - has_vectors(restored):
                raise ValueError(
                    f"the vector store lacks {len(missing)} of the chunks of version {target}; "
                    "nothing was changed"
                )
            self._bump(db)
        return new, restored

    @staticmethod
    def _restore(db: psycopg.Connection, file: str, target: int) -> set[str]:
        """Put back ``file`` as it was after ``target``: the rows retired by the first
        version after it that changed the file (the chunk trigger indexes them again)."""
        (since,) = db.execute(
            "SELECT MIN(version) FROM version_files WHERE file = %s AND version > %s",
            (file, target),
        ).fetchone()
        if not db.execute(
            "SELECT 1 FROM retired_files WHERE removed_in = %s AND file = %s", (since, file)
        ).fetchone():
            raise ValueError(f"{file} as of version {target} was not kept; nothing was changed")
        db.execute(
            "INSERT INTO files SELECT file, size, mtime_ns, config_hash, ingested_at "
            "FROM retired_files WHERE removed_in = %s AND file = %s",
            (since, file),
        )
        db.execute(
            "INSERT INTO documents SELECT source, file, doc_id, file_hash, kind, title, "
            "chunk_count FROM retired_documents WHERE removed_in = %s AND file = %s",
            (since, file),
        )
        db.execute(  # replaced, as SQLite's INSERT OR REPLACE does
            "DELETE FROM chunks WHERE id IN "
            "(SELECT id FROM retired_chunks WHERE removed_in = %s AND file = %s)",
            (since, file),
        )
        rows = db.execute(
            f"INSERT INTO chunks ({_CHUNK}) SELECT {_CHUNK} FROM retired_chunks "
            "WHERE removed_in = %s AND file = %s RETURNING id",
            (since, file),
        )
        return {r[0] for r in rows}

    def reclaim(self, keep: int) -> tuple[int, set[str]]:
        """Forget what rollback needs for all but the last ``keep`` versions. Returns how
        many retired chunks went, and the ids neither a chunk nor a kept retired row still
        uses (their vectors can go)."""
        latest = self.version() or 0
        floor = max(self.restorable_from(), latest - keep + 1, 1)
        with self._transaction() as db:
            rows = db.execute(
                "DELETE FROM retired_chunks WHERE removed_in <= %s RETURNING id", (floor,)
            )
            removed = [r[0] for r in rows]  # an id retired by several versions: several rows
            db.execute("DELETE FROM retired_documents WHERE removed_in <= %s", (floor,))
            db.execute("DELETE FROM retired_files WHERE removed_in <= %s", (floor,))
            db.execute(
                "INSERT INTO meta VALUES ('restorable_from', %s) "
                "ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value",
                (json.dumps(floor),),
            )
        gone = set(removed)
        used = self.committed(gone)
        used |= {
            r[0]
            for r in self._db.execute(
                "SELECT id FROM retired_chunks WHERE id = ANY(%s)", (list(gone),)
            )
        }
        # give the space back to the file system, as SQLite's VACUUM does. VACUUM FULL locks
        # the tables it rewrites, but no search reads these: only rollback, gc, orphan
        # removal and ingestion do, each under the collection's writer lock
        self._db.execute(
            sql.SQL("VACUUM FULL {}").format(sql.SQL(", ").join(map(sql.Identifier, _RETIRED)))
        )
        return len(removed), gone - used

    def retired_ids(self) -> set[str]:
        """Chunk ids kept for rollback only."""
        return {r[0] for r in self._db.execute("SELECT DISTINCT id FROM retired_chunks")}

    def vector_owners(self) -> set[str]:
        """Every id whose vector must stay: committed chunks, and chunks kept for rollback.
        Any other vector is an orphan (an interrupted ingestion's)."""
        return self.chunk_ids() | self.retired_ids()

    @staticmethod
    def _first_touch(db: psycopg.Connection, file: str, version: int | None) -> int | None:
        """``version`` if it has not changed ``file`` yet: what the file held before the
        version is retired then, and only then (a later commit of the same file in the same
        run replaces what this run wrote, which no version ever showed)."""
        if (
            version is None
            or db.execute(
                "SELECT 1 FROM version_files WHERE version = %s AND file = %s", (version, file)
            ).fetchone()
        ):
            return None
        return version

    @staticmethod
    def _delete_file(db: psycopg.Connection, file: str, retire_in: int | None = None) -> None:
        """Remove ``file`` from the collection (its postings go with its chunks); with
        ``retire_in``, keep its rows as what that version replaced."""
        if retire_in is not None:
            db.execute(
                "INSERT INTO retired_files SELECT %s, * FROM files WHERE file = %s "
                "ON CONFLICT DO NOTHING",
                (retire_in, file),
            )
            db.execute(
                "INSERT INTO retired_documents SELECT %s, * FROM documents WHERE file = %s "
                "ON CONFLICT DO NOTHING",
                (retire_in, file),
            )
            db.execute(
                "INSERT INTO retired_chunks SELECT %s, d.file, c.id, c.source, c.doc_id, "
                "c.chunk_index, c.kind, c.text, c.tokens, c.metadata "
                "FROM chunks c JOIN documents d ON d.source = c.source WHERE d.file = %s "
                "ON CONFLICT DO NOTHING",
                (retire_in, file),
            )
        db.execute(
            "DELETE FROM chunks WHERE source IN (SELECT source FROM documents WHERE file = %s)",
            (file,),
        )
        db.execute("DELETE FROM documents WHERE file = %s", (file,))
        db.execute("DELETE FROM files WHERE file = %s", (file,))

    # --- chunks -----------------------------------------------------------------------------
    def chunk_ids(self) -> set[str]:
        """Every committed id: O(chunks), for maintenance and tests, never per question."""
        return {r[0] for r in self._db.execute("SELECT id FROM chunks")}

    def chunk_count(self) -> int:
        return int(self._db.execute("SELECT chunks FROM chunk_totals").fetchone()[0])

    def committed(self, ids: Iterable[str]) -> set[str]:
        """Which of ``ids`` are committed chunks."""
        rows = self._db.execute("SELECT id FROM chunks WHERE id = ANY(%s)", (list(ids),))
        return {r[0] for r in rows}

    def tokens_of(self, ids: Iterable[str]) -> list[tuple[str, str]]:
        """(id, stored BM25 tokens) of those of ``ids`` that are committed."""
        rows = self._db.execute("SELECT id, tokens FROM chunks WHERE id = ANY(%s)", (list(ids),))
        return [(cid, tokens) for cid, tokens in rows]

    def sample_ids(self, n: int) -> list[str]:
        """Up to ``n`` committed ids from a random place on, without reading them all: ids
        are hex hashes, so a random hex string is a uniformly random place among them."""
        start = uuid.uuid4().hex
        rows = self._db.execute(
            "(SELECT id FROM chunks WHERE id >= %(start)s ORDER BY id LIMIT %(n)s) UNION ALL "
            "(SELECT id FROM chunks WHERE id < %(start)s ORDER BY id LIMIT %(n)s)",
            {"start": start, "n": max(n, 0)},
        ).fetchall()
        return [r[0] for r in rows[:n]]

    def chunks(self, ids: Iterable[str]) -> dict[str, Chunk]:
        rows = self._db.execute(
            "SELECT id, text, metadata FROM chunks WHERE id = ANY(%s)", (list(ids),)
        )
        return {cid: Chunk.from_metadata(text, json.loads(meta)) for cid, text, meta in rows}

    def chunks_of_source(self, source: str) -> list[Chunk]:
        rows = self._db.execute(
            "SELECT text, metadata FROM chunks WHERE source = %s ORDER BY kind, chunk_index",
            (source,),
        )
        return [Chunk.from_metadata(text, json.loads(meta)) for text, meta in rows]

    def neighbours(self, doc_id: str, first: int, last: int) -> list[Chunk]:
        """Plain chunks ``first..last`` (inclusive) of a document, in order."""
        rows = self._db.execute(
            "SELECT text, metadata FROM chunks WHERE doc_id = %s AND kind = 'chunk' "
            "AND chunk_index BETWEEN %s AND %s ORDER BY chunk_index",
            (doc_id, first, last),
        )
        return [Chunk.from_metadata(text, json.loads(meta)) for text, meta in rows]

    # --- vectors embedded for files not committed yet ----------------------------------------
    # As in Manifest: a big file's vectors are kept here as they arrive, so an interrupted
    # run loses no embedding work; they are not chunks and go once the run commits.
    def pending_vectors(self, model: str, hashes: Iterable[str]) -> dict[str, list[float]]:
        rows = self._db.execute(
            "SELECT text_hash, vector FROM pending_vectors "
            "WHERE model = %s AND text_hash = ANY(%s)",
            (model, list(dict.fromkeys(hashes))),
        )
        return {text_hash: array("f", blob).tolist() for text_hash, blob in rows}

    def keep_pending_vectors(self, model: str, vectors: dict[str, list[float]]) -> None:
        with self._transaction() as db, db.cursor() as cur:
            cur.executemany(
                "INSERT INTO pending_vectors VALUES (%s, %s, %s) "
                "ON CONFLICT (model, text_hash) DO UPDATE SET vector = EXCLUDED.vector",
                [(model, h, array("f", v).tobytes()) for h, v in vectors.items()],
            )

    def drop_pending_vectors(self) -> None:
        with self._transaction() as db:
            db.execute("DELETE FROM pending_vectors")

    def stats(self) -> dict[str, int]:
        files, documents = self._db.execute(
            "SELECT (SELECT COUNT(*) FROM files), (SELECT COUNT(*) FROM documents)"
        ).fetchone()
        return {"files": files, "documents": documents, "chunks": self.chunk_count()}
