"""Where ``rag ask --thread`` and ``rag chat --thread`` keep a conversation: in LangGraph's
own checkpointer, which saves the graph's state (messages included) after every step.

On the embedded store it is SQLite's, in ``<data_dir>/threads.sqlite``; on
``store = "postgres"`` it is Postgres's, in the collections' database, so a
conversation started by one process (or machine) continues in any other that reaches
the database. A thread saved by an older version as ``<data_dir>/threads/ID.json`` is
read once, as the earlier turns of its next question, and the checkpointer keeps it
from then on.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from langchain_core.messages import BaseMessage, messages_from_dict
from langgraph.checkpoint.base import BaseCheckpointSaver

from tools.config import Settings
from tools.store.backends import backend

_THREAD = re.compile(r"[A-Za-z0-9._-]{1,64}")


def check_thread(thread: str) -> str:
    if not _THREAD.fullmatch(thread):
        raise ValueError("--thread must be 1-64 letters, digits, '.', '_' or '-'")
    return thread


class Threads:
    """The checkpointer a graph runs with, and what a thread already holds."""

    def __init__(self, checkpointer: BaseCheckpointSaver, legacy: Path | None) -> None:
        self.checkpointer = checkpointer
        self._legacy = legacy  # the JSON files of older versions, if any

    def _saved(self, thread: str) -> list[BaseMessage] | None:
        """The checkpointed conversation, or None when the checkpointer has no such thread."""
        found = self.checkpointer.get_tuple({"configurable": {"thread_id": thread}})
        return list(found.checkpoint["channel_values"].get("messages") or []) if found else None

    def _from_file(self, thread: str) -> list[BaseMessage]:
        path = self._legacy / f"{thread}.json" if self._legacy else None
        return messages_from_dict(json.loads(path.read_text())) if path and path.exists() else []

    def earlier(self, thread: str | None) -> list[BaseMessage]:
        """The conversation so far (checkpointed, else an older version's file)."""
        if not thread:
            return []
        saved = self._saved(check_thread(thread))
        return self._from_file(thread) if saved is None else saved

    def history(self, thread: str | None) -> list[BaseMessage]:
        """Messages to send with the thread's next question: none when the checkpointer
        holds the thread already (it adds them itself), else an older version's file."""
        if not thread or self._saved(check_thread(thread)) is not None:
            return []
        return self._from_file(thread)


@contextmanager
def open_threads(settings: Settings) -> Iterator[Threads]:
    store = backend(settings)
    with store.checkpointer(settings) as saver:
        yield Threads(saver, store.thread_files(settings))
