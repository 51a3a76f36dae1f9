"""Connections and names for ``store = "postgres"``.

Each collection is one PostgreSQL schema holding the same tables as an embedded
collection's SQLite manifest plus its vectors (``tools.store.pg_manifest``,
``tools.store.pg_vectors``), so every query runs unqualified inside its schema and one
transaction commits a file's chunks, keyword postings and version record together.
``public.rag_collections`` lists the collections; a past version read with ``as_of``
is a copy of the schema rolled back (``<schema>@v<N>``), made once, as the embedded
backend copies its manifest file.
"""

from __future__ import annotations

import atexit
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import psycopg
from psycopg import sql
from psycopg.rows import tuple_row
from psycopg_pool import ConnectionPool, PoolTimeout

from tools.config import ConfigError, redacted_url
from tools.documents import short_hash

_REGISTRY = """
CREATE TABLE IF NOT EXISTS public.rag_collections (
    name TEXT PRIMARY KEY, schema_name TEXT UNIQUE NOT NULL,
    created_at TIMESTAMPTZ NOT NULL DEFAULT now()
)"""


_READY = (
    "SELECT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'vector') "
    "AND to_regclass('public.rag_collections') IS NOT NULL"
)


class DatabaseError(ConfigError):
    """The database cannot be reached or lacks what the service needs."""


# What a request meets while the database is down or restarting (tools.store.UNREACHABLE):
# the store's own error, or the driver's from a connection that died in the middle.
UNREACHABLE: tuple[type[BaseException], ...] = (DatabaseError, psycopg.OperationalError)


def connect(url: str) -> psycopg.Connection:
    """An autocommit connection (transactions are explicit) with pgvector available."""
    try:
        conn = psycopg.connect(url, autocommit=True, connect_timeout=10)
    except psycopg.Error as exc:
        raise DatabaseError(
            f"cannot connect to the database at {redacted_url(url)} ({_first_line(exc)}); "
            "check RAG_DATABASE_URL and that the server runs"
        ) from None
    try:
        _ready(conn)
    except DatabaseError:
        conn.close()
        raise
    return conn


def _ready(conn: psycopg.Connection) -> None:
    """pgvector and the collection registry in the database, made on first use."""
    try:
        if not conn.execute(_READY).fetchone()[0]:
            with conn.transaction():  # IF NOT EXISTS still races a second first-time caller
                conn.execute("SELECT pg_advisory_xact_lock(%s)", (lock_key("", "setup"),))
                conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
                conn.execute(_REGISTRY)
    except psycopg.Error as exc:
        where = redacted_url(conn.info.dsn)
        raise DatabaseError(
            f"the database at {where} has no pgvector and this user cannot add it "
            f"({_first_line(exc)}); run CREATE EXTENSION vector as its owner"
        ) from None


# Short-lived work (the collection registry, flags, chat sessions, snapshots) borrows
# from one bounded pool per database and process, instead of a connection per request.
# A collection's open handle keeps its own two (manifest and vectors: they carry session
# settings), and so does a held writer lock (a session-level advisory lock).
POOL_MAX = 4
POOL_WAIT_S = 10.0
_pools: dict[str, ConnectionPool] = {}
_pools_lock = threading.Lock()


def _pool(url: str) -> ConnectionPool:
    with _pools_lock:
        if url not in _pools:
            _pools[url] = ConnectionPool(
                url,
                kwargs={"autocommit": True, "connect_timeout": 10},
                min_size=0,
                max_size=POOL_MAX,
                configure=_ready,
                check=ConnectionPool.check_connection,  # a restart's dead ones are replaced
                reset=_reset,
                max_idle=60,
                name="rag-store",
                open=True,
            )
        return _pools[url]


def _reset(conn: psycopg.Connection) -> None:
    """A returned connection as the next borrower expects it: tuples, default settings."""
    conn.row_factory = tuple_row
    conn.execute("RESET ALL")


@contextmanager
def borrowed(url: str, wait_s: float = POOL_WAIT_S) -> Iterator[psycopg.Connection]:
    """An autocommit connection from this process's pool for ``url``, returned at the end
    of the block; when the database cannot be reached within ``wait_s``, a
    DatabaseError that says so (the servers answer it with a 503)."""
    try:
        with _pool(url).connection(timeout=wait_s) as conn:
            yield conn
    except PoolTimeout:
        raise DatabaseError(
            f"no connection to the database at {redacted_url(url)} within {wait_s:g} s; "
            "check RAG_DATABASE_URL and that the server runs"
        ) from None
    except psycopg.OperationalError as exc:  # the database went away during the block
        raise DatabaseError(
            f"the database at {redacted_url(url)} went away ({_first_line(exc)}); retry"
        ) from None


def close_pools() -> None:
    """Close every pool of this process (its end; a test that drops its database)."""
    with _pools_lock:
        pools = list(_pools.values())
        _pools.clear()
    for pool in pools:
        pool.close()


atexit.register(close_pools)


def _first_line(exc: BaseException) -> str:
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__


def schema_name(collection: str, version: int | None = None) -> str:
    """The schema of ``collection`` (or of its copy at ``version``): within PostgreSQL's 63
    bytes for any valid name (3-64 characters)."""
    base = collection if len(collection) <= 50 else collection[:41] + short_hash(collection)[:8]
    return f"rag_{base}" + (f"@v{version}" if version else "")


