"""The collection manifest: the single source of truth for what is committed.

A SQLite file per collection records every ingested file, its documents and their
chunks (text and BM25 tokens), and holds the keyword index over those tokens
(``tools.keyword_index``), which triggers keep in the same transactions.
Vector-store writes happen *before* a file's manifest transaction and deletions
*after* it, so the manifest commit is the one atomic step: readers only trust chunk
ids the manifest lists, and vectors of an interrupted run are orphans that the next
run removes.
"""

from __future__ import annotations

import json
import sqlite3
import time
from array import array
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tools.documents import Chunk, short_hash
from tools.keyword_index import KeywordIndex, prepare

SCHEMA_VERSION = 1  # bump when the tables below change in a way old code cannot read
_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS files (
    file TEXT PRIMARY KEY, size INTEGER, mtime_ns INTEGER, config_hash TEXT, ingested_at REAL
);
CREATE TABLE IF NOT EXISTS documents (
    source TEXT PRIMARY KEY, file TEXT NOT NULL, doc_id TEXT NOT NULL, file_hash TEXT NOT NULL,
    kind TEXT, title TEXT, chunk_count INTEGER
);
CREATE INDEX IF NOT EXISTS documents_file ON documents(file);
CREATE TABLE IF NOT EXISTS chunks (
    id TEXT PRIMARY KEY, source TEXT NOT NULL, doc_id TEXT NOT NULL, chunk_index INTEGER,
    kind TEXT, text TEXT NOT NULL, tokens TEXT NOT NULL, metadata TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS chunks_source ON chunks(source);
CREATE INDEX IF NOT EXISTS chunks_doc ON chunks(doc_id, chunk_index);
CREATE TABLE IF NOT EXISTS versions (
    version INTEGER PRIMARY KEY AUTOINCREMENT, started_at REAL NOT NULL, finished_at REAL
);
CREATE TABLE IF NOT EXISTS version_files (
    version INTEGER NOT NULL, file TEXT NOT NULL, action TEXT NOT NULL,
    content_hash TEXT NOT NULL, chunks INTEGER NOT NULL, PRIMARY KEY (version, file)
);
CREATE TABLE IF NOT EXISTS pending_vectors (
    model TEXT NOT NULL, text_hash TEXT NOT NULL, vector BLOB NOT NULL,
    PRIMARY KEY (model, text_hash)
);
"""


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


# the generations each manifest file reached by commits of *this* process: any other
# generation came from another process (see Collection.outdated)
_COMMITTED_HERE: dict[str, set[int]] = {}


class Manifest:
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

    def close(self) -> None:
        self._db.close()

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        self._db.execute("BEGIN IMMEDIATE")  # the write lock: no other commit until ours
        ours = _COMMITTED_HERE.setdefault(str(self.path), set())
        bumped = None
        try:
            before = self.generation()
            yield self._db
            if (after := self.generation()) != before:
                bumped = after
                ours.add(bumped)  # before COMMIT: a reader must never see it as foreign
            self._db.execute("COMMIT")
        except BaseException:
            ours.discard(bumped)
            if self._db.in_transaction:
                self._db.execute("ROLLBACK")
            raise

    def committed_elsewhere(self, since: int, until: int) -> bool:
        """Whether a generation in (since, until] was committed by another process."""
        here = _COMMITTED_HERE.get(str(self.path), set())
        return any(g not in here for g in range(since + 1, until + 1))

    def last_commit_at(self) -> float:
        """When the latest commit that changed chunks was made (0: before this was kept)."""
        return float(self.meta().get("committed_at", 0))

    # --- collection settings -------------------------------------------------------------
    def meta(self) -> dict[str, Any]:
        return {k: json.loads(v) for k, v in self._db.execute("SELECT key, value FROM meta")}

    def set_meta(self, values: dict[str, Any]) -> None:
        with self._transaction() as db:
            db.executemany(
                "INSERT OR REPLACE INTO meta VALUES (?, ?)",
                [(k, json.dumps(v)) for k, v in values.items()],
            )

    def generation(self) -> int:
        """Bumped by every commit that changes chunks, also by other processes: caches built
        from the manifest (the BM25 index, the committed-id set) are keyed by it."""
        row = self._db.execute("SELECT value FROM meta WHERE key = 'generation'").fetchone()
        return int(row[0]) if row else 0

    @staticmethod
    def _bump(db: sqlite3.Connection) -> None:
        db.execute(
            "INSERT INTO meta VALUES ('generation', '1') ON CONFLICT(key) "
            "DO UPDATE SET value = CAST(value AS INTEGER) + 1"
        )
        db.execute("INSERT OR REPLACE INTO meta VALUES ('committed_at', ?)", (str(time.time()),))

    # --- files ------------------------------------------------------------------------------
    def file_record(self, file: str) -> FileRecord | None:
        row = self._db.execute(
            "SELECT file, size, mtime_ns, config_hash FROM files WHERE file = ?", (file,)
        ).fetchone()
        return FileRecord(*row) if row else None

    def files(self) -> list[str]:
        return [r[0] for r in self._db.execute("SELECT file FROM files ORDER BY file")]

    def sources(self) -> list[str]:
        return [r[0] for r in self._db.execute("SELECT source FROM documents ORDER BY source")]

    def document_hashes(self, file: str) -> dict[str, str]:
        rows = self._db.execute("SELECT source, file_hash FROM documents WHERE file = ?", (file,))
        return dict(rows.fetchall())

    def chunk_ids_of_file(self, file: str) -> set[str]:
        rows = self._db.execute(
            "SELECT c.id FROM chunks c JOIN documents d ON c.source = d.source WHERE d.file = ?",
            (file,),
        )
        return {r[0] for r in rows}

    def touch_file(self, record: FileRecord) -> None:
        with self._transaction() as db:
            db.execute(
                "INSERT OR REPLACE INTO files VALUES (?, ?, ?, ?, ?)",
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
            existed = db.execute("SELECT 1 FROM files WHERE file = ?", (record.file,)).fetchone()
            if version is not None:
                db.execute(
                    "INSERT OR REPLACE INTO version_files VALUES (?, ?, ?, ?, ?)",
                    (
                        version,
                        record.file,
                        "changed" if existed else "added",
                        short_hash("file", *sorted(d.file_hash for d in documents)),
                        sum(len(d.chunks) for d in documents),
                    ),
                )
            self._delete_file(db, record.file)
            self._bump(db)
            db.execute(
                "INSERT INTO files VALUES (?, ?, ?, ?, ?)",
                (record.file, record.size, record.mtime_ns, record.config_hash, time.time()),
            )
            for doc in documents:
                db.execute(
                    "INSERT OR REPLACE INTO documents VALUES (?, ?, ?, ?, ?, ?, ?)",
                    (
                        doc.source,
                        record.file,
                        doc.doc_id,
                        doc.file_hash,
                        doc.kind,
                        doc.title,
                        len(doc.chunks),
                    ),
                )
                db.executemany(
                    "INSERT OR REPLACE INTO chunks VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    [
                        (
                            c.id,
                            c.source,
                            c.doc_id,
                            c.chunk_index,
                            c.kind,
                            c.text,
                            " ".join(toks),
                            json.dumps(c.to_metadata()),
                        )
                        for c, toks in doc.chunks
                    ],
                )

    def remove_file(self, file: str, version: int | None = None) -> None:
        with self._transaction() as db:
            if version is not None:
                db.execute(
                    "INSERT OR REPLACE INTO version_files VALUES (?, ?, 'removed', '', 0)",
                    (version, file),
                )
            self._delete_file(db, file)
            self._bump(db)

    # --- versions: one per ingestion run that changed something ------------------------
    def begin_version(self) -> int:
        with self._transaction() as db:
            cursor = db.execute("INSERT INTO versions (started_at) VALUES (?)", (time.time(),))
            return int(cursor.lastrowid or 0)

    def finish_version(self, version: int) -> None:
        """Close a run's version; a run that changed nothing leaves no version behind."""
        with self._transaction() as db:
            if db.execute("SELECT 1 FROM version_files WHERE version = ?", (version,)).fetchone():
                db.execute(
                    "UPDATE versions SET finished_at = ? WHERE version = ?", (time.time(), version)
                )
            else:
                db.execute("DELETE FROM versions WHERE version = ?", (version,))

    def versions(self) -> list[dict[str, Any]]:
        """Every version, oldest first, with what it changed (an interrupted run's version
        has ``finished_at`` None and lists the files it committed before it stopped)."""
        rows = self._db.execute(
            "SELECT v.version, v.started_at, v.finished_at, "
            "SUM(f.action = 'added'), SUM(f.action = 'changed'), SUM(f.action = 'removed') "
            "FROM versions v JOIN version_files f ON f.version = v.version "
            "GROUP BY v.version ORDER BY v.version"
        )
        keys = ("version", "started_at", "finished_at", "added", "changed", "removed")
        return [dict(zip(keys, row, strict=True)) for row in rows]

    def version(self) -> int | None:
        """The latest version that changed files (None: none recorded yet)."""
        row = self._db.execute("SELECT MAX(version) FROM version_files").fetchone()
        return row[0] if row else None

    def files_at(self, version: int) -> dict[str, tuple[str, int]]:
        """What the collection held after ``version``: {file: (content hash, chunks)}."""
        held: dict[str, tuple[str, int]] = {}
        for file, action, content_hash, chunks in self._db.execute(
            "SELECT file, action, content_hash, chunks FROM version_files WHERE version <= ? "
            "ORDER BY version",
            (version,),
        ):
            if action == "removed":
                held.pop(file, None)
            else:
                held[file] = (content_hash, chunks)
        return held

    @staticmethod
    def _delete_file(db: sqlite3.Connection, file: str) -> None:
        db.execute(
            "DELETE FROM chunks WHERE source IN (SELECT source FROM documents WHERE file = ?)",
            (file,),
        )
        db.execute("DELETE FROM documents WHERE file = ?", (file,))
        db.execute("DELETE FROM files WHERE file = ?", (file,))

    # --- chunks -----------------------------------------------------------------------------
    def chunk_ids(self) -> set[str]:
        """Every committed id: O(chunks), for maintenance and tests, never per question."""
        return {r[0] for r in self._db.execute("SELECT id FROM chunks")}

    def chunk_count(self) -> int:
        return int(self._db.execute("SELECT chunks FROM chunk_totals").fetchone()[0])

    def _select_in(self, sql: str, ids: Iterable[str], *params: Any) -> Iterator[tuple]:
        """Rows of ``sql`` (its ``{ids}`` an IN list), in batches under SQLite's
        variable limit."""
        ids = list(ids)
        for start in range(0, len(ids), 500):
            part = ids[start : start + 500]
            yield from self._db.execute(sql.format(ids=",".join("?" * len(part))), [*params, *part])

    def committed(self, ids: Iterable[str]) -> set[str]:
        """Which of ``ids`` are committed chunks."""
        return {r[0] for r in self._select_in("SELECT id FROM chunks WHERE id IN ({ids})", ids)}

    def tokens_of(self, ids: Iterable[str]) -> list[tuple[str, str]]:
        """(id, stored BM25 tokens) of those of ``ids`` that are committed."""
        return list(self._select_in("SELECT id, tokens FROM chunks WHERE id IN ({ids})", ids))

    def sample_ids(self, n: int) -> list[str]:
        """Up to ``n`` committed ids from a random place on, without reading them all."""
        row = self._db.execute("SELECT ABS(RANDOM()) % (MAX(rowid) + 1) FROM chunks").fetchone()
        start = row[0] or 0
        rows = self._db.execute(
            "SELECT id FROM (SELECT id, rowid FROM chunks WHERE rowid >= ?1 ORDER BY rowid "
            "LIMIT ?2) UNION ALL SELECT id FROM (SELECT id, rowid FROM chunks WHERE rowid < ?1 "
            "ORDER BY rowid LIMIT ?2)",
            (start, n),
        ).fetchall()
        return [r[0] for r in rows[:n]]

    def chunks(self, ids: Iterable[str]) -> dict[str, Chunk]:
        rows = self._select_in("SELECT id, text, metadata FROM chunks WHERE id IN ({ids})", ids)
        return {cid: Chunk.from_metadata(text, json.loads(meta)) for cid, text, meta in rows}

    def chunks_of_source(self, source: str) -> list[Chunk]:
        rows = self._db.execute(
            "SELECT text, metadata FROM chunks WHERE source = ? ORDER BY kind, chunk_index",
            (source,),
        )
        return [Chunk.from_metadata(text, json.loads(meta)) for text, meta in rows]

    def neighbours(self, doc_id: str, first: int, last: int) -> list[Chunk]:
        """Plain chunks ``first..last`` (inclusive) of a document, in order."""
        rows = self._db.execute(
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
            "SELECT text_hash, vector FROM pending_vectors "
            "WHERE model = ? AND text_hash IN ({ids})",
            dict.fromkeys(hashes),
            model,
        )
        return {text_hash: array("f", blob).tolist() for text_hash, blob in rows}

    def keep_pending_vectors(self, model: str, vectors: dict[str, list[float]]) -> None:
        with self._transaction() as db:
            db.executemany(
                "INSERT OR REPLACE INTO pending_vectors VALUES (?, ?, ?)",
                [(model, h, array("f", v).tobytes()) for h, v in vectors.items()],
            )

    def drop_pending_vectors(self) -> None:
        with self._transaction() as db:
            db.execute("DELETE FROM pending_vectors")

    def stats(self) -> dict[str, int]:
        one = self._db.execute
        return {
            "files": one("SELECT COUNT(*) FROM files").fetchone()[0],
            "documents": one("SELECT COUNT(*) FROM documents").fetchone()[0],
            "chunks": self.chunk_count(),
        }
