"""The chat page's flag log on every store (``Backend.flag_log``): what is added comes
back whole, numbered and oldest first, and listing an empty log finds nothing."""

from __future__ import annotations

from rag_ui.flags import flag_store


def exchange(question: str) -> dict:
    return {"question": question, "answer": "an answer [1].", "trace_id": "t1", "n": [1, 2]}


def test_flags_come_back_whole_numbered_and_oldest_first(backend_settings):
    assert flag_store(backend_settings).list() == []
    first = flag_store(backend_settings).add(exchange("First?"), "  wrong source ")
    second = flag_store(backend_settings).add(exchange("Second?"), None)
    flags = flag_store(backend_settings).list()  # another handle: what is stored, not cached
    assert [f["id"] for f in flags] == [first, second] and first < second
    assert flags[0]["exchange"] == exchange("First?") and flags[0]["comment"] == "wrong source"
    assert (flags[1]["question"], flags[1]["comment"], flags[1]["trace_id"]) == (
        "Second?",
        "",
        "t1",
    )
    assert [f["id"] for f in flag_store(backend_settings).list(limit=1)] == [second]
    assert flag_store(backend_settings).list(limit=0) == []