def use_schema(conn: psycopg.Connection, schema: str) -> None:
    """Make unqualified names mean ``schema``'s tables (and pgvector's types in public)."""
    conn.execute(sql.SQL("SET search_path TO {}, public").format(sql.Identifier(schema)))


def collection_names(conn: psycopg.Connection) -> list[str]:
    return [r[0] for r in conn.execute("SELECT name FROM public.rag_collections ORDER BY name")]


def registered(conn: psycopg.Connection, collection: str) -> bool:
    row = conn.execute("SELECT 1 FROM public.rag_collections WHERE name = %s", (collection,))
    return row.fetchone() is not None


def register(conn: psycopg.Connection, collection: str) -> None:
    with conn.transaction():  # CREATE SCHEMA IF NOT EXISTS races a second creator too
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (lock_key(collection, "setup"),))
        conn.execute(
            sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(
                sql.Identifier(schema_name(collection))
            )
        )
        conn.execute(
            "INSERT INTO public.rag_collections (name, schema_name) VALUES (%s, %s) "
            "ON CONFLICT (name) DO NOTHING",
            (collection, schema_name(collection)),
        )


def schema_exists(conn: psycopg.Connection, schema: str) -> bool:
    return conn.execute("SELECT to_regnamespace(%s)", (f'"{schema}"',)).fetchone()[0] is not None


def drop_schema(conn: psycopg.Connection, schema: str) -> None:
    conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


def question_marks(query: str) -> str:
    """``query``, written with SQLite's ``?`` placeholders so one text serves both
    databases, in psycopg's: ``%s`` (and a literal ``%`` doubled)."""
    return query.replace("%", "%%").replace("?", "%s")


def snapshot_schemas(conn: psycopg.Connection, collection: str) -> list[str]:
    prefix = schema_name(collection) + "@v"
    rows = conn.execute(
        "SELECT nspname FROM pg_namespace WHERE left(nspname, length(%s)) = %s", (prefix, prefix)
    )
    return [r[0] for r in rows]


def drop_snapshots(conn: psycopg.Connection, collection: str) -> None:
    for schema in snapshot_schemas(conn, collection):
        drop_schema(conn, schema)


def drop(conn: psycopg.Connection, collection: str) -> None:
    """Remove a collection, its snapshots and its registry row in one transaction."""
    with conn.transaction():
        drop_snapshots(conn, collection)
        drop_schema(conn, schema_name(collection))
        conn.execute("DELETE FROM public.rag_collections WHERE name = %s", (collection,))


def lock_key(name: str, purpose: str = "writer") -> int:
    """A 60-bit advisory-lock key per name (a collection's, a schema's) and purpose."""
    return int(short_hash(f"rag-{purpose}", name)[:15], 16)


@contextmanager
def writer_lock(url: str, collection: str) -> Iterator[bool]:
    """Hold the collection's writer lock for the block (an advisory lock: released when
    the connection ends, so a killed writer never leaves it taken). Yields whether it
    was free."""
    conn = connect(url)
    try:
        got = conn.execute("SELECT pg_try_advisory_lock(%s)", (lock_key(collection),))
        yield bool(got.fetchone()[0])
    finally:
        conn.close()


class SharedIngestion:
    """One ingestion worker among any number on a collection (``store = postgres``), on
    a connection of its own: it holds the collection's writer lock *shared* (so rollback,
    gc and drop, which take it exclusively, wait for every worker) and claims each file
    before it reads it with a lock of that file's own. A worker that dies loses its
    connection and with it its claims, so another worker takes those files up."""

    # changed files claimed, read, embedded and committed at a time: the grain at which
    # workers share a collection's files
    files_per_round: int | None = 8

    def __init__(self, url: str, collection: str) -> None:
        self._collection = collection
        self._key = lock_key(collection)
        self._conn = connect(url)

    def join(self, wait_s: float) -> bool:
        """Take the shared writer lock, waiting up to ``wait_s`` for an exclusive holder
        (another worker's brief solitary step, a rollback): whether it was had."""
        deadline = time.monotonic() + wait_s
        while True:
            got = self._conn.execute("SELECT pg_try_advisory_lock_shared(%s)", (self._key,))
            if got.fetchone()[0]:
                return True
            if time.monotonic() > deadline:
                return False
            time.sleep(0.2)

    def _file_key(self, source: str) -> int:
        return lock_key(f"{self._collection}/{source}", "file")

    def claim(self, source: str) -> bool:
        got = self._conn.execute("SELECT pg_try_advisory_lock(%s)", (self._file_key(source),))
        return bool(got.fetchone()[0])

    def release(self, source: str) -> None:
        self._conn.execute("SELECT pg_advisory_unlock(%s)", (self._file_key(source),))

    @contextmanager
    def alone(self) -> Iterator[bool]:
        """Whether no other worker is on the collection, held for the block: the steps
        that would race another worker's uploads (orphan removal, dropping the pending
        vectors, pruning) run only then."""
        got = self._conn.execute("SELECT pg_try_advisory_lock(%s)", (self._key,)).fetchone()[0]
        try:
            yield bool(got)
        finally:
            if got:
                self._conn.execute("SELECT pg_advisory_unlock(%s)", (self._key,))

    def close(self) -> None:
        self._conn.close()
