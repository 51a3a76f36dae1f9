"""The flag log: answers a user flagged in `rag ui`, kept whole for later review.

SQLite under the data directory (``<data_dir>/flags.sqlite``), or the table
``rag_flags`` of the collections' database with ``store = postgres`` (so every server's
flags are in one place), one row per flag. The
exchange is stored as JSON (question, history, queries, passages, prompt, answer,
verdict, trace id...) because reviewing a bad answer needs exactly what the model
saw; time, trace id, question and comment are also columns so `rag flags list` and
SQL queries can find a flag without parsing JSON.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from contextlib import closing, contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psycopg
from psycopg.rows import dict_row

from tools.config import Settings, redacted_url
from tools.store.backends import BACKENDS, backend
from tools.store.postgres import borrowed, question_marks

MAX_COMMENT_CHARS = 2000
COLUMNS = """
    created_at TEXT NOT NULL,
    trace_id TEXT,
    question TEXT NOT NULL,
    comment TEXT NOT NULL,
    exchange TEXT NOT NULL
"""
SQLITE_SCHEMA = (
    f"CREATE TABLE IF NOT EXISTS flags (id INTEGER PRIMARY KEY AUTOINCREMENT, {COLUMNS})"
)
POSTGRES_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS public.rag_flags "
    f"(id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY, {COLUMNS})"
)


class FlagError(ValueError):
    """A flag that cannot be stored as given; the message says why."""


def flags_file(settings: Settings) -> Path:
    """The embedded store's flag log (tools/store/backends.py says where)."""
    return BACKENDS["embedded"].flags_location(settings)["path"]


def flag_store(settings: Settings) -> FlagStore:
    """The flag log of the configured store."""
    return FlagStore(**backend(settings).flags_location(settings))


def check_comment(comment: Any) -> str:
    """The comment as stored, or a FlagError saying what is wrong with it."""
    if comment is None:
        return ""
    if not isinstance(comment, str):
        raise FlagError("'comment' must be a string")
    if len(comment) > MAX_COMMENT_CHARS:
        raise FlagError(
            f"'comment' is {len(comment)} characters, over the limit of {MAX_COMMENT_CHARS}"
        )
    return comment.strip()


class FlagStore:
    """Append-only log of flagged exchanges. Each call opens its own connection, so the
    page's worker threads and a concurrent `rag flags list` never share one."""

    def __init__(self, path: Path | None = None, *, database_url: str = "") -> None:
        self.path = path
        self._url = database_url
        self.where = redacted_url(database_url) + " (rag_flags)" if database_url else str(path)
        self._table = "public.rag_flags" if database_url else "flags"

    @contextmanager
    def _connect(self) -> Iterator[Any]:
        """A connection in one transaction, committed on success; SQL says ``?`` for a
        parameter on either database."""
        if self._url:
            # the store's own connect: its errors name RAG_DATABASE_URL, never the password
            with borrowed(self._url) as con, con.transaction():
                con.row_factory = dict_row
                # IF NOT EXISTS alone races another server's first flag
                con.execute("SELECT pg_advisory_xact_lock(hashtext('rag_flags'))")
                con.execute(POSTGRES_SCHEMA)
                yield _QuestionMarks(con)
            return
        assert self.path is not None
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with closing(sqlite3.connect(self.path, timeout=10)) as con:
            con.row_factory = sqlite3.Row
            con.execute(SQLITE_SCHEMA)
            with con:
                yield con

    def _exists(self) -> bool:
        return bool(self._url) or bool(self.path and self.path.exists())

    def add(self, exchange: dict[str, Any], comment: Any) -> int:
        """Store one flag; returns its id."""
        question = exchange.get("question") if isinstance(exchange, dict) else None
        if not isinstance(question, str) or not question.strip():
            raise FlagError("a flagged exchange needs its question")
        text = check_comment(comment)
        try:
            payload = json.dumps(exchange, ensure_ascii=False)
        except (TypeError, ValueError) as exc:
            raise FlagError(f"the exchange is not plain JSON data: {exc}") from None
        now = datetime.now(UTC).isoformat(timespec="seconds")
        with self._connect() as con:
            row = con.execute(
                f"INSERT INTO {self._table} (created_at, trace_id, question, comment, exchange) "
                "VALUES (?, ?, ?, ?, ?) RETURNING id",
                (now, exchange.get("trace_id"), question, text, payload),
            ).fetchone()
            return int(row["id"])

    def list(self, limit: int | None = None) -> list[dict[str, Any]]:
        """Flags oldest first (the last ``limit`` of them), each with its exchange parsed."""
        if not self._exists():
            return []
        query = f"SELECT * FROM {self._table} ORDER BY id DESC"
        args: tuple[int, ...] = ()
        if limit is not None:
            query += " LIMIT ?"
            args = (limit,)
        with self._connect() as con:
            rows = con.execute(query, args).fetchall()
        return [{**dict(row), "exchange": json.loads(row["exchange"])} for row in reversed(rows)]


class _QuestionMarks:
    """A psycopg connection that takes SQLite's ``?`` parameters, so the flag log's SQL is
    written once."""

    def __init__(self, con: psycopg.Connection) -> None:
        self._con = con

    def execute(self, query: str, args: tuple = ()) -> psycopg.Cursor:
        return self._con.execute(question_marks(query), args)
