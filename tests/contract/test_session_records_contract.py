"""The chat page's saved conversations on every store (``Backend.session_log``): files
under data_dir on the embedded stores, a table of the collections' database with
store = postgres (so any `rag ui` on that database continues a conversation another
began)."""

from __future__ import annotations

import psycopg
from langgraph.checkpoint.memory import InMemorySaver

from rag_ui.sessions import MAX_EXCHANGES, Sessions
from tools.store.backends import backend
from tools.store.protocol import SessionLog


def _records(settings) -> SessionLog:
    return backend(settings).session_log(settings)


def test_sessions_saved_by_one_process_are_read_back_by_another(backend_settings):
    writer = Sessions(InMemorySaver(), _records(backend_settings))
    ids = []
    for n in range(3):
        session = writer.new()
        session.remember({"id": f"e{n}", "question": f"q{n}", "answer": f"a{n} é"})
        writer.save(session)
        ids.append(session.id)
    # another process (a restart, or another `rag ui` on the same database)
    reader = Sessions(InMemorySaver(), _records(backend_settings), limit=2)
    restored = [reader.get(i) for i in ids]
    assert all(s is not None and s.restored for s in restored)
    assert [list(s.exchanges) for s in restored] == [["e0"], ["e1"], ["e2"]]
    assert restored[2].history()[1].content == "a2 é"
    assert len(reader._items) == 2 and list(reader._items) == ids[1:]  # restored count too


def test_a_session_saved_again_is_replaced_and_an_unknown_one_is_none(backend_settings):
    sessions = Sessions(InMemorySaver(), _records(backend_settings))
    session = sessions.new()
    assert _records(backend_settings).read(session.id) is None  # nothing saved yet
    for n in range(MAX_EXCHANGES + 2):
        session.remember({"id": f"e{n}", "question": "q", "answer": "a"})
        sessions.save(session)
    saved = _records(backend_settings).read(session.id)
    assert [e["id"] for e in saved] == [f"e{n}" for n in range(2, MAX_EXCHANGES + 2)]


def test_a_table_dropped_after_the_first_write_is_made_again(backend_settings):
    """The table is made once per handle, not on every write; a database replaced under a
    running page (its table gone) still takes the next write."""
    records = _records(backend_settings)
    records.write("s1", [{"id": "e1"}])
    if backend_settings.store == "postgres":
        with psycopg.connect(backend_settings.database_url, autocommit=True) as con:
            con.execute("DROP TABLE public.rag_ui_sessions")
    records.write("s2", [{"id": "e2"}])
    assert records.read("s2") == [{"id": "e2"}]
