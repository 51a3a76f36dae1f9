"""What the backends' flag logs and chat-session logs share (``FlagLog``, ``SessionLog``
in tools/store/protocol.py): the flag table's SQL, written once with ``?`` parameters
for SQLite and PostgreSQL alike, and the form a saved conversation is stored in.

The flag log keeps each exchange as JSON (reviewing a bad answer needs exactly what the
model saw); time, trace id, question and comment are also columns, so `rag flags list`
and plain SQL find a flag without parsing JSON.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from contextlib import AbstractContextManager
from typing import Any, Protocol

FLAG_COLUMNS_SQL = """
    created_at TEXT NOT NULL,
    trace_id TEXT,
    question TEXT NOT NULL,
    comment TEXT NOT NULL,
    exchange TEXT NOT NULL
"""


class _Rows(Protocol):
    """A connection that runs ``?`` statements and returns rows read by column name."""

    def execute(self, query: str, args: tuple = ()) -> Any: ...


class FlagTable(ABC):
    """A ``FlagLog`` in one SQL table; a backend says how to connect and whether it exists.
    Each call opens its own connection, so the page's worker threads and a concurrent
    `rag flags list` never share one."""

    table: str
    where: str

    @abstractmethod
    def _connect(self) -> AbstractContextManager[_Rows]:
        """A connection in one transaction, committed on success, the table made."""

    @abstractmethod
    def _exists(self) -> bool:
        """Whether the log may hold rows (listing an absent log creates nothing)."""

    def append(self, row: dict[str, Any]) -> int:
        with self._connect() as con:
            added = con.execute(
                f"INSERT INTO {self.table} (created_at, trace_id, question, comment, exchange) "
                "VALUES (?, ?, ?, ?, ?) RETURNING id",
                tuple(
                    row[k] for k in ("created_at", "trace_id", "question", "comment", "exchange")
                ),
            ).fetchone()
            return int(added["id"])

    def rows(self, limit: int | None = None) -> list[dict[str, Any]]:
        if not self._exists():
            return []
        query = f"SELECT * FROM {self.table} ORDER BY id DESC"
        args: tuple[int, ...] = ()
        if limit is not None:
            query += " LIMIT ?"
            args = (limit,)
        with self._connect() as con:
            found = con.execute(query, args).fetchall()
        return [dict(row) for row in reversed(found)]


def session_text(exchanges: list[dict[str, Any]]) -> str:
    """A conversation as a session log stores it."""
    return json.dumps({"exchanges": exchanges})


def session_exchanges(text: str | None) -> list[dict[str, Any]] | None:
    """A stored conversation's exchanges; None for none, or for a record that does not
    parse (the page then starts a new conversation)."""
    try:
        return None if text is None else list(json.loads(text)["exchanges"])
    except (ValueError, KeyError, TypeError):
        return None
