"""Where ``rag ask --thread`` and ``rag chat --thread`` keep a conversation.

On the embedded store a thread is a JSON file of its messages under
``<data_dir>/threads``, read back and given to the graph with the next question. On
``store = "postgres"`` it is LangGraph's own Postgres checkpointer in the collections'
database: the graph's state, messages included, is saved after every step, so a
conversation started by one process (or machine) continues in any other that reaches
the database.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from langchain_core.messages import BaseMessage, messages_from_dict, messages_to_dict
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.memory import InMemorySaver

from tools.config import Settings

_THREAD = re.compile(r"[A-Za-z0-9._-]{1,64}")


def check_thread(thread: str) -> str:
    if not _THREAD.fullmatch(thread):
        raise ValueError("--thread must be 1-64 letters, digits, '.', '_' or '-'")
    return thread


class Threads:
    """The checkpointer a graph runs with, and a thread's earlier messages to give it."""

    def __init__(self, checkpointer: BaseCheckpointSaver, folder: Path | None) -> None:
        self.checkpointer = checkpointer
        self._folder = folder  # None: the checkpointer itself keeps threads

    def _path(self, thread: str) -> Path | None:
        return self._folder / f"{check_thread(thread)}.json" if self._folder else None

    def history(self, thread: str | None) -> list[BaseMessage]:
        """Messages to send with the thread's next question (none when the checkpointer
        already holds them)."""
        path = self._path(thread) if thread else None
        return messages_from_dict(json.loads(path.read_text())) if path and path.exists() else []

    def keep(self, thread: str | None, app: Any, config: dict[str, Any]) -> None:
        """Save the conversation after an answer (a file; the checkpointer saved itself)."""
        path = self._path(thread) if thread else None
        if path:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(messages_to_dict(app.get_state(config).values["messages"])))


@contextmanager
def open_threads(settings: Settings) -> Iterator[Threads]:
    if settings.store != "postgres":
        yield Threads(InMemorySaver(), settings.data_dir / "threads")
        return
    from langgraph.checkpoint.postgres import PostgresSaver

    with PostgresSaver.from_conn_string(settings.database_url) as saver:
        saver.setup()  # creates or migrates its tables; idempotent
        yield Threads(saver, None)
