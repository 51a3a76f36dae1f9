"""``store = "embedded"``: everything in files under ``data_dir`` on one machine.

Each collection is an SQLite manifest (``collections/NAME.sqlite``, with its FTS5 keyword
index) and Chroma's vectors (embedded under ``chroma/``, or a Chroma server with
``chroma_host``); a past version read with ``as_of`` is a copy of the manifest rolled
back (``snapshots/NAME-vN.sqlite``). The chat page's flags are ``flags.sqlite`` and its
conversations ``ui/sessions/ID.json``; CLI conversations are LangGraph's SQLite
checkpointer in ``threads.sqlite``.
"""

from __future__ import annotations

import fcntl
import os
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import closing, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tools.config import ConfigError, Settings
from tools.store.chroma_vectors import (
    ChromaChunkStore,
    chroma_client,
    drop_vectors,
    store_started,
)
from tools.store.manifest import Manifest, ManifestBase
from tools.store.pg_snapshots import SNAPSHOTS_KEPT
from tools.store.protocol import (
    MAX_SAVED,
    ChunkVectors,
    CollectionBusy,
    CollectionError,
    SoleWriter,
    Workers,
    rebuild_hint,
    unknown_collection,
)
from tools.store.records import FLAG_COLUMNS_SQL, FlagTable, session_exchanges, session_text

if TYPE_CHECKING:
    from langgraph.checkpoint.base import BaseCheckpointSaver


def manifest_path(settings: Settings, name: str) -> Path:
    return settings.data_dir / "collections" / f"{name}.sqlite"


def snapshot_path(manifest: Path, version: int | str) -> Path:
    """Where the copy of ``manifest`` rolled back to ``version`` lives (``"*"``: any),
    in a snapshots folder beside the ``collections`` folder."""
    return manifest.parent.parent / "snapshots" / f"{manifest.stem}-v{version}.sqlite"


class Embedded:
    """SQLite manifests and Chroma vectors under the data directory (or a Chroma
    server, ``chroma_host``)."""

    name = "embedded"

    def where(self, settings: Settings) -> str:
        return str(settings.data_dir)

    def names(self, settings: Settings) -> list[str]:
        folder = settings.data_dir / "collections"
        return sorted(p.stem for p in folder.glob("*.sqlite")) if folder.is_dir() else []

    def manifest(self, settings: Settings, name: str) -> Manifest:
        return Manifest(manifest_path(settings, name))

    def open_manifest(self, settings: Settings, name: str, *, create: bool) -> Manifest:
        path = manifest_path(settings, name)
        if not create and not path.exists():
            raise unknown_collection(self, settings, name)
        try:
            manifest = Manifest(path, verify=create)
            if create:
                manifest.record_versions()
        except sqlite3.OperationalError as exc:  # I/O: a full disk, permissions, a lock
            raise CollectionError(
                f"collection {name!r}: its manifest {path} cannot be opened ({exc}); "
                f"check free space and permissions in {path.parent}, and if the file is "
                "damaged, " + rebuild_hint(name)
            ) from None
        except sqlite3.DatabaseError as exc:
            raise CollectionError(
                f"collection {name!r}: its manifest {path} is damaged ({exc}); "
                + rebuild_hint(name)
            ) from None
        return manifest

    def open_vectors(
        self, settings: Settings, name: str, manifest: ManifestBase, *, fresh: bool
    ) -> ChromaChunkStore:
        fresh = fresh or (not self.sees_every_commit(settings) and _missed(settings, manifest))
        return ChromaChunkStore(chroma_client(settings, fresh=fresh), name, settings.hnsw_ef_search)

    def past_manifest(
        self, settings: Settings, name: str, version: int, vectors: ChunkVectors
    ) -> Manifest:
        return Manifest(_version_snapshot(settings, name, version, vectors))

    def sees_every_commit(self, settings: Settings) -> bool:
        return bool(settings.chroma_host)  # a Chroma server shows every client's writes

    @contextmanager
    def writer_lock(self, settings: Settings, name: str) -> Iterator[None]:
        lock_path = manifest_path(settings, name).with_suffix(".lock")
        lock_path.parent.mkdir(parents=True, exist_ok=True)
        with lock_path.open("w") as fh:
            try:
                fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise CollectionBusy(
                    f"another ingestion into {name!r} is running (lock {lock_path}); retry "
                    "when it has finished"
                ) from None
            yield

    @contextmanager
    def ingestion(self, settings: Settings, name: str) -> Iterator[Workers]:
        with self.writer_lock(settings, name):
            yield SoleWriter()

    def drop(self, settings: Settings, name: str) -> None:
        path = manifest_path(settings, name)
        with self.writer_lock(settings, name):
            for suffix in ("", "-wal", "-shm"):
                Path(f"{path}{suffix}").unlink(missing_ok=True)
            self.drop_snapshots(settings, name)
            drop_vectors(chroma_client(settings), name)

    def drop_snapshots(self, settings: Settings, name: str) -> None:
        pattern = snapshot_path(manifest_path(settings, name), "*")
        for snapshot in pattern.parent.glob(pattern.name):
            snapshot.unlink(missing_ok=True)

    @contextmanager
    def checkpointer(self, settings: Settings) -> Iterator[BaseCheckpointSaver]:
        from langgraph.checkpoint.sqlite import SqliteSaver

        settings.data_dir.mkdir(parents=True, exist_ok=True)
        with SqliteSaver.from_conn_string(str(settings.data_dir / "threads.sqlite")) as saver:
            yield saver

    def flag_log(self, settings: Settings) -> SqliteFlags:
        return SqliteFlags(settings.data_dir.resolve() / "flags.sqlite")

    def session_log(self, settings: Settings) -> SessionFiles:
        return SessionFiles(settings.data_dir.resolve() / "ui" / "sessions")

    def check(self, settings: Settings) -> dict[str, Any]:
        where = str(settings.data_dir.resolve())
        return {"store": self.name, "where": where, "error": None, "detail": "files"}

    def address(self, settings: Settings) -> tuple[str, str] | None:
        if not settings.chroma_host:
            return None
        return f"http://{settings.chroma_host}", "vectors (Chroma)"

    def thread_files(self, settings: Settings) -> Path | None:
        return settings.data_dir / "threads"


