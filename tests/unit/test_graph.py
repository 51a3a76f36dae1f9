"""Every node and edge of the graph, with rule-based fake models over a real (tmp) collection."""

from __future__ import annotations

import json
import re

import pytest
from langchain_core.messages import AIMessage, HumanMessage

from graph import build_graph, prompts
from tools.config import ConfigError


def ask(question, config=None, **state):
    return build_graph().invoke({"question": question, **state}, {"configurable": config or {}})


def test_answer_is_cited_verified_and_timed(corpus_env, models):
    out = ask("How do I install the service?")
    assert out["abstained"] is False
    assert out["answer"] == "Run make demo to install the service [1]."
    assert out["citations"][0]["source"] == "docs/install.md"
    assert out["citations"][0]["snippet"].startswith("# Install")
    assert out["references"] == ["[1] docs/install.md, lines 1-3 (Install)"]
    assert out["verdict"]["grounded"] is True and out["verdict"]["score"] == 1.0
    assert out["queries"] == ["How do I install the service?"]
    assert models.chats["query"].calls == []  # first turn, one query: no rephrasing call
    assert set(out["timings"]) == {
        "generate_queries",
        "retrieve",
        "generate_answer",
        "verify",
        "finalize",
    }
    assert out["prompts"]["answer"] == prompts.ANSWER.version


def test_generator_and_verifier_share_the_leading_context_block(corpus_env, models):
    ask("How do I install the service?")
    gen, ver = models.chats["generator"].calls[0], models.chats["verifier"].calls[0]
    assert gen[0].text == ver[0].text and gen[0].text.startswith("You answer questions")
    assert "Question:" in gen[-1].text and "Statements:" in ver[-1].text


def test_follow_up_is_rephrased_from_history(corpus_env, models):
    history = [HumanMessage("How do I enable tracing?"), AIMessage("Set LANGFUSE_PUBLIC_KEY [1].")]
    out = ask("and how do I turn it off?", messages=history)
    assert out["queries"] == ["How do I turn off tracing in Langfuse?"]
    call = models.chats["query"].calls[0]
    assert call[0].text == prompts.REPHRASE.text
    assert call[-1].text == (
        "Conversation:\nUser: How do I enable tracing?\nAssistant: Set LANGFUSE_PUBLIC_KEY [1].\n"
        "Last question: and how do I turn it off?\nRephrased:"
    )


def test_multi_query_adds_alternatives(corpus_env, models):
    out = ask("How do I install the service?", {"multi_query": 3})
    assert out["queries"] == ["How do I install the service?", "install steps", "setup guide"]


def test_no_passage_within_threshold_abstains_without_generating(corpus_env, models):
    out = ask("How do I install the service?", {"distance_threshold": 0.0})
    assert out["abstained"] is True
    assert "beyond the threshold 0.0" in out["answer"]
    assert out["retrieval"]["over_threshold"] > 0 and out["retrieval"]["dropped"]
    assert models.chats["generator"].calls == []
    assert out["citations"] == []


def test_model_saying_not_found_abstains(corpus_env, models):
    models.answer = prompts.NOT_FOUND
    out = ask("What is the capital of France?")
    assert out["abstained"] is True and out["answer"] == prompts.ABSTAIN_NOT_FOUND
    assert models.chats["verifier"].calls == []


def test_unsupported_answer_is_regenerated_with_feedback(corpus_env, models):
    models.answer = ["Install with pip [1].", "Run make demo to install the service [1]."]
    verdicts = iter([[False], [True]])
    models.chats["verifier"].respond = lambda m: json.dumps({"supported": next(verdicts)})
    out = ask("How do I install the service?")
    assert out["verdict"]["grounded"] is True
    assert len(models.chats["generator"].calls) == 2
    retry_prompt = models.chats["generator"].calls[1][-1].text
    assert "Install with pip [1]." in retry_prompt and "rejected" in retry_prompt
    assert out["answer"] == "Run make demo to install the service [1]."


