"""What the verifier model is shown: only evidence that can support the claim."""

from __future__ import annotations

from dataclasses import asdict

from graph import prompts
from graph.verification import agreement_of, verify_answer
from tests.fakes import RuleChat
from tools.answer_check import normalize_answer, token_overlap
from tools.retrieval import Passage

PASSAGES = [
    asdict(Passage("`k` defaults to 5 and `fetch_k` to 20.", "retrieval.md", ["r"], 0.0, 0.0)),
    asdict(Passage("Reranking keeps `rerank_keep` passages.", "reranking.md", ["k"], 0.0, 0.0)),
]


def verdict_and_prompt(answer: str) -> tuple[dict, list]:
    model = RuleChat(respond=lambda _: "yes", first_token=lambda _: {"yes": 0.9, "no": 0.1})
    verdict = verify_answer(
        model,
        "What is the default k?",
        answer,
        PASSAGES,
        threshold=0.6,
        phrase_threshold=0.7,
        retries=1,
    )
    return verdict, model.calls[0]


def test_a_clause_is_judged_against_the_passages_that_hold_its_facts():
    verdict, (context, claim) = verdict_and_prompt("`k` defaults to 5 [1][2].")
    assert verdict["grounded"] and verdict["cited"] == [1, 2]
    assert "retrieval.md" in context.text and "reranking.md" not in context.text
    assert "defaults to 5 [1]." in claim.text and "[2]" not in claim.text


def test_each_clause_brings_its_own_passage():
    _, (context, claim) = verdict_and_prompt("`k` defaults to 5 [1], and `rerank_keep` [2].")
    assert "retrieval.md" in context.text and "reranking.md" in context.text
    assert "[1]" in claim.text and "[2]" in claim.text


def test_two_answers_agree_by_their_words_not_their_markers_case_or_articles():
    assert normalize_answer("The Treaty of Rome!") == "treaty of rome"
    assert agreement_of("Packet switching [1]", "packet switching [3]") == 1.0
    assert agreement_of("The Normans [2]", "Normans") == 1.0
    assert agreement_of("1849 [1]", prompts.NOT_FOUND) == 0.0
    over_long = "Three-dimensional with the third component being at right-angles [1]"
    assert agreement_of(over_long, "Three-dimensional [1]") < 0.5
    assert token_overlap("kinematic measurements", "kinematic") == 2 / 3
    assert token_overlap("", "") == 1.0 and token_overlap("", "x") == 0.0
