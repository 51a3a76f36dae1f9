"""The whole graph on the real local models over the default corpus (docs_corpus/)."""

from __future__ import annotations

from pathlib import Path

import pytest
from langchain_core.messages import AIMessage, HumanMessage

from graph import build_graph
from ingest.pipeline import IngestOptions, Ingestor
from tools.collection import Collection
from tools.config import load_settings
from tools.models import embeddings

pytestmark = pytest.mark.slow
CORPUS = Path(__file__).resolve().parents[2] / "docs_corpus"


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    path = tmp_path_factory.mktemp("data")
    settings = load_settings({"data_dir": path})
    collection = Collection(settings, create=True)
    report = Ingestor(
        settings, collection, embeddings(settings), IngestOptions(), progress=False
    ).run([CORPUS])
    assert report.chunks_added > 0 and not report.skipped
    return path


# Generous deadline: CI machines are shared and noisy; a 1.5B model on two cores reads a
# prompt of five passages in ~20 s on a quiet machine and far slower on a busy one.
RUN = {"llm_timeout_s": 900, "k": 4}


def ask(data_dir, question, **state):
    return build_graph().invoke(
        {"question": question, **state}, {"configurable": {"data_dir": data_dir, **RUN}}
    )


def test_answerable_question_gets_a_cited_verified_answer(data_dir):
    out = ask(data_dir, "How do I switch the answer generator to an OpenAI-compatible server?")
    assert out["abstained"] is False
    assert out["citations"], out["answer"]
    assert {c["source"] for c in out["citations"]} & {
        "docs_corpus/models.md",
        "docs_corpus/configuration.md",
        "docs_corpus/cli.md",
    }
    assert "openai" in out["answer"].lower()
    verdict = out["verdict"]
    assert verdict["score"] is not None and verdict["statements"] > 0, verdict  # it was checked
    # The 1.5B verifier plus the literal check do not yet verify every correct answer (see
    # issue 5's note); a verdict must at least be consistent with what it reports.
    assert verdict["grounded"] == (not verdict["unsupported"]), verdict


def test_typical_question_is_verified_on_the_first_answer(data_dir):
    out = ask(data_dir, "Which setting controls how long a model call may take?")
    assert "llm_timeout_s" in out["answer"] and out["citations"], out["answer"]
    assert out["verdict"]["grounded"] is True, out["verdict"]
    assert out["attempts"] == 1, out["verdict"]  # no regeneration needed


def test_question_the_corpus_cannot_answer_is_abstained(data_dir):
    out = ask(data_dir, "What is the boiling point of mercury in Kelvin?")
    assert out["abstained"] is True, out["answer"]
    assert out["answer"].startswith("The documents do not say") or "not" in out["answer"]
    assert out["citations"] == []


def test_follow_up_question_is_rephrased_with_history(data_dir):
    history = [
        HumanMessage("What does rag doctor do?"),
        AIMessage("rag doctor loads every configured model and reports the time of each step."),
    ]
    out = ask(data_dir, "And how do I get its report as JSON?", messages=history)
    standalone = out["queries"][0].lower()
    assert standalone != "and how do i get its report as json?"
    assert "doctor" in standalone