@pytest.mark.parametrize(("policy", "abstained"), [("return", False), ("abstain", True)])
def test_loop_cap_then_policy(corpus_env, models, policy, abstained):
    models.support = [False]
    out = ask("How do I install the service?", {"max_regenerations": 1, "on_unverified": policy})
    assert len(models.chats["generator"].calls) == 2  # first answer + 1 regeneration
    assert out["verdict"]["grounded"] is False
    assert out["abstained"] is abstained
    if abstained:
        assert out["answer"] == prompts.ABSTAIN_UNVERIFIED and out["citations"] == []


def test_no_regeneration_when_cap_is_zero(corpus_env, models):
    models.support = [False]
    ask("How do I install the service?", {"max_regenerations": 0})
    assert len(models.chats["generator"].calls) == 1


def test_citations_to_missing_passages_are_dropped(corpus_env, models):
    models.answer = "Run make demo to install the service [1][9]."
    out = ask("How do I install the service?", {"k": 2})
    assert out["answer"] == "Run make demo to install the service [1]."
    assert [c["n"] for c in out["citations"]] == [1]


def test_literal_check_catches_an_invented_number(corpus_env, models):
    models.answer = "The first install takes 12 minutes [1]."
    out = ask("How long does the install take?", {"max_regenerations": 0})
    assert out["verdict"]["grounded"] is False
    assert out["verdict"]["missing"] == {"The first install takes 12 minutes [1].": ["12"]}


def test_regeneration_is_told_which_literals_are_missing(corpus_env, models):
    models.answer = ["The first install takes 12 minutes [1].", "Run make demo [1]."]
    out = ask("How long does the install take?", {"max_regenerations": 1})
    retry_prompt = models.chats["generator"].calls[1][-1].text
    assert "takes 12 minutes [1]. (not in the passages: 12)" in retry_prompt
    assert out["verdict"]["grounded"] is True


def test_malformed_verifier_output_is_reported_not_fatal(corpus_env, models):
    models.support = '{"supported": [tr'
    out = ask("How do I install the service?", {"llm_max_retries": 1})
    assert out["verdict"]["grounded"] is False
    assert "verifier failed" in out["verdict"]["error"]
    assert out["answer"].startswith("Run make demo")
    assert len(models.chats["verifier"].calls) == 2  # retried once, then reported


def test_llm_rerank_reorders_and_cuts(corpus_env, models):
    models.grades = {"Turning it off": 3, "verifier is": 1}
    ask(
        "How do I install the service?",
        {"rerank": "llm", "k": 3, "rerank_keep": 2, "distance_threshold": 2.0},
    )
    context = models.chats["generator"].calls[0][0].text
    assert context.index("Turning it off") < context.index("verifier is")
    assert len(re.findall(r"^\[\d+\] \(", context, flags=re.M)) == 2  # cut to rerank_keep


def test_window_strategy_merges_neighbours(corpus_env, models):
    out = ask("How do I turn tracing off?", {"retrieval_strategy": "window", "k": 1})
    context = models.chats["generator"].calls[0][0].text
    assert "Set LANGFUSE_PUBLIC_KEY" in context and "Unset the keys" in context
    assert out["retrieval"]["strategy"] == "window"


@pytest.mark.parametrize("question", ["", "   ", None, "x" * 3000])
def test_bad_questions_are_rejected(corpus_env, models, question):
    with pytest.raises(ValueError, match="question"):
        ask(question)


def test_unknown_collection_is_a_clear_error(corpus_env, models):
    with pytest.raises(ConfigError, match="unknown collection 'nope'"):
        ask("How do I install?", collection="nope")


