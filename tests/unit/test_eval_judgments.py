"""The judgment list: questions written per chunk, then scored through the real retriever."""

from __future__ import annotations

import json

import pytest

from evaluation import judgments
from evaluation.datasets import DatasetError
from tests.fakes import RuleChat
from tests.unit.conftest import EMB
from tools.store.collection import Collection

QUESTIONS = {  # a question per page, keyed by a word of its passage
    "make demo": "How do I install the service?",
    "verifier": "What checks the statements of an answer?",
    "LANGFUSE": "How do I stop sending traces to Langfuse?",
}


def _writer(messages):
    passage = messages[-1].text.split("Passage:\n", 1)[1]
    return json.dumps({"questions": [q for k, q in QUESTIONS.items() if k in passage]})


def test_generate_then_score_finds_each_source_chunk(corpus_env):
    collection = Collection(corpus_env, "docs")
    model = RuleChat(respond=_writer)
    records = list(judgments.generate(corpus_env, collection, model, progress=False))
    assert {r["question"] for r in records} == set(QUESTIONS.values())
    assert len(records) == 4  # tracing.md has two sections (chunks) naming LANGFUSE
    assert all(r["chunk_id"] in collection.manifest.chunk_ids() for r in records)

    stale = {**records[0], "id": "gone", "chunk_id": "no-such-chunk"}
    report = judgments.score(corpus_env, collection, EMB, [*records, stale])
    assert (report["judgments"], report["stale"], report["evaluated"]) == (5, 1, 4)
    ranks = [(r["question"], r["rank"]) for r in report["queries"]]
    assert ("How do I install the service?", 1) in ranks
    k = corpus_env.k
    # hit@k and MRR@k by hand from the ranks
    hits = [rank for _, rank in ranks if rank]
    assert report[f"hit@{k}"] == round(len(hits) / 4, 4)
    assert report[f"mrr@{k}"] == round(sum(1 / r for r in hits) / 4, 4)


def test_sample_is_seeded_and_limited(corpus_env):
    collection = Collection(corpus_env, "docs")
    model = RuleChat(respond=lambda m: json.dumps({"questions": ["Q?"]}))
    one = list(judgments.generate(corpus_env, collection, model, limit=2, seed=5, progress=False))
    two = list(judgments.generate(corpus_env, collection, model, limit=2, seed=5, progress=False))
    assert len(one) == 2 and [r["chunk_id"] for r in one] == [r["chunk_id"] for r in two]


def test_a_reply_that_is_not_a_question_is_dropped_and_another_chunk_replaces_it(
    corpus_env, capsys
):
    collection = Collection(corpus_env, "docs")
    replies = iter(["What is the purpose of the reranker in the", "Is it a question?"] * 9)
    model = RuleChat(respond=lambda m: json.dumps({"questions": [next(replies)]}))
    records = list(judgments.generate(corpus_env, collection, model, limit=2, progress=False))
    assert [r["question"] for r in records] == ["Is it a question?"] * 2
    assert len({r["chunk_id"] for r in records}) == 2
    assert capsys.readouterr().err.count("not a question") == 2


def test_malformed_judgment_file_names_the_line(tmp_path):
    path = tmp_path / "j.jsonl"
    path.write_text('{"question": "Q?", "chunk_id": "c1"}\n{"question": "Q?"}\n')
    with pytest.raises(DatasetError, match=r"j\.jsonl:2"):
        judgments.load(path)
