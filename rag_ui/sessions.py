"""Conversations of the chat page: one graph thread per browser tab, bounded in memory,
kept so a restart of `rag ui` loses none.

History lives in the graph's own checkpointer (the thread mechanism `rag chat` uses),
so a follow-up is rephrased by the graph's rephrase step exactly as everywhere else.
The page keeps each session's recent exchanges here too, so a flag stores what the
server produced, not what a browser claims it was shown. Each session's exchanges are
also saved in the store (``Backend.session_log``: ``<data_dir>/ui/sessions/ID.json``,
owner-only, on the embedded store; the table ``rag_ui_sessions`` of the collections'
database with ``store = postgres``), so any `rag ui` process on that store continues a
conversation another began. A session read back has its turns become the graph's
history again.
"""

from __future__ import annotations

import re
import threading
import uuid
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver

from tools.store.protocol import SessionLog

MAX_SESSIONS = 200
MAX_EXCHANGES = 50  # per session: older ones can no longer be flagged
_SESSION_ID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


@dataclass
class Session:
    id: str
    busy: bool = False  # one question at a time per conversation
    exchanges: OrderedDict[str, dict[str, Any]] = field(default_factory=OrderedDict)

    restored: bool = False  # read back from disk: the graph's thread starts empty

    def remember(self, exchange: dict[str, Any]) -> None:
        self.exchanges[exchange["id"]] = exchange
        while len(self.exchanges) > MAX_EXCHANGES:
            self.exchanges.popitem(last=False)

    def history(self) -> list[BaseMessage]:
        """The conversation so far, as the graph's ``messages``."""
        turns: list[BaseMessage] = []
        for exchange in self.exchanges.values():
            turns += [HumanMessage(exchange["question"]), AIMessage(exchange["answer"])]
        return turns


class Sessions:
    """Live sessions, least recently used evicted first (with their graph thread)."""

    def __init__(
        self,
        checkpointer: InMemorySaver,
        records: SessionLog,
        limit: int = MAX_SESSIONS,
    ) -> None:
        self.checkpointer = checkpointer
        self.records = records
        self.limit = limit
        self._items: OrderedDict[str, Session] = OrderedDict()
        self._lock = threading.Lock()

    def new(self) -> Session:
        session = Session(str(uuid.uuid4()))
        with self._lock:
            self._keep(session)
        return session

    def _keep(self, session: Session) -> None:
        """Hold ``session`` as the most recent; evict the oldest past the limit."""
        self._items[session.id] = session
        self._items.move_to_end(session.id)
        while len(self._items) > self.limit:
            old, _ = self._items.popitem(last=False)
            self.checkpointer.delete_thread(old)

    def get(self, session_id: Any) -> Session | None:
        if not isinstance(session_id, str) or not _SESSION_ID.fullmatch(session_id):
            return None
        with self._lock:
            session = self._items.get(session_id) or self._load(session_id)
            if session is not None:  # restored ones count against the limit too
                self._keep(session)
            return session

    def save(self, session: Session) -> None:
        """Save the session's exchanges in the store."""
        self.records.write(session.id, list(session.exchanges.values()))

    def _load(self, session_id: str) -> Session | None:
        saved = self.records.read(session_id)
        if saved is None:
            return None
        session = Session(session_id, restored=True)
        for exchange in saved:
            session.remember(exchange)
        return session

    def claim(self, session: Session) -> bool:
        """Mark a session busy; False when it is already answering a question."""
        with self._lock:
            if session.busy:
                return False
            session.busy = True
            return True

    def release(self, session: Session) -> None:
        with self._lock:
            session.busy = False