def test_state_resets_between_questions_on_a_thread(corpus_env, models):
    from langgraph.checkpoint.memory import InMemorySaver

    app = build_graph(checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "t1"}}
    models.support = [False]
    first = app.invoke({"question": "How do I install the service?"}, config)
    models.support = None
    second = app.invoke({"question": "How do I turn tracing off?"}, config)
    assert first["verdict"]["grounded"] is False and second["verdict"]["grounded"] is True
    assert second["timings"]["generate_answer"] < 5
    assert len(app.get_state(config).values["messages"]) == 4
    assert models.chats["query"].calls  # the second question was rephrased with history


def test_querying_with_another_embedding_model_is_refused(corpus_env, models):
    with pytest.raises(ConfigError, match="was embedded with 'local'"):
        ask("How do I install?", {"embedding_model": "openai:other@http://127.0.0.1:9/v1"})


def test_short_answer_style_uses_its_own_prompt_and_the_verifier_sees_the_question(
    corpus_env, models
):
    models.answer = "make demo [1]"
    out = ask("How do I install the service?", {"answer_style": "short"})
    assert out["answer"] == "make demo [1]" and out["verdict"]["grounded"] is True
    assert "shortest exact phrase" in models.chats["generator"].calls[0][-1].text
    assert "Question: How do I install the service?" in models.chats["verifier"].calls[0][-1].text


def test_citation_markers_alone_are_regenerated_unverified(corpus_env, models):
    models.answer = ["[1]\n[2]", "Run make demo to install the service [1]."]
    out = ask("How do I install the service?", {"max_regenerations": 1})
    assert len(models.chats["generator"].calls) == 2
    assert prompts.NO_STATEMENT in models.chats["generator"].calls[1][-1].text
    assert len(models.chats["verifier"].calls) == 1  # only the second answer had statements
    assert out["verdict"]["grounded"] is True
    assert out["answer"] == "Run make demo to install the service [1]."


def _answer_check(models, yes: float) -> None:
    models.chats["verifier"].first_token = lambda m: {" Yes": yes, "no": 1 - yes - 0.01, "x": 0.01}


def test_answer_check_below_threshold_abstains_without_regenerating(corpus_env, models):
    _answer_check(models, 0.3)
    out = ask("How do I install the service?", {"answer_check_threshold": 0.5})
    assert out["abstained"] is True and out["citations"] == []
    assert out["answer"].startswith("The documents do not clearly say") and "0.30" in out["answer"]
    assert out["verdict"]["grounded"] is True
    assert out["verdict"]["answer_confidence"] == pytest.approx(0.3 / 0.99, abs=1e-4)
    assert out["verdict"]["withheld_answer"] == "Run make demo to install the service ."
    assert len(models.chats["generator"].calls) == 1


def test_answer_check_above_threshold_keeps_the_answer(corpus_env, models):
    _answer_check(models, 0.8)
    out = ask("How do I install the service?", {"answer_check_threshold": 0.5})
    assert out["abstained"] is False and out["answer"].startswith("Run make demo")
    assert out["verdict"]["answer_confidence"] == pytest.approx(0.8 / 0.99, abs=1e-4)
    statements_call, check_call = models.chats["verifier"].calls
    assert check_call[0].text == statements_call[0].text  # same passages block: cached prefix
    assert check_call[-1].text == prompts.ANSWER_CHECK.text.format(
        question="How do I install the service?",
        answer="Run make demo to install the service .",
    )


def test_answer_check_is_off_by_default(corpus_env, models):
    _answer_check(models, 0.1)
    out = ask("How do I install the service?")
    assert out["abstained"] is False and "answer_confidence" not in out["verdict"]
    assert len(models.chats["verifier"].calls) == 1


def test_answer_check_without_logprobs_keeps_the_answer_and_says_why(corpus_env, models):
    out = ask("How do I install the service?", {"answer_check_threshold": 0.5})
    assert out["abstained"] is False and out["answer"].startswith("Run make demo")
    assert out["error"]["stage"] == "answer_check" and out["error"]["type"] == "malformed_output"
    assert "answer_check_threshold=0" in out["verdict"]["answer_check_error"]
