"""`rag eval answers`, `rag eval judgments generate` and `rag eval retrieval --judgments`
through ``main``, on the fake-model corpus of the graph tests."""

from __future__ import annotations

import json

import pytest

from graph import prompts
from graph.services import Services
from rag_cli.main import main
from tests.fakes import RuleChat
from tests.unit.conftest import EMB


def run(services, capsys, *argv) -> str:
    code = main([str(a) for a in argv], services=services)
    captured = capsys.readouterr()
    assert code == 0, captured.err
    return captured.out


@pytest.fixture
def questions(tmp_path):
    path = tmp_path / "q.jsonl"
    path.write_text(
        json.dumps(
            {"id": "a", "question": "How do I install the service?", "answers": ["make demo"]}
        )
        + "\n"
        + json.dumps({"id": "b", "question": "What is the capital of France?", "answers": []})
        + "\n"
    )
    return path


def test_answers_on_a_question_set_writes_reports(corpus_env, models, questions, tmp_path, capsys):
    models.answer = ["Run make demo to install the service [1].", prompts.NOT_FOUND]
    out = tmp_path / "out"
    report = json.loads(
        run(
            models.services,
            capsys,
            "eval",
            "answers",
            "--questions",
            questions,
            "--collection",
            "docs",
            "--out",
            out,
            "--json",
        )
    )
    s = report["summary"]
    assert (s["answerable"], s["unanswerable"], s["f1"], s["abstention_accuracy"]) == (
        1,
        1,
        0.5,
        1.0,
    )
    assert report["settings"]["answer_style"] == "full"
    assert {p.name for p in out.iterdir()} == {
        "answers.json",
        "answers.md",
        "answers.png",
        "answers.items.jsonl",
    }
    logged = [json.loads(line) for line in (out / "answers.items.jsonl").read_text().splitlines()]
    assert logged == report["items"]

    models.answer = ["make demo [1]", prompts.NOT_FOUND]
    (tmp_path / "short").mkdir()
    run(
        models.services,
        capsys,
        "eval",
        "answers",
        "--questions",
        questions,
        "--collection",
        "docs",
        "--answer-style",
        "short",
        "--out",
        tmp_path / "short",
    )
    text = run(
        models, capsys, "eval", "compare", out / "answers.json", tmp_path / "short" / "answers.json"
    )
    assert "wins 1, loses 0, ties 1" in text  # F1 0.5 -> 1.0; the abstention stays right


def test_answers_on_a_missing_collection_fails_before_asking(corpus_env, models, questions, capsys):
    assert (
        main(
            ["eval", "answers", "--questions", str(questions), "--collection", "nope"],
            services=models.services,
        )
        == 2
    )
    assert "nope" in capsys.readouterr().err
    assert models.chats["generator"].calls == []


def test_judgment_list_round_trip(corpus_env, monkeypatch, tmp_path, capsys):
    writer = RuleChat(
        respond=lambda m: json.dumps({"questions": ["How do I install the service?"]})
    )
    services = Services(chat=lambda settings, role: writer, embed=lambda settings: EMB)
    path = tmp_path / "j.jsonl"
    run(
        services,
        capsys,
        "eval",
        "judgments",
        "generate",
        "--collection",
        "docs",
        "--out",
        path,
        "--limit",
        "1",
        "--sample-seed",
        "2",
    )
    assert len(path.read_text().splitlines()) == 1
    assert not path.with_name("j.jsonl.partial").exists()
    report = json.loads(
        run(
            services,
            capsys,
            "eval",
            "retrieval",
            "--judgments",
            path,
            "--collection",
            "docs",
            "--json",
        )
    )
    assert report["kind"] == "judgments" and report["evaluated"] == 1 and report["stale"] == 0
