"""The flag log: answers a user flagged in `rag ui`, kept whole for later review.

What a flag must hold is checked here; where it is kept is the store's
(``Backend.flag_log``: ``<data_dir>/flags.sqlite`` on the embedded store, the table
``rag_flags`` of the collections' database with ``store = postgres``, so every server's
flags are in one place). The exchange is stored as JSON (question, history, queries,
passages, prompt, answer, verdict, trace id...) because reviewing a bad answer needs
exactly what the model saw.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from tools.config import Settings
from tools.store.backends import backend
from tools.store.protocol import FlagLog

MAX_COMMENT_CHARS = 2000


class FlagError(ValueError):
    """A flag that cannot be stored as given; the message says why."""


def flag_store(settings: Settings) -> FlagStore:
    """The flag log of the configured store."""
    return FlagStore(backend(settings).flag_log(settings))


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
    """Append-only log of flagged exchanges, in the store's ``FlagLog``."""

    def __init__(self, log: FlagLog) -> None:
        self._log = log
        self.where = log.where

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
        row = {"created_at": now, "trace_id": exchange.get("trace_id"), "question": question}
        return self._log.append(row | {"comment": text, "exchange": payload})

    def list(self, limit: int | None = None) -> list[dict[str, Any]]:
        """Flags oldest first (the last ``limit`` of them), each with its exchange parsed."""
        return [row | {"exchange": json.loads(row["exchange"])} for row in self._log.rows(limit)]