BACKEND = Embedded()


def _missed(settings: Settings, manifest: ManifestBase) -> bool:
    """Whether this process's Chroma system started before another process's latest
    commit to ``manifest``, so it cannot show that commit's vectors."""
    started = store_started(settings)
    seen = manifest.generation()
    return (
        started is not None
        and manifest.committed_elsewhere(seen - 1, seen)
        and manifest.last_commit_at() > started
    )


_SNAPSHOT_THREADS = threading.Lock()  # flock is per process: threads queue here first


def _version_snapshot(settings: Settings, name: str, version: int, vectors: ChunkVectors) -> Path:
    """A copy of the manifest rolled back to ``version``, made once and then reused (what a
    past version held never changes). ``as_of`` reads it with the collection's own vector
    store, which keeps the vectors of replaced chunks until gc.

    Built once under a lock (a file lock, so other processes wait too): requests for
    the same version at the same time share one copy. At most ``SNAPSHOTS_KEPT`` are
    kept per collection; the least recently used goes first."""
    target = snapshot_path(manifest_path(settings, name), version)
    target.parent.mkdir(parents=True, exist_ok=True)
    with _snapshot_lock(target):
        if target.exists():
            os.utime(target)  # recently used: kept longest
            return target
        building = target.with_name(f"{target.name}.{os.getpid()}.tmp")
        try:
            with (
                closing(sqlite3.connect(manifest_path(settings, name))) as source,
                closing(sqlite3.connect(building)) as copy,
            ):
                source.backup(copy)
            past = Manifest(building)
            try:
                past.rollback(version, vectors.held)
            finally:
                past.close()
            os.replace(building, target)
        except ValueError as exc:
            raise ConfigError(f"as_of={version}: {exc}") from None
        finally:  # a failed copy leaves nothing behind: every failure is another full copy
            for leftover in (building, Path(f"{building}-wal"), Path(f"{building}-shm")):
                leftover.unlink(missing_ok=True)
        _keep_newest_snapshots(manifest_path(settings, name), keep=target)
    return target


@contextmanager
def _snapshot_lock(target: Path) -> Iterator[None]:
    with _SNAPSHOT_THREADS, open(target.with_name(f".{target.name}.lock"), "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)  # released when the file closes, or the process dies
        yield


def _keep_newest_snapshots(manifest: Path, keep: Path) -> None:
    pattern = snapshot_path(manifest, "*")
    snapshots = sorted(
        (p for p in pattern.parent.glob(pattern.name) if p != keep),
        key=lambda p: p.stat().st_mtime,
        reverse=True,
    )
    for old in snapshots[SNAPSHOTS_KEPT - 1 :]:
        old.unlink(missing_ok=True)


class SqliteFlags(FlagTable):
    """The flag log in ``<data_dir>/flags.sqlite``, table ``flags``."""

    table = "flags"

    def __init__(self, path: Path) -> None:
        self.path = path
        self.where = str(path)

    @contextmanager
    def _connect(self) -> Iterator[sqlite3.Connection]:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with closing(sqlite3.connect(self.path, timeout=10)) as con:
            con.row_factory = sqlite3.Row
            con.execute(
                "CREATE TABLE IF NOT EXISTS flags "
                f"(id INTEGER PRIMARY KEY AUTOINCREMENT, {FLAG_COLUMNS_SQL})"
            )
            with con:
                yield con

    def _exists(self) -> bool:
        return self.path.exists()


class SessionFiles:
    """Chat-page conversations as ``ID.json`` files (owner-only) in one folder."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def write(self, session_id: str, exchanges: list[dict[str, Any]]) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        path = self.folder / f"{session_id}.json"
        partial = path.with_suffix(".partial")
        fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(session_text(exchanges))
        partial.replace(path)
        saved = sorted(self.folder.glob("*.json"), key=lambda p: p.stat().st_mtime)
        for old in saved[:-MAX_SAVED]:
            old.unlink(missing_ok=True)

    def read(self, session_id: str) -> list[dict[str, Any]] | None:
        path = self.folder / f"{session_id}.json"
        try:
            return session_exchanges(path.read_text(encoding="utf-8") if path.is_file() else None)
        except OSError:
            return None
