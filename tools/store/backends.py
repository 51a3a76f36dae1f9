"""Store backends by name: everything that differs between ``store = embedded`` and
``store = postgres``, in one place.

Why a registry: the choice of store once lived in a dozen branches on its name
across collections, conversations, flags, the doctor and the outbound list,
and a new backend meant finding them all. Now each backend is one class here, and
every caller asks ``backend(settings)`` for what it needs. To add a backend, write a
class with these methods, add it to ``BACKENDS``, and run the contract suite
(tests/contract) against it (docs_corpus/architecture.md).
"""

from __future__ import annotations

import fcntl
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from tools.config import ConfigError, Settings, redacted_url
from tools.store import postgres as pg
from tools.store.chroma_vectors import chroma_client, drop_vectors
from tools.store.manifest import Manifest
from tools.store.pg_manifest import PgManifest

if TYPE_CHECKING:
    from langgraph.checkpoint.base import BaseCheckpointSaver


class CollectionBusy(ConfigError):
    """Another process is writing the collection (an ingestion, a rollback, a gc)."""


JOIN_WAIT_S = 10.0  # how long a new ingestion worker waits out another's solitary step


class SoleWriter:
    """An ingestion that is the collection's only writer (the embedded store: Chroma's
    files take one writing process): every file is its own, and it is always alone."""

    files_per_round: int | None = None  # every changed file in one round

    def claim(self, source: str) -> bool:
        return True

    def release(self, source: str) -> None:
        pass

    @contextmanager
    def alone(self) -> Iterator[bool]:
        yield True


class Workers(Protocol):
    """What an ingestion holds while it writes (``Backend.ingestion``): claims on files,
    and whether it is the only writer."""

    files_per_round: int | None  # changed files claimed at a time (None: all)

    def claim(self, source: str) -> bool: ...

    def release(self, source: str) -> None: ...

    def alone(self) -> AbstractContextManager[bool]: ...


def manifest_path(settings: Settings, name: str) -> Path:
    return settings.data_dir / "collections" / f"{name}.sqlite"


def snapshot_path(manifest: Path, version: int | str) -> Path:
    """Where the copy of ``manifest`` rolled back to ``version`` lives (``"*"``: any),
    in a snapshots folder beside the ``collections`` folder."""
    return manifest.parent.parent / "snapshots" / f"{manifest.stem}-v{version}.sqlite"


class Backend(Protocol):
    """What a store backend answers; ``Collection`` opens its parts (tools/store/collection.py)."""

    name: str

    def where(self, settings: Settings) -> str:
        """Where collections live, for messages (no secret)."""
        ...

    def names(self, settings: Settings) -> list[str]: ...

    def manifest(self, settings: Settings, name: str) -> Manifest | PgManifest:
        """The current manifest of a collection, opened for reading."""
        ...

    def writer_lock(self, settings: Settings, name: str) -> Any:
        """A context manager held while one writer changes the collection; raises
        ``CollectionBusy`` at once when another holds it."""
        ...

    def ingestion(self, settings: Settings, name: str) -> Any:
        """A context manager yielding the ``Workers`` of one ingestion run; raises
        ``CollectionBusy`` when a writer that excludes it holds the collection."""
        ...

    def drop(self, settings: Settings, name: str) -> None:
        """Remove the collection, its vectors and its snapshots (under the writer lock)."""
        ...

    def drop_snapshots(self, settings: Settings, name: str) -> None: ...

    def checkpointer(self, settings: Settings) -> Any:
        """A context manager yielding the LangGraph checkpointer of CLI conversations."""
        ...

    def flags_location(self, settings: Settings) -> dict[str, Any]:
        """The arguments of ``rag_ui.flags.FlagStore`` for this store."""
        ...

    def sessions_location(self, settings: Settings) -> dict[str, Any]:
        """The arguments of ``rag_ui.sessions.SessionRecords`` for this store."""
        ...

    def check(self, settings: Settings) -> dict[str, Any]:
        """``rag doctor``'s line: store, where, error (None when it answers), detail."""
        ...

    def address(self, settings: Settings) -> tuple[str, str] | None:
        """The outside address data goes to and what goes there, if any
        (tools/outbound.py)."""
        ...

    def thread_files(self, settings: Settings) -> Path | None:
        """Where versions before the checkpointer kept CLI conversations, if anywhere."""
        ...


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

    def flags_location(self, settings: Settings) -> dict[str, Any]:
        return {"path": settings.data_dir.resolve() / "flags.sqlite"}

    def sessions_location(self, settings: Settings) -> dict[str, Any]:
        return {"folder": settings.data_dir.resolve() / "ui" / "sessions"}

    def check(self, settings: Settings) -> dict[str, Any]:
        where = str(settings.data_dir.resolve())
        return {"store": self.name, "where": where, "error": None, "detail": "files"}

    def address(self, settings: Settings) -> tuple[str, str] | None:
        if not settings.chroma_host:
            return None
        return f"http://{settings.chroma_host}", "vectors (Chroma)"

    def thread_files(self, settings: Settings) -> Path | None:
        return settings.data_dir / "threads"


