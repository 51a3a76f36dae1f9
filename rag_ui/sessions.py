"""Conversations of the chat page: one graph thread per browser tab, bounded in memory.

History lives in the graph's own checkpointer (the thread mechanism `rag chat` uses),
so a follow-up is rephrased by the graph's rephrase step exactly as everywhere else.
The page keeps each session's recent exchanges here too, so a flag stores what the
server produced, not what a browser claims it was shown.
"""

from __future__ import annotations

import threading
import uuid
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from langgraph.checkpoint.memory import InMemorySaver

MAX_SESSIONS = 200
MAX_EXCHANGES = 50  # per session: older ones can no longer be flagged


@dataclass
class Session:
    id: str
    busy: bool = False  # one question at a time per conversation
    exchanges: OrderedDict[str, dict[str, Any]] = field(default_factory=OrderedDict)

    def remember(self, exchange: dict[str, Any]) -> None:
        self.exchanges[exchange["id"]] = exchange
        while len(self.exchanges) > MAX_EXCHANGES:
            self.exchanges.popitem(last=False)


class Sessions:
    """Live sessions, least recently used evicted first (with their graph thread)."""

    def __init__(self, checkpointer: InMemorySaver, limit: int = MAX_SESSIONS) -> None:
        self.checkpointer = checkpointer
        self.limit = limit
        self._items: OrderedDict[str, Session] = OrderedDict()
        self._lock = threading.Lock()

    def new(self) -> Session:
        session = Session(str(uuid.uuid4()))
        with self._lock:
            self._items[session.id] = session
            while len(self._items) > self.limit:
                old, _ = self._items.popitem(last=False)
                self.checkpointer.delete_thread(old)
        return session

    def get(self, session_id: Any) -> Session | None:
        if not isinstance(session_id, str):
            return None
        with self._lock:
            session = self._items.get(session_id)
            if session is not None:
                self._items.move_to_end(session_id)
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
