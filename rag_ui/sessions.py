"""Conversations of the chat page: one graph thread per browser tab, bounded in memory,
kept so a restart of `rag ui` loses none.

History lives in the graph's own checkpointer (the thread mechanism `rag chat` uses),
so a follow-up is rephrased by the graph's rephrase step exactly as everywhere else.
The page keeps each session's recent exchanges here too, so a flag stores what the
server produced, not what a browser claims it was shown. Each session's exchanges are
also saved (``SessionRecords``): in ``<data_dir>/ui/sessions/ID.json`` (owner-only) on
the embedded store, in the table ``rag_ui_sessions`` of the collections' database with
``store = postgres``, so any `rag ui` process on that database continues a conversation
another began. A session read back has its turns become the graph's history again.
"""

from __future__ import annotations

import json
import os
import re
import threading
import uuid
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver

from tools.store.postgres import borrowed

MAX_SESSIONS = 200
MAX_EXCHANGES = 50  # per session: older ones can no longer be flagged
MAX_SAVED = 1000  # conversations kept on disk; the least recently used go first
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


POSTGRES_SCHEMA = """
CREATE TABLE IF NOT EXISTS public.rag_ui_sessions (
    id TEXT PRIMARY KEY,
    exchanges TEXT NOT NULL,
    updated_at TIMESTAMPTZ NOT NULL DEFAULT now()
)"""


class SessionRecords:
    """Where sessions are saved: a folder of JSON files, or a table in PostgreSQL
    (``tools.store.backends``' ``sessions_location`` says which). The newest
    ``MAX_SAVED`` are kept."""

    def __init__(self, folder: Path | None = None, *, database_url: str = "") -> None:
        self.folder = folder
        self._url = database_url
        self._made = False  # the table, once seen made by this handle

    def _make_table(self) -> None:
        """The sessions table, made once per handle under a lock: IF NOT EXISTS alone races
        another server's first session. Not on every write: the lock is global, so it
        would queue every server's chat writes behind one another."""
        with borrowed(self._url) as con, con.transaction():
            con.execute("SELECT pg_advisory_xact_lock(hashtext('rag_ui_sessions'))")
            con.execute(POSTGRES_SCHEMA)
        self._made = True

    def write(self, session_id: str, exchanges: list[dict[str, Any]]) -> None:
        payload = json.dumps({"exchanges": exchanges})
        if self._url:
            if not self._made:
                self._make_table()
            try:
                self._upsert(session_id, payload)
            except psycopg.errors.UndefinedTable:  # the database was replaced since
                self._make_table()
                self._upsert(session_id, payload)
            return
        if self.folder is None:
            return
        self.folder.mkdir(parents=True, exist_ok=True)
        path = self.folder / f"{session_id}.json"
        partial = path.with_suffix(".partial")
        fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(payload)
        partial.replace(path)
        saved = sorted(self.folder.glob("*.json"), key=lambda p: p.stat().st_mtime)
        for old in saved[:-MAX_SAVED]:
            old.unlink(missing_ok=True)

    def _upsert(self, session_id: str, payload: str) -> None:
        """Save one session and drop all but the newest ``MAX_SAVED``."""
        with borrowed(self._url) as con, con.transaction():
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
        """The saved exchanges, or None when there are none, or when a file cannot be
        read or a record parsed (the page then starts a new conversation)."""
        if self._url:  # a database that cannot be reached is its DatabaseError, not None
            with borrowed(self._url) as con:
                exists = con.execute("SELECT to_regclass('public.rag_ui_sessions')")
                if exists.fetchone()[0] is None:
                    return None
                row = con.execute(
                    "SELECT exchanges FROM public.rag_ui_sessions WHERE id = %s", (session_id,)
                ).fetchone()
            text = row[0] if row else None
        else:
            path = self.folder / f"{session_id}.json" if self.folder else None
            try:
                text = path.read_text(encoding="utf-8") if path and path.is_file() else None
            except OSError:
                return None
        try:
            return None if text is None else list(json.loads(text)["exchanges"])
        except (ValueError, KeyError, TypeError):
            return None


class Sessions:
    """Live sessions, least recently used evicted first (with their graph thread)."""

    def __init__(
        self,
        checkpointer: InMemorySaver,
        records: SessionRecords | None = None,
        limit: int = MAX_SESSIONS,
    ) -> None:
        self.checkpointer = checkpointer
        self.records = records or SessionRecords()
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
        """Save the session's exchanges (``SessionRecords``)."""
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
