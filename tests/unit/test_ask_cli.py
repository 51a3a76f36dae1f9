"""`rag ask` and `rag chat` end to end with fake models over a real (tmp) collection."""

from __future__ import annotations

import json

from rag_cli.main import main


def test_ask_json_prints_the_answer_object(corpus_env, models, capsys):
    assert main(["ask", "How do I install the service?", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert set(out) >= {
        "answer",
        "citations",
        "verdict",
        "abstained",
        "queries",
        "timings",
        "trace_id",
        "references",
    }
    assert out["citations"][0]["source"] == "docs/install.md"


def test_ask_thread_keeps_history_between_calls(corpus_env, models, capsys):
    assert main(["ask", "How do I enable tracing?", "--thread", "t1"]) == 0
    assert models.chats["query"].calls == []
    capsys.readouterr()
    assert main(["ask", "and how do I turn it off?", "--thread", "t1", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["queries"] == [models.rephrased]  # rephrased from the saved history
    assert "Last question: and how do I turn it off?" in models.chats["query"].calls[0][-1].text


def test_ask_rejects_a_bad_thread_id_and_empty_question(corpus_env, models, capsys):
    assert main(["ask", "hi", "--thread", "../escape"]) == 2
    assert main(["ask", "   "]) == 2
    assert "question must be a non-empty string" in capsys.readouterr().err


def test_chat_answers_shows_passages_and_starts_over(corpus_env, models, capsys, monkeypatch):
    lines = iter(
        [
            "How do I install the service?",
            "/passages",
            "/prompt",
            "/new",
            "How do I install the service?",
            "/quit",
        ]
    )
    monkeypatch.setattr("builtins.input", lambda _prompt="": next(lines))
    assert main(["chat"]) == 0
    out = capsys.readouterr().out
    assert out.count("Run make demo to install the service [1].") == 2
    assert "[1] docs/install.md score=" in out
    assert "--- system ---" in out and "Question: How do I install the service?" in out
    assert models.chats["query"].calls == []  # /new started a fresh conversation
