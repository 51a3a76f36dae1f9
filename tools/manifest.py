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
from collections.abc import Callable, Iterable, Iterator
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
-- what each version replaced or removed, so the collection can go back to an earlier
-- version without re-embedding (their vectors stay in the store until gc)
CREATE TABLE IF NOT EXISTS retired_files (
    removed_in INTEGER NOT NULL, file TEXT NOT NULL, size INTEGER, mtime_ns INTEGER,
    config_hash TEXT, ingested_at REAL, PRIMARY KEY (removed_in, file)
);
CREATE TABLE IF NOT EXISTS retired_documents (
    removed_in INTEGER NOT NULL, source TEXT NOT NULL, file TEXT NOT NULL, doc_id TEXT NOT NULL,
    file_hash TEXT NOT NULL, kind TEXT, title TEXT, chunk_count INTEGER,
    PRIMARY KEY (removed_in, source)
);
CREATE TABLE IF NOT EXISTS retired_chunks (
    removed_in INTEGER NOT NULL, file TEXT NOT NULL, id TEXT NOT NULL, source TEXT NOT NULL,
    doc_id TEXT NOT NULL, chunk_index INTEGER, kind TEXT, text TEXT NOT NULL,
    tokens TEXT NOT NULL, metadata TEXT NOT NULL, PRIMARY KEY (removed_in, id)
);
CREATE INDEX IF NOT EXISTS retired_chunks_file ON retired_chunks(file, removed_in);
CREATE INDEX IF NOT EXISTS retired_chunks_id ON retired_chunks(id);
CREATE TABLE IF NOT EXISTS version_notes (version INTEGER PRIMARY KEY, note TEXT NOT NULL);
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
            retire_in = self._first_touch(db, record.file, version)
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
            self._delete_file(db, record.file, retire_in)
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
            retire_in = self._first_touch(db, file, version)
            if version is not None:
                db.execute(
                    "INSERT OR REPLACE INTO version_files VALUES (?, ?, 'removed', '', 0)",
                    (version, file),
                )
            self._delete_file(db, file, retire_in)
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
            "SUM(f.action = 'added'), SUM(f.action = 'changed'), SUM(f.action = 'removed'), "
            "n.note FROM versions v JOIN version_files f ON f.version = v.version "
            "LEFT JOIN version_notes n ON n.version = v.version "
            "GROUP BY v.version ORDER BY v.version"
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
        recorded = {r[0] for r in self._db.execute("SELECT DISTINCT file FROM version_files")}
        held: dict[str, tuple[str, int]] = {}
        for file in recorded & set(self.files()):
            docs = self._db.execute(
                "SELECT file_hash, chunk_count FROM documents WHERE file = ?", (file,)
            ).fetchall()
            held[file] = (short_hash("file", *sorted(h for h, _ in docs)), sum(n for _, n in docs))
        return held

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
            new = int(
                db.execute(
                    "INSERT INTO versions (started_at, finished_at) VALUES (?, ?)",
                    (time.time(), time.time()),
                ).lastrowid
                or 0
            )
            db.execute("INSERT INTO version_notes VALUES (?, ?)", (new, f"rollback to v{target}"))
            restored: set[str] = set()
            for file in changed:
                if file in now:
                    self._delete_file(db, file, new)
                if file not in want:
                    db.execute(
                        "INSERT INTO version_files VALUES (?, ?, 'removed', '', 0)", (new, file)
                    )
                    continue
                restored |= self._restore(db, file, target)
                db.execute(
                    "INSERT INTO version_files VALUES (?, ?, ?, ?, ?)",
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
    def _restore(db: sqlite3.Connection, file: str, target: int) -> set[str]:
        """Put back ``file`` as it was after ``target``: the rows retired by the first
        version after it that changed the file."""
        (since,) = db.execute(
            "SELECT MIN(version) FROM version_files WHERE file = ? AND version > ?",
            (file, target),
        ).fetchone()
        if not db.execute(
            "SELECT 1 FROM retired_files WHERE removed_in = ? AND file = ?", (since, file)
        ).fetchone():
            raise ValueError(f"{file} as of version {target} was not kept; nothing was changed")
        db.execute(
            "INSERT INTO files SELECT file, size, mtime_ns, config_hash, ingested_at "
            "FROM retired_files WHERE removed_in = ? AND file = ?",
            (since, file),
        )
        db.execute(
            "INSERT INTO documents SELECT source, file, doc_id, file_hash, kind, title, "
            "chunk_count FROM retired_documents WHERE removed_in = ? AND file = ?",
            (since, file),
        )
        db.execute(
            "INSERT OR REPLACE INTO chunks SELECT id, source, doc_id, chunk_index, kind, text, "
            "tokens, metadata FROM retired_chunks WHERE removed_in = ? AND file = ?",
            (since, file),
        )
        rows = db.execute(
            "SELECT id FROM retired_chunks WHERE removed_in = ? AND file = ?", (since, file)
        )
        return {r[0] for r in rows}

    def reclaim(self, keep: int) -> tuple[int, set[str]]:
        """Forget what rollback needs for all but the last ``keep`` versions. Returns how
        many retired chunks went, and the ids neither a chunk nor a kept retired row still
        uses (their vectors can go)."""
        latest = self.version() or 0
        floor = max(self.restorable_from(), latest - keep + 1, 1)
        with self._transaction() as db:
            gone = {
                r[0]
                for r in db.execute(
                    "SELECT DISTINCT id FROM retired_chunks WHERE removed_in <= ?", (floor,)
                )
            }
            count = db.execute(
                "DELETE FROM retired_chunks WHERE removed_in <= ?", (floor,)
            ).rowcount
            for table in ("retired_documents", "retired_files"):
                db.execute(f"DELETE FROM {table} WHERE removed_in <= ?", (floor,))
            db.execute(
                "INSERT OR REPLACE INTO meta VALUES ('restorable_from', ?)", (json.dumps(floor),)
            )
        used = {r[0] for r in self._select_in("SELECT id FROM chunks WHERE id IN ({ids})", gone)}
        used |= {
            r[0] for r in self._select_in("SELECT id FROM retired_chunks WHERE id IN ({ids})", gone)
        }
        self._db.execute("VACUUM")  # give the space back to the file system...
        self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # ...from the WAL too
        return count, gone - used

    def retired_ids(self) -> set[str]:
        """Chunk ids kept for rollback only."""
        return {r[0] for r in self._db.execute("SELECT DISTINCT id FROM retired_chunks")}

    def vector_owners(self) -> set[str]:
        """Every id whose vector must stay: committed chunks, and chunks kept for rollback.
        Any other vector is an orphan (an interrupted ingestion's)."""
        return self.chunk_ids() | self.retired_ids()

    @staticmethod
    def _first_touch(db: sqlite3.Connection, file: str, version: int | None) -> int | None:
        """``version`` if it has not changed ``file`` yet: what the file held before the
        version is retired then, and only then (a later commit of the same file in the same
        run replaces what this run wrote, which no version ever showed)."""
        if (
            version is None
            or db.execute(
                "SELECT 1 FROM version_files WHERE version = ? AND file = ?", (version, file)
            ).fetchone()
        ):
            return None
        return version

    @staticmethod
    def _delete_file(db: sqlite3.Connection, file: str, retire_in: int | None = None) -> None:
        """Remove ``file`` from the collection; with ``retire_in``, keep its rows as what
        that version replaced."""
        if retire_in is not None:
            db.execute(
                "INSERT OR IGNORE INTO retired_files SELECT ?, * FROM files WHERE file = ?",
                (retire_in, file),
            )
            db.execute(
                "INSERT OR IGNORE INTO retired_documents SELECT ?, * FROM documents WHERE file = ?",
                (retire_in, file),
            )
            db.execute(
                "INSERT OR IGNORE INTO retired_chunks SELECT ?, d.file, c.* FROM chunks c "
                "JOIN documents d ON d.source = c.source WHERE d.file = ?",
                (retire_in, file),
            )
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
