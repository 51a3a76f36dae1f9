"""The collection manifest: the single source of truth for what is committed.

A manifest records every ingested file, its documents and their chunks (text and BM25
tokens), and holds the keyword index over those tokens, which triggers keep in the same
transactions. Vector-store writes happen *before* a file's manifest transaction and
deletions *after* it, so the manifest commit is the one atomic step: readers only trust
chunk ids the manifest lists, and vectors of an interrupted run are orphans that the next
run removes.

``ManifestBase`` holds that logic once, in SQL that SQLite and PostgreSQL both accept;
its subclasses supply what really differs between the two (placeholders, IN lists, the
write lock, version numbers, bulk inserts, compaction). ``Manifest`` is an embedded
collection's: an SQLite file with the FTS5 index of ``tools.store.keyword_index``;
``tools.store.pg_manifest.PgManifest`` keeps the same tables in a PostgreSQL schema.
"""

from __future__ import annotations

import json
import sqlite3
import time
import uuid
from abc import ABC, abstractmethod
from array import array
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from tools.documents import Chunk, short_hash
from tools.store.keyword_index import KeywordIndex, prepare
from tools.text import TOKENIZER_VERSION

if TYPE_CHECKING:
    import psycopg

SCHEMA_VERSION = 1  # bump when the tables below change in a way old code cannot read
# what an index built by this code records; another value means another format
VERSIONS = {"schema_version": SCHEMA_VERSION, "tokenizer_version": TOKENIZER_VERSION}

