"""``store = "postgres"``: everything in one PostgreSQL + pgvector database, so several
servers and ingestion workers share it.

Each collection is a schema (``tools.store.postgres``) holding its manifest
(``pg_manifest``) and vectors (``pg_vectors``); a past version read with ``as_of`` is a
copy of the schema rolled back (``pg_snapshots``). The chat page's flags are the table
``public.rag_flags``, its conversations ``public.rag_ui_sessions``, and CLI conversations
LangGraph's PostgreSQL checkpointer, all in the same database, so every server shares them.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import psycopg
from psycopg.rows import dict_row

from tools.config import Settings, redacted_url
from tools.store import postgres as pg
from tools.store.manifest import ManifestBase
from tools.store.pg_manifest import PgManifest
from tools.store.pg_snapshots import version_snapshot
from tools.store.pg_vectors import PgChunkStore
from tools.store.protocol import (
    MAX_SAVED,
    ChunkVectors,
    CollectionBusy,
    Workers,
    unknown_collection,
)
from tools.store.records import FLAG_COLUMNS_SQL, FlagTable, session_exchanges, session_text

if TYPE_CHECKING:
    from langgraph.checkpoint.base import BaseCheckpointSaver

JOIN_WAIT_S = 10.0  # how long a new ingestion worker waits out another's solitary step


class Postgres:
    """Every collection a schema of one PostgreSQL database with pgvector; flags and
    conversations in the same database, so every server shares them."""

    name = "postgres"

    def where(self, settings: Settings) -> str:
        return "the database"

    def names(self, settings: Settings) -> list[str]:
        with pg.borrowed(settings.database_url) as conn:
            return pg.collection_names(conn)

    def manifest(self, settings: Settings, name: str) -> PgManifest:
        return PgManifest(settings.database_url, pg.schema_name(name))

    def open_manifest(self, settings: Settings, name: str, *, create: bool) -> PgManifest:
        """A commit by any process is visible to every other at once, so nothing here
        tracks who committed what."""
        with pg.borrowed(settings.database_url) as conn:
            if create:
                pg.register(conn, name)
            elif not pg.registered(conn, name):
                raise unknown_collection(self, settings, name)
        manifest = self.manifest(settings, name)
        if create:
            manifest.record_versions()
        return manifest

    def open_vectors(
        self, settings: Settings, name: str, manifest: ManifestBase, *, fresh: bool
    ) -> PgChunkStore:
        return PgChunkStore(settings.database_url, pg.schema_name(name), settings.hnsw_ef_search)

    def past_manifest(
        self, settings: Settings, name: str, version: int, vectors: ChunkVectors
    ) -> PgManifest:
        snapshot = version_snapshot(settings.database_url, name, version, vectors.held)
        return PgManifest(settings.database_url, snapshot)

    def sees_every_commit(self, settings: Settings) -> bool:
        return True

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

        conn = pg.connect(settings.database_url)  # its errors never show the password
        conn.row_factory, conn.prepare_threshold = dict_row, 0  # as PostgresSaver needs
        try:
            saver = PostgresSaver(conn)
            saver.setup()  # creates or migrates its tables; idempotent
            yield saver
        finally:
            conn.close()

    def flag_log(self, settings: Settings) -> PgFlags:
        return PgFlags(settings.database_url)

    def session_log(self, settings: Settings) -> PgSessions:
        return PgSessions(settings.database_url)

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


BACKEND = Postgres()


class PgFlags(FlagTable):
    """The flag log in the table ``public.rag_flags``, one for every server."""

    table = "public.rag_flags"

    def __init__(self, database_url: str) -> None:
        self._url = database_url
        self.where = redacted_url(database_url) + " (rag_flags)"

    @contextmanager
    def _connect(self) -> Iterator[_QuestionMarks]:
        # the store's own connect: its errors name RAG_DATABASE_URL, never the password
        with pg.borrowed(self._url) as con, con.transaction():
            con.row_factory = dict_row
            # IF NOT EXISTS alone races another server's first flag
            con.execute("SELECT pg_advisory_xact_lock(hashtext('rag_flags'))")
            con.execute(
                "CREATE TABLE IF NOT EXISTS public.rag_flags "
                f"(id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY, {FLAG_COLUMNS_SQL})"
            )
            yield _QuestionMarks(con)

    def _exists(self) -> bool:
        return True  # reading an absent table makes it, as before: the lock is cheap


class _QuestionMarks:
    """A psycopg connection that takes SQLite's ``?`` parameters, so the flag log's SQL is
    written once."""

    def __init__(self, con: psycopg.Connection) -> None:
        self._con = con

    def execute(self, query: str, args: tuple = ()) -> psycopg.Cursor:
        return self._con.execute(pg.question_marks(query), args)


SESSIONS_SCHEMA = """
CREATE TABLE IF NOT EXISTS public.rag_ui_sessions (
    id TEXT PRIMARY KEY,
    exchanges TEXT NOT NULL,
    updated_at TIMESTAMPTZ NOT NULL DEFAULT now()
)"""


class PgSessions:
    """Chat-page conversations in the table ``public.rag_ui_sessions``, so any `rag ui`
    process on the database continues a conversation another began."""

    def __init__(self, database_url: str) -> None:
        self._url = database_url
        self._made = False  # the table, once seen made by this handle

    def _make_table(self) -> None:
        """The sessions table, made once per handle under a lock: IF NOT EXISTS alone races
        another server's first session. Not on every write: the lock is global, so it
        would queue every server's chat writes behind one another."""
        with pg.borrowed(self._url) as con, con.transaction():
            con.execute("SELECT pg_advisory_xact_lock(hashtext('rag_ui_sessions'))")
            con.execute(SESSIONS_SCHEMA)
        self._made = True

    def write(self, session_id: str, exchanges: list[dict[str, Any]]) -> None:
        payload = session_text(exchanges)
        if not self._made:
            self._make_table()
        try:
            self._upsert(session_id, payload)
        except psycopg.errors.UndefinedTable:  # the database was replaced since
            self._make_table()
            self._upsert(session_id, payload)

    def _upsert(self, session_id: str, payload: str) -> None:
        """Save one session and drop all but the newest ``MAX_SAVED``."""
        with pg.borrowed(self._url) as con, con.transaction():
            con.execute(
                "INSERT INTO public.rag_ui_sessions (id, exchanges) VALUES (%s, %s) "
                "ON CONFLICT (id) DO UPDATE SET exchanges = EXCLUDED.exchanges, "
                "updated_at = now()",
                (session_id, payload),
            )
            con.execute(
                "DELETE FROM public.rag_ui_sessions WHERE id NOT IN (SELECT id FROM "
                "public.rag_ui_sessions ORDER BY updated_at DESC LIMIT %s)",
                (MAX_SAVED,),
            )

    def read(self, session_id: str) -> list[dict[str, Any]] | None:
        # a database that cannot be reached is its DatabaseError, not None
        with pg.borrowed(self._url) as con:
            exists = con.execute("SELECT to_regclass('public.rag_ui_sessions')")
            if exists.fetchone()[0] is None:
                return None
            row = con.execute(
                "SELECT exchanges FROM public.rag_ui_sessions WHERE id = %s", (session_id,)
            ).fetchone()
        return session_exchanges(row[0] if row else None)
