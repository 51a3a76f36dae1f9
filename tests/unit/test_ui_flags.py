"""The flag log (SQLite under the data directory) and `rag flags list/export`."""

from __future__ import annotations

import json
import sqlite3

import pytest

from rag_cli.main import main
from rag_ui.flags import MAX_COMMENT_CHARS, FlagError, flag_store
from tools.store.embedded import BACKEND as EMBEDDED


def flags_file(settings):
    """Where the embedded store keeps the flag log."""
    return EMBEDDED.flag_log(settings).path


def exchange(question="What is rag?", **extra):
    return {
        "question": question,
        "history": [{"role": "human", "content": "hi"}],
        "passages": [{"n": 1, "source": "a.md", "text": "rag answers questions"}],
        "prompt": [{"role": "system", "content": "..."}],
        "answer": "rag answers questions [1].",
        "verdict": {"grounded": True, "score": 1.0},
        "trace_id": "abc123",
        **extra,
    }


def test_flags_are_stored_with_columns_and_the_whole_exchange(settings):
    store = flag_store(settings)
    first = store.add(exchange(), "  wrong source  ")
    second = store.add(exchange("Second?", trace_id=None), None)
    assert (first, second) == (1, 2)
    flags = store.list()
    assert [f["id"] for f in flags] == [1, 2]
    assert flags[0]["comment"] == "wrong source" and flags[0]["trace_id"] == "abc123"
    assert flags[0]["exchange"] == exchange() and flags[1]["comment"] == ""
    assert flags[0]["created_at"].endswith("+00:00")
    assert [f["id"] for f in store.list(limit=1)] == [2]  # the latest, oldest first
    with sqlite3.connect(flags_file(settings)) as con:  # plain SQL finds flags too
        assert con.execute("SELECT question FROM flags WHERE id = 2").fetchone() == ("Second?",)


@pytest.mark.parametrize(
    ("item", "comment", "message"),
    [
        ({"answer": "no question"}, "", "needs its question"),
        (exchange("   "), "", "needs its question"),
        ("not a dict", "", "needs its question"),
        (exchange(), 7, "must be a string"),
        (exchange(), "x" * (MAX_COMMENT_CHARS + 1), f"over the limit of {MAX_COMMENT_CHARS}"),
        (exchange(extra=object()), "", "not plain JSON"),
    ],
)
def test_bad_flags_are_refused_and_nothing_is_stored(settings, item, comment, message):
    store = flag_store(settings)
    with pytest.raises(FlagError, match=message):
        store.add(item, comment)
    assert store.list() == []


def test_listing_an_absent_log_creates_nothing(settings):
    assert flag_store(settings).list() == []
    assert not flags_file(settings).exists()


def test_rag_flags_list_and_export(settings, capsys, tmp_path):
    assert main(["flags", "list"]) == 0
    assert "no flags in" in capsys.readouterr().out
    store = flag_store(settings)
    store.add(exchange(), "wrong source")
    store.add(exchange("Second?"), "too long")
    assert main(["flags", "list"]) == 0
    text = capsys.readouterr().out
    assert "#1" in text and "question: What is rag?" in text and "comment:  too long" in text
    assert main(["flags", "list", "--json", "--limit", "1"]) == 0
    (only,) = json.loads(capsys.readouterr().out)
    assert only["question"] == "Second?" and only["exchange"]["answer"].startswith("rag")
    out = tmp_path / "export" / "flags.jsonl"
    assert main(["flags", "export", "--out", str(out)]) == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["comment"] for r in rows] == ["wrong source", "too long"]
    assert rows[0]["exchange"]["passages"][0]["source"] == "a.md"
    assert "2 flag(s) written" in capsys.readouterr().err
    assert main(["flags", "export"]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 2
    assert main(["flags", "list", "--limit", "0"]) == 2


def test_with_store_postgres_every_server_shares_one_flag_log(tmp_path, database_url):
    from tools.config import load_settings

    settings = [
        load_settings(
            {"data_dir": tmp_path / name, "store": "postgres", "database_url": database_url}
        )
        for name in ("one", "two")
    ]
    assert flag_store(settings[0]).list() == []
    first = flag_store(settings[0]).add(exchange(), "wrong source")
    second = flag_store(settings[1]).add(exchange("Second?"), None)
    flags = flag_store(settings[1]).list()
    assert [f["id"] for f in flags] == [first, second]
    assert flags[0]["exchange"] == exchange() and flags[1]["question"] == "Second?"
    assert "rag_flags" in flag_store(settings[0]).where
    assert not any((tmp_path / name).exists() for name in ("one", "two"))