class Postgres:
    """Every collection a schema of one PostgreSQL database with pgvector; flags and
    CLI conversations in the same database, so every server shares them."""

    name = "postgres"

    def where(self, settings: Settings) -> str:
        return "the database"

    def names(self, settings: Settings) -> list[str]:
        with pg.borrowed(settings.database_url) as conn:
            return pg.collection_names(conn)

    def manifest(self, settings: Settings, name: str) -> PgManifest:
        return PgManifest(settings.database_url, pg.schema_name(name))

    @contextmanager
    def writer_lock(self, settings: Settings, name: str) -> Iterator[None]:
        with pg.writer_lock(settings.database_url, name) as free:
            if not free:
                raise CollectionBusy(
                    f"another ingestion into {name!r} is running (it holds the collection's "
                    "lock in the database); retry when it has finished"
                )
            yield

    @contextmanager
    def ingestion(self, settings: Settings, name: str) -> Iterator[Workers]:
        workers = pg.SharedIngestion(settings.database_url, name)
        try:
            if not workers.join(wait_s=JOIN_WAIT_S):
                raise CollectionBusy(
                    f"a rollback, gc or drop of {name!r} is running (it holds the collection's "
                    "lock in the database); retry when it has finished"
                )
            yield workers
        finally:
            workers.close()

    def drop(self, settings: Settings, name: str) -> None:
        with (
            self.writer_lock(settings, name),
            pg.borrowed(settings.database_url) as conn,
        ):
            pg.drop(conn, name)

    def drop_snapshots(self, settings: Settings, name: str) -> None:
        with pg.borrowed(settings.database_url) as conn:
            pg.drop_snapshots(conn, name)

    @contextmanager
    def checkpointer(self, settings: Settings) -> Iterator[BaseCheckpointSaver]:
        from langgraph.checkpoint.postgres import PostgresSaver
        from psycopg.rows import dict_row

        conn = pg.connect(settings.database_url)  # its errors never show the password
        conn.row_factory, conn.prepare_threshold = dict_row, 0  # as PostgresSaver needs
        try:
            saver = PostgresSaver(conn)
            saver.setup()  # creates or migrates its tables; idempotent
            yield saver
        finally:
            conn.close()

    def flags_location(self, settings: Settings) -> dict[str, Any]:
        return {"database_url": settings.database_url}

    def sessions_location(self, settings: Settings) -> dict[str, Any]:
        return {"database_url": settings.database_url}

    def check(self, settings: Settings) -> dict[str, Any]:
        where = redacted_url(settings.database_url)
        try:
            with pg.borrowed(settings.database_url) as conn:
                server = conn.execute("SHOW server_version").fetchone()[0]
                vector = conn.execute(
                    "SELECT extversion FROM pg_extension WHERE extname = 'vector'"
                ).fetchone()[0]
                names = pg.collection_names(conn)
        except pg.DatabaseError as exc:
            return {"store": self.name, "where": where, "error": str(exc), "detail": ""}
        detail = f"PostgreSQL {server}, pgvector {vector}, {len(names)} collections"
        return {"store": self.name, "where": where, "error": None, "detail": detail}

    def address(self, settings: Settings) -> tuple[str, str] | None:
        return settings.database_url, "documents, vectors and conversations (PostgreSQL)"

    def thread_files(self, settings: Settings) -> Path | None:
        return None


BACKENDS: dict[str, Backend] = {b.name: b for b in (Embedded(), Postgres())}


def backend(settings: Settings) -> Backend:
    """The backend ``settings.store`` names (validated with the settings)."""
    return BACKENDS[settings.store]
