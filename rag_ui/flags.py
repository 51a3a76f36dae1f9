"""The flag log: answers a user flagged in `rag ui`, kept whole for later review.

SQLite under the data directory (``<data_dir>/flags.sqlite``), one row per flag. The
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

from tools.config import Settings

MAX_COMMENT_CHARS = 2000
SCHEMA = """
CREATE TABLE IF NOT EXISTS flags (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    created_at TEXT NOT NULL,
    trace_id TEXT,
    question TEXT NOT NULL,
    comment TEXT NOT NULL,
    exchange TEXT NOT NULL
)
"""


class FlagError(ValueError):
    """A flag that cannot be stored as given; the message says why."""


def flags_file(settings: Settings) -> Path:
    return settings.data_dir.resolve() / "flags.sqlite"


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

    def __init__(self, path: Path) -> None:
        self.path = path

    @contextmanager
    def _connect(self) -> Iterator[sqlite3.Connection]:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with closing(sqlite3.connect(self.path, timeout=10)) as con:
            con.row_factory = sqlite3.Row
            con.execute(SCHEMA)
            with con:  # one transaction, committed on success
                yield con

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
            cursor = con.execute(
                "INSERT INTO flags (created_at, trace_id, question, comment, exchange) "
                "VALUES (?, ?, ?, ?, ?)",
                (now, exchange.get("trace_id"), question, text, payload),
            )
            return int(cursor.lastrowid)

    def list(self, limit: int | None = None) -> list[dict[str, Any]]:
        """Flags oldest first (the last ``limit`` of them), each with its exchange parsed."""
        if not self.path.exists():
            return []
        query = "SELECT * FROM flags ORDER BY id DESC"
        args: tuple[int, ...] = ()
        if limit is not None:
            query += " LIMIT ?"
            args = (limit,)
        with self._connect() as con:
            rows = con.execute(query, args).fetchall()
        return [{**dict(row), "exchange": json.loads(row["exchange"])} for row in reversed(rows)]