# The tables of a manifest, in either database: the shared statements rely on this one
# layout (some insert by column position). Per database, {key} is the type of the text
# columns rows are looked up and listed by, {blob} the type of bytes, and {autoincrement}
# makes SQLite never reuse a version number (PostgreSQL keeps a counter instead). BIGINT
# and DOUBLE PRECISION have SQLite's INTEGER and REAL affinities.
TABLES = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS files (
    file {key} PRIMARY KEY, size BIGINT, mtime_ns BIGINT, config_hash TEXT,
    ingested_at DOUBLE PRECISION
);
CREATE TABLE IF NOT EXISTS documents (
    source {key} PRIMARY KEY, file {key} NOT NULL, doc_id TEXT NOT NULL,
    file_hash TEXT NOT NULL, kind TEXT, title TEXT, chunk_count INTEGER
);
CREATE INDEX IF NOT EXISTS documents_file ON documents(file);
CREATE TABLE IF NOT EXISTS chunks (
    id {key} PRIMARY KEY, source {key} NOT NULL, doc_id TEXT NOT NULL, chunk_index INTEGER,
    kind TEXT, text TEXT NOT NULL, tokens TEXT NOT NULL, metadata TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS chunks_source ON chunks(source);
CREATE INDEX IF NOT EXISTS chunks_doc ON chunks(doc_id, chunk_index);
CREATE TABLE IF NOT EXISTS versions (
    version INTEGER PRIMARY KEY{autoincrement}, started_at DOUBLE PRECISION NOT NULL,
    finished_at DOUBLE PRECISION
);
CREATE TABLE IF NOT EXISTS version_files (
    version INTEGER NOT NULL, file {key} NOT NULL, action TEXT NOT NULL,
    content_hash TEXT NOT NULL, chunks INTEGER NOT NULL, PRIMARY KEY (version, file)
);
-- what each version replaced or removed, so the collection can go back to an earlier
-- version without re-embedding (their vectors stay in the store until gc)
CREATE TABLE IF NOT EXISTS retired_files (
    removed_in INTEGER NOT NULL, file {key} NOT NULL, size BIGINT, mtime_ns BIGINT,
    config_hash TEXT, ingested_at DOUBLE PRECISION, PRIMARY KEY (removed_in, file)
);
CREATE TABLE IF NOT EXISTS retired_documents (
    removed_in INTEGER NOT NULL, source {key} NOT NULL, file {key} NOT NULL,
    doc_id TEXT NOT NULL, file_hash TEXT NOT NULL, kind TEXT, title TEXT, chunk_count INTEGER,
    PRIMARY KEY (removed_in, source)
);
CREATE TABLE IF NOT EXISTS retired_chunks (
    removed_in INTEGER NOT NULL, file {key} NOT NULL, id {key} NOT NULL,
    source {key} NOT NULL, doc_id TEXT NOT NULL, chunk_index INTEGER, kind TEXT,
    text TEXT NOT NULL, tokens TEXT NOT NULL, metadata TEXT NOT NULL,
    PRIMARY KEY (removed_in, id)
);
CREATE INDEX IF NOT EXISTS retired_chunks_file ON retired_chunks(file, removed_in);
CREATE INDEX IF NOT EXISTS retired_chunks_id ON retired_chunks(id);
CREATE TABLE IF NOT EXISTS version_notes (version INTEGER PRIMARY KEY, note TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS pending_vectors (
    model TEXT NOT NULL, text_hash TEXT NOT NULL, vector {blob} NOT NULL,
    PRIMARY KEY (model, text_hash)
);
"""
_SCHEMA = TABLES.format(key="TEXT", blob="BLOB", autoincrement=" AUTOINCREMENT")


@dataclass(frozen=True)
class FileRecord:
    file: str
    size: int
    mtime_ns: int
    config_hash: str


@dataclass(frozen=True)
class DocumentEntry:
    """A document's chunks as they will be committed, with each chunk's BM25 tokens."""

    source: str
    doc_id: str
    file_hash: str
    kind: str
    title: str
    chunks: list[tuple[Chunk, list[str]]]


# the generations each manifest (a file, or a PostgreSQL schema) reached by commits of
# *this* process: any other generation came from another process (see Collection.outdated)
_COMMITTED_HERE: dict[str, set[int]] = {}

# the columns of a chunk that are written (PostgreSQL computes one more from the tokens)
CHUNK_COLUMNS = "id, source, doc_id, chunk_index, kind, text, tokens, metadata"


def _upsert(table: str, key: str, columns: str) -> str:
    """SQLite's ``INSERT OR REPLACE`` as both databases write it: a row of ``key`` and
    ``columns`` (comma-separated names), or the update of the row with that key. The same
    on the tables it serves, which have no triggers (chunks, whose triggers keep the
    keyword index, are deleted and inserted again instead)."""
    names = f"{key}, {columns}"
    updates = ", ".join(f"{c} = excluded.{c}" for c in columns.split(", "))
    values = ", ".join("?" * len(names.split(", ")))
    return (
        f"INSERT INTO {table} ({names}) VALUES ({values}) "
        f"ON CONFLICT ({key}) DO UPDATE SET {updates}"
    )


_SET_META = _upsert("meta", "key", "value")
_SET_FILE = _upsert("files", "file", "size, mtime_ns, config_hash, ingested_at")
_SET_DOCUMENT = _upsert("documents", "source", "file, doc_id, file_hash, kind, title, chunk_count")
_SET_VERSION_FILE = _upsert("version_files", "version, file", "action, content_hash, chunks")
_SET_PENDING_VECTOR = _upsert("pending_vectors", "model, text_hash", "vector")


class _Rows(Protocol):
    """A cursor of either database's driver, as the shared methods read it."""

    def fetchone(self) -> Any: ...

    def fetchall(self) -> list[Any]: ...

    def __iter__(self) -> Iterator[Any]: ...


class ManifestBase(ABC):
    """Every manifest method whose logic does not depend on the database, written once.

    Statements use ``?`` placeholders and standard SQL (upserts with ``ON CONFLICT``,
    ``RETURNING``, ``FILTER``) that SQLite and PostgreSQL both run; ``{in_list}`` in a
    statement stands for "is one of these ids", which each backend writes its own way.
    The abstract methods are the hooks a backend implements. All writes go through
    ``_transaction``, so generations rise by one per commit, in commit order."""

    _db: sqlite3.Connection | psycopg.Connection  # the backend's, opened by its __init__

    @property
    @abstractmethod
    def _commit_key(self) -> str:
        """What names this manifest to every handle of this process (its file, its schema)."""

    @abstractmethod
    def _write_lock(self) -> AbstractContextManager[None]:
        """A write transaction holding the manifest's write lock (no other commit until it
        ends): committed when the block ends, rolled back when it raises."""

    @abstractmethod
    def _execute(self, sql: str, params: Sequence[Any] = ()) -> _Rows:
        """Run one statement written with ``?`` placeholders."""

    @abstractmethod
    def _execute_many(self, sql: str, rows: Iterable[Sequence[Any]]) -> None:
        """Run one statement written with ``?`` placeholders for each of ``rows``."""

    @abstractmethod
    def _in_lists(self, ids: Iterable[str]) -> Iterator[tuple[str, list[Any]]]:
        """How to say "is one of ``ids``": ``(in_list, params)`` pairs, ``column {in_list}``
        with ``params`` holding for the ids of one part, the parts covering ``ids``."""

    @abstractmethod
    def _add_version(self, *, finished: bool) -> int:
        """A new version, numbered after every version ever made (inside a transaction)."""

    @abstractmethod
    def _insert_chunks(self, rows: Iterable[tuple[Any, ...]]) -> None:
        """Insert chunk rows (``CHUNK_COLUMNS``, ids not in the table) in bulk."""

    @abstractmethod
    def _compact(self) -> None:
        """Give the space ``reclaim`` freed back to the file system."""

    def close(self) -> None:
        self._db.close()

    @contextmanager
    def _transaction(self) -> Iterator[None]:
        """The write transaction of every commit. The generation a commit reaches is
        recorded as this process's before the commit shows it to any reader."""
        ours = _COMMITTED_HERE.setdefault(self._commit_key, set())
        bumped = None
        try:
            with self._write_lock():
                before = self.generation()
                yield
                if (after := self.generation()) != before:
                    bumped = after
                    ours.add(bumped)  # before COMMIT: a reader must never see it as foreign
        except BaseException:
            ours.discard(bumped)
            raise

    def committed_elsewhere(self, since: int, until: int) -> bool:
        """Whether a generation in (since, until] was committed by another process. Every
        handle of this process on the same manifest counts as this process."""
        here = _COMMITTED_HERE.get(self._commit_key, set())
        return any(g not in here for g in range(since + 1, until + 1))

    def last_commit_at(self) -> float:
        """When the latest commit that changed chunks was made (0: before this was kept)."""
        return float(self.meta().get("committed_at", 0))

    # --- collection settings -------------------------------------------------------------
    def meta(self) -> dict[str, Any]:
        return {k: json.loads(v) for k, v in self._execute("SELECT key, value FROM meta")}

    def set_meta(self, values: dict[str, Any]) -> None:
        with self._transaction():
            self._execute_many(_SET_META, [(k, json.dumps(v)) for k, v in values.items()])

    def record_versions(self) -> None:
        """Record ``VERSIONS`` in a new collection (``Collection.check`` compares them)."""
        unrecorded = {k: v for k, v in VERSIONS.items() if k not in self.meta()}
        if unrecorded:
            self.set_meta(unrecorded)

    def generation(self) -> int:
        """Bumped by every commit that changes chunks, also by other processes: caches built
        from the manifest (the BM25 index, the committed-id set) are keyed by it."""
        row = self._execute("SELECT value FROM meta WHERE key = 'generation'").fetchone()
        return int(row[0]) if row else 0

    def _bump(self) -> None:
        self._execute(
            "INSERT INTO meta VALUES ('generation', '1') ON CONFLICT (key) "
            "DO UPDATE SET value = CAST(CAST(meta.value AS BIGINT) + 1 AS TEXT)"
        )
        self._execute(_SET_META, ("committed_at", str(time.time())))

    # --- files ------------------------------------------------------------------------------
    def file_record(self, file: str) -> FileRecord | None:
        row = self._execute(
            "SELECT file, size, mtime_ns, config_hash FROM files WHERE file = ?", (file,)
        ).fetchone()
        return FileRecord(*row) if row else None

    def files(self) -> list[str]:
        return [r[0] for r in self._execute("SELECT file FROM files ORDER BY file")]

    def sources(self) -> list[str]:
        return [r[0] for r in self._execute("SELECT source FROM documents ORDER BY source")]

    def document_hashes(self, file: str) -> dict[str, str]:
        rows = self._execute("SELECT source, file_hash FROM documents WHERE file = ?", (file,))
        return dict(rows.fetchall())

    def chunk_ids_of_file(self, file: str) -> set[str]:
        rows = self._execute(
            "SELECT c.id FROM chunks c JOIN documents d ON c.source = d.source WHERE d.file = ?",
            (file,),
        )
        return {r[0] for r in rows}

    def touch_file(self, record: FileRecord) -> None:
        with self._transaction():
            self._execute(
                _SET_FILE,
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
        with self._transaction():
            existed = self._execute("SELECT 1 FROM files WHERE file = ?", (record.file,)).fetchone()
            retire_in = self._first_touch(record.file, version)
            if version is not None:
                self._execute(
                    _SET_VERSION_FILE,
                    (
                        version,
                        record.file,
                        "changed" if existed else "added",
                        short_hash("file", *sorted(d.file_hash for d in documents)),
                        sum(len(d.chunks) for d in documents),
                    ),
                )
            self._delete_file(record.file, retire_in)
            self._bump()
            self._execute(
                "INSERT INTO files VALUES (?, ?, ?, ?, ?)",
                (record.file, record.size, record.mtime_ns, record.config_hash, time.time()),
            )
            self._execute_many(
                _SET_DOCUMENT,
                [
                    (d.source, record.file, d.doc_id, d.file_hash, d.kind, d.title, len(d.chunks))
                    for d in documents
                ],
            )
            # by id, the last row winning, as SQLite's INSERT OR REPLACE would
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
            # a replaced id is deleted and inserted again, so the keyword index's triggers
            # index it anew
            for in_list, params in self._in_lists(rows):
                self._execute(f"DELETE FROM chunks WHERE id {in_list}", params)
            self._insert_chunks(rows.values())

    def remove_file(self, file: str, version: int | None = None) -> None:
        with self._transaction():
            retire_in = self._first_touch(file, version)
            if version is not None:
                self._execute(_SET_VERSION_FILE, (version, file, "removed", "", 0))
            self._delete_file(file, retire_in)
            self._bump()

    # --- versions: one per ingestion run that changed something ------------------------
    def begin_version(self) -> int:
        with self._transaction():
            return self._add_version(finished=False)

    def finish_version(self, version: int) -> None:
        """Close a run's version; a run that changed nothing leaves no version behind."""
        with self._transaction():
            if self._execute(
                "SELECT 1 FROM version_files WHERE version = ?", (version,)
            ).fetchone():
                self._execute(
                    "UPDATE versions SET finished_at = ? WHERE version = ?", (time.time(), version)
                )
            else:
                self._execute("DELETE FROM versions WHERE version = ?", (version,))

    def versions(self) -> list[dict[str, Any]]:
        """Every version, oldest first, with what it changed (an interrupted run's version
        has ``finished_at`` None and lists the files it committed before it stopped)."""
        rows = self._execute(
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
        row = self._execute("SELECT MAX(version) FROM version_files").fetchone()
        return row[0] if row else None

    def files_at(self, version: int) -> dict[str, tuple[str, int]]:
        """What the collection held after ``version``: {file: (content hash, chunks)}."""
        held: dict[str, tuple[str, int]] = {}
        for file, action, content_hash, chunks in self._execute(
            "SELECT file, action, content_hash, chunks FROM version_files WHERE version <= ? "
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
        hashes: defaultdict[str, list[str]] = defaultdict(list)
        chunks: defaultdict[str, int] = defaultdict(int)
        for file, file_hash, chunk_count in self._execute(
            "SELECT f.file, d.file_hash, d.chunk_count FROM files f "
            "LEFT JOIN documents d ON d.file = f.file "
            "WHERE f.file IN (SELECT file FROM version_files)"
        ):
            hashes[file] += [file_hash] if file_hash is not None else []
            chunks[file] += chunk_count or 0
        return {file: (short_hash("file", *sorted(h)), chunks[file]) for file, h in hashes.items()}

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
        with self._transaction():
            want, now = self.files_at(target), self._current_files()
            changed = sorted(f for f in want.keys() | now.keys() if want.get(f) != now.get(f))
            if not changed:
                return None, set()
            new = self._add_version(finished=True)
            self._execute(
                "INSERT INTO version_notes VALUES (?, ?)", (new, f"rollback to v{target}")
            )
            restored: set[str] = set()
            for file in changed:
                if file in now:
                    self._delete_file(file, new)
                if file not in want:
                    self._execute(
                        "INSERT INTO version_files VALUES (?, ?, 'removed', '', 0)", (new, file)
                    )
                    continue
                restored |= self._restore(file, target)
                self._execute(
                    "INSERT INTO version_files VALUES (?, ?, ?, ?, ?)",
                    (new, file, "changed" if file in now else "added", *want[file]),
                )
            if missing := restored - has_vectors(restored):
                raise ValueError(
                    f"the vector store lacks {len(missing)} of the chunks of version {target}; "
                    "nothing was changed"
                )
            self._bump()
        return new, restored

    def _restore(self, file: str, target: int) -> set[str]:
        """Put back ``file`` as it was after ``target``: the rows retired by the first
        version after it that changed the file (the keyword index's triggers index its
        chunks again)."""
        (since,) = self._execute(
            "SELECT MIN(version) FROM version_files WHERE file = ? AND version > ?",
            (file, target),
        ).fetchone()
        if not self._execute(
            "SELECT 1 FROM retired_files WHERE removed_in = ? AND file = ?", (since, file)
        ).fetchone():
            raise ValueError(f"{file} as of version {target} was not kept; nothing was changed")
        self._execute(
            "INSERT INTO files SELECT file, size, mtime_ns, config_hash, ingested_at "
            "FROM retired_files WHERE removed_in = ? AND file = ?",
            (since, file),
        )
        self._execute(
            "INSERT INTO documents SELECT source, file, doc_id, file_hash, kind, title, "
            "chunk_count FROM retired_documents WHERE removed_in = ? AND file = ?",
            (since, file),
        )
        self._execute(  # replaced, as SQLite's INSERT OR REPLACE would
            "DELETE FROM chunks WHERE id IN "
            "(SELECT id FROM retired_chunks WHERE removed_in = ? AND file = ?)",
            (since, file),
        )
        rows = self._execute(
            f"INSERT INTO chunks ({CHUNK_COLUMNS}) SELECT {CHUNK_COLUMNS} FROM retired_chunks "
            "WHERE removed_in = ? AND file = ? RETURNING id",
            (since, file),
        )
        return {r[0] for r in rows}

    def reclaim(self, keep: int) -> tuple[int, set[str]]:
        """Forget what rollback needs for all but the last ``keep`` versions. Returns how
        many retired chunks went, and the ids neither a chunk nor a kept retired row still
        uses (their vectors can go)."""
        latest = self.version() or 0
        floor = max(self.restorable_from(), latest - keep + 1, 1)
        with self._transaction():
            rows = self._execute(
                "DELETE FROM retired_chunks WHERE removed_in <= ? RETURNING id", (floor,)
            )
            removed = [r[0] for r in rows]  # an id retired by several versions: several rows
            for table in ("retired_documents", "retired_files"):
                self._execute(f"DELETE FROM {table} WHERE removed_in <= ?", (floor,))
            self._execute(_SET_META, ("restorable_from", json.dumps(floor)))
        gone = set(removed)
        used = self.committed(gone)
        used |= {
            r[0] for r in self._select_in("SELECT id FROM retired_chunks WHERE id {in_list}", gone)
        }
        self._compact()
        return len(removed), gone - used

    def retired_ids(self) -> set[str]:
        """Chunk ids kept for rollback only."""
        return {r[0] for r in self._execute("SELECT DISTINCT id FROM retired_chunks")}

    def vector_owners(self) -> set[str]:
        """Every id whose vector must stay: committed chunks, and chunks kept for rollback.
        Any other vector is an orphan (an interrupted ingestion's)."""
        return self.chunk_ids() | self.retired_ids()

    def _first_touch(self, file: str, version: int | None) -> int | None:
        """``version`` if it has not changed ``file`` yet: what the file held before the
        version is retired then, and only then (a later commit of the same file in the same
        run replaces what this run wrote, which no version ever showed)."""
        if (
            version is None
            or self._execute(
                "SELECT 1 FROM version_files WHERE version = ? AND file = ?", (version, file)
            ).fetchone()
        ):
            return None
        return version

    def _delete_file(self, file: str, retire_in: int | None = None) -> None:
        """Remove ``file`` from the collection (its keyword postings go with its chunks);
        with ``retire_in``, keep its rows as what that version replaced."""
        if retire_in is not None:
            self._execute(
                "INSERT INTO retired_files SELECT ?, file, size, mtime_ns, config_hash, "
                "ingested_at FROM files WHERE file = ? ON CONFLICT DO NOTHING",
                (retire_in, file),
            )
            self._execute(
                "INSERT INTO retired_documents SELECT ?, source, file, doc_id, file_hash, kind, "
                "title, chunk_count FROM documents WHERE file = ? ON CONFLICT DO NOTHING",
                (retire_in, file),
            )
            self._execute(
                "INSERT INTO retired_chunks SELECT ?, d.file, c.id, c.source, c.doc_id, "
                "c.chunk_index, c.kind, c.text, c.tokens, c.metadata "
                "FROM chunks c JOIN documents d ON d.source = c.source WHERE d.file = ? "
                "ON CONFLICT DO NOTHING",
                (retire_in, file),
            )
        self._execute(
            "DELETE FROM chunks WHERE source IN (SELECT source FROM documents WHERE file = ?)",
            (file,),
        )
        self._execute("DELETE FROM documents WHERE file = ?", (file,))
        self._execute("DELETE FROM files WHERE file = ?", (file,))

    # --- chunks -----------------------------------------------------------------------------
    def chunk_ids(self) -> set[str]:
        """Every committed id: O(chunks), for maintenance and tests, never per question."""
        return {r[0] for r in self._execute("SELECT id FROM chunks")}

    def chunk_count(self) -> int:
        return int(self._execute("SELECT chunks FROM chunk_totals").fetchone()[0])

    def _select_in(self, sql: str, ids: Iterable[str], *params: Any) -> Iterator[tuple[Any, ...]]:
        """Rows of ``sql``, its ``{in_list}`` meaning "in ``ids``" and its other
        placeholders, before that list, filled with ``params``."""
        for in_list, values in self._in_lists(ids):
            yield from self._execute(sql.format(in_list=in_list), (*params, *values))

    def committed(self, ids: Iterable[str]) -> set[str]:
        """Which of ``ids`` are committed chunks."""
        return {r[0] for r in self._select_in("SELECT id FROM chunks WHERE id {in_list}", ids)}

    def tokens_of(self, ids: Iterable[str]) -> list[tuple[str, str]]:
        """(id, stored BM25 tokens) of those of ``ids`` that are committed."""
        rows = self._select_in("SELECT id, tokens FROM chunks WHERE id {in_list}", ids)
        return [(cid, tokens) for cid, tokens in rows]

    def sample_ids(self, n: int) -> list[str]:
        """Up to ``n`` committed ids from a random place on, without reading them all: ids
        are hex hashes, so a random hex string is a uniformly random place among them."""
        start, n = uuid.uuid4().hex, max(n, 0)
        rows = self._execute(
            "SELECT id FROM (SELECT id FROM chunks WHERE id >= ? ORDER BY id LIMIT ?) AS later "
            "UNION ALL "
            "SELECT id FROM (SELECT id FROM chunks WHERE id < ? ORDER BY id LIMIT ?) AS earlier",
            (start, n, start, n),
        ).fetchall()
        return [r[0] for r in rows[:n]]

    def chunks(self, ids: Iterable[str]) -> dict[str, Chunk]:
        rows = self._select_in("SELECT id, text, metadata FROM chunks WHERE id {in_list}", ids)
        return {cid: Chunk.from_metadata(text, json.loads(meta)) for cid, text, meta in rows}

    def chunks_of_source(self, source: str) -> list[Chunk]:
        rows = self._execute(
            "SELECT text, metadata FROM chunks WHERE source = ? ORDER BY kind, chunk_index",
            (source,),
        )
        return [Chunk.from_metadata(text, json.loads(meta)) for text, meta in rows]

    def neighbours(self, doc_id: str, first: int, last: int) -> list[Chunk]:
        """Plain chunks ``first..last`` (inclusive) of a document, in order."""
        rows = self._execute(
            "SELECT text, metadata FROM chunks WHERE doc_id = ? AND kind = 'chunk' "
            "AND chunk_index BETWEEN ? AND ? ORDER BY chunk_index",
            (doc_id, first, last),
        )
        return [Chunk.from_metadata(text, json.loads(meta)) for text, meta in rows]

    # --- vectors embedded for files not committed yet ----------------------------------------
    # A big file is one commit, and embedding it can take an hour: its vectors are kept
    # here as they arrive, so an interrupted run loses no embedding work and the next run
    # resumes. They are not chunks (no reader sees them) and go once the run commits.
    def pending_vectors(self, model: str, hashes: Iterable[str]) -> dict[str, list[float]]:
        rows = self._select_in(
            "SELECT text_hash, vector FROM pending_vectors WHERE model = ? AND text_hash {in_list}",
            dict.fromkeys(hashes),
            model,
        )
        return {text_hash: array("f", blob).tolist() for text_hash, blob in rows}

    def keep_pending_vectors(self, model: str, vectors: dict[str, list[float]]) -> None:
        with self._transaction():
            self._execute_many(
                _SET_PENDING_VECTOR,
                [(model, h, array("f", v).tobytes()) for h, v in vectors.items()],
            )

    def drop_pending_vectors(self) -> None:
        with self._transaction():
            self._execute("DELETE FROM pending_vectors")

    def stats(self) -> dict[str, int]:
        files, documents = self._execute(
            "SELECT (SELECT COUNT(*) FROM files), (SELECT COUNT(*) FROM documents)"
        ).fetchone()
        return {"files": files, "documents": documents, "chunks": self.chunk_count()}


class Manifest(ManifestBase):
    """An embedded collection's manifest: one SQLite file, with its FTS5 keyword index."""

    _db: sqlite3.Connection

    def __init__(self, path: Path, *, verify: bool = False) -> None:
        """``verify`` reads every page first (O(size): 0.8 s at 100k chunks), so that
        damage stops an ingestion before it writes; readers open in constant time."""
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.executescript(_SCHEMA)
        problem = self._db.execute("PRAGMA quick_check").fetchone()[0] if verify else "ok"
        if problem != "ok":  # damaged pages would otherwise surface mid-run, or never
            raise sqlite3.DatabaseError(f"integrity check failed: {problem}")
        prepare(self._db)
        self.keywords = self.keyword_index()

    def keyword_index(self, **limits: int) -> KeywordIndex:
        """The keyword index over this manifest; ``limits`` (postings_budget, max_postings,
        pool) replace its defaults: tests and bench_scale compare the bounded search with
        an exhaustive one."""
        return KeywordIndex(self._db, self.generation, **limits)

    def identity(self) -> tuple[int, int] | None:
        """The file's device and inode: another value means the collection was deleted
        (None) or rebuilt (a new file) under this handle."""
        try:
            found = self.path.stat()
        except FileNotFoundError:
            return None
        return found.st_dev, found.st_ino

    def size_bytes(self) -> int:
        """Disk space of the file and its write-ahead log, what gc reports as freed."""
        files = (self.path, Path(f"{self.path}-wal"))
        return sum(f.stat().st_size for f in files if f.exists())

    # --- ManifestBase's hooks ---------------------------------------------------------------
    @property
    def _commit_key(self) -> str:
        return str(self.path)

    @contextmanager
    def _write_lock(self) -> Iterator[None]:
        self._db.execute("BEGIN IMMEDIATE")  # the write lock: no other commit until ours
        try:
            yield
            self._db.execute("COMMIT")
        except BaseException:
            if self._db.in_transaction:
                self._db.execute("ROLLBACK")
            raise

    def _execute(self, sql: str, params: Sequence[Any] = ()) -> sqlite3.Cursor:
        return self._db.execute(sql, params)

    def _execute_many(self, sql: str, rows: Iterable[Sequence[Any]]) -> None:
        self._db.executemany(sql, rows)

    def _in_lists(self, ids: Iterable[str]) -> Iterator[tuple[str, list[Any]]]:
        """IN lists of up to 500 ids, under SQLite's limit on the variables of a statement."""
        ids = list(ids)
        for start in range(0, len(ids), 500):
            part = ids[start : start + 500]
            yield f"IN ({','.join('?' * len(part))})", part

    def _add_version(self, *, finished: bool) -> int:
        """Numbered by AUTOINCREMENT: never reused, even once an empty run's is deleted."""
        now = time.time()
        cursor = self._db.execute(
            "INSERT INTO versions (started_at, finished_at) VALUES (?, ?)",
            (now, now if finished else None),
        )
        return int(cursor.lastrowid or 0)

    def _insert_chunks(self, rows: Iterable[tuple[Any, ...]]) -> None:
        self._db.executemany(
            f"INSERT INTO chunks ({CHUNK_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?)", rows
        )

    def _compact(self) -> None:
        self._db.execute("VACUUM")  # give the space back to the file system...
        self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # ...from the WAL too
