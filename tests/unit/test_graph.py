"""Every node and edge of the graph, with rule-based fake models over a real (tmp) collection."""

from __future__ import annotations

import re

import pytest
from langchain_core.messages import AIMessage, HumanMessage

from graph import build_graph, config_for, prompts
from graph.builder import DIRECT_PATH
from graph.checks.tuning import SAME_ANSWER_F1
from graph.context import context_message
from graph.services import Services
from tools.config import ConfigError, Settings
from tools.errors import LLMTimeoutError
from tools.verifier_thresholds import record

DEFAULTS = Settings()
# with check 5 off (its band decides by agreement, whatever the form), enough for a
# sentence on the verifier's yes alone, not for a bare phrase (verify_threshold_phrase)
CHECK_5_OFF = {
    "verify_threshold_agreed": 1.0,
    "verify_threshold_agreed_bare": 1.0,
    "verify_threshold_alone": 0.0,
}
BETWEEN_THRESHOLDS = (DEFAULTS.verify_threshold + DEFAULTS.verify_threshold_phrase) / 2


def ask(models, question, config=None, **state):
    return build_graph().invoke(
        {"question": question, **state},
        config_for(**(config or {})),
        context=models.services,
    )


def test_answer_is_cited_verified_and_timed(corpus_env, models):
    out = ask(models, "How do I install the service?")
    assert out["abstained"] is False
    assert out["answer"] == "Run make demo to install the service [1]."
    assert out["citations"][0]["source"] == "docs/install.md"
    assert out["citations"][0]["snippet"].startswith("# Install")
    assert out["references"] == ["[1] docs/install.md, lines 1-3 (Install)"]
    assert out["verdict"]["grounded"] is True and out["verdict"]["confidence"] == 0.9
    assert out["outcome"] == "verified"
    assert out["queries"] == ["How do I install the service?"]
    assert models.chats["query"].calls == []  # first turn, one query: no rephrasing call
    assert tuple(out["timings"]) == DIRECT_PATH
    assert out["prompts"]["answer"] == prompts.ANSWER.version


def test_verifier_reads_only_the_cited_passages_and_the_question_answer_pair(corpus_env, models):
    ask(models, "How do I install the service?", {"k": 3, "distance_threshold": 2.0})
    gen, ver = models.chats["generator"].calls[0], models.chats["verifier"].calls[0]
    assert "[1] (" in gen[0].text and "[2] (" in gen[0].text
    assert "[1] (" in ver[0].text and "[2] (" not in ver[0].text
    assert ver[-1].text == prompts.VERIFY.text.format(
        question="How do I install the service?",
        answer="Run make demo to install the service [1].",
    )


def test_the_verifier_context_keeps_the_answers_passage_numbers():
    passage = {"text": "x", "source": "a.md", "chunk_ids": ["c"], "score": 0, "distance": 0}
    text = context_message([passage], [4]).text
    assert "[4] (a.md)" in text and "[1]" not in text


def test_follow_up_is_rephrased_from_history(corpus_env, models):
    history = [HumanMessage("How do I enable tracing?"), AIMessage("Set LANGFUSE_PUBLIC_KEY [1].")]
    out = ask(models, "and how do I turn it off?", messages=history)
    assert out["queries"] == ["How do I turn off tracing in Langfuse?"]
    call = models.chats["query"].calls[0]
    assert call[0].text == prompts.REPHRASE.text
    assert call[-1].text == (
        "Conversation:\nUser: How do I enable tracing?\nAssistant: Set LANGFUSE_PUBLIC_KEY [1].\n"
        "Last question: and how do I turn it off?\nRephrased:"
    )


def test_multi_query_adds_alternatives(corpus_env, models):
    out = ask(models, "How do I install the service?", {"multi_query": 3})
    assert out["queries"] == ["How do I install the service?", "install steps", "setup guide"]


def test_no_passage_within_threshold_abstains_without_generating(corpus_env, models):
    out = ask(models, "How do I install the service?", {"distance_threshold": 0.0})
    assert out["abstained"] is True
    assert "beyond the threshold 0.0" in out["answer"]
    assert out["retrieval"]["over_threshold"] > 0 and out["retrieval"]["dropped"]
    assert models.chats["generator"].calls == []
    assert out["citations"] == []


def test_model_saying_not_found_abstains(corpus_env, models):
    models.answer = prompts.NOT_FOUND
    out = ask(models, "What is the capital of France?")
    assert out["abstained"] is True and out["answer"] == prompts.ABSTAIN_NOT_FOUND
    assert models.chats["verifier"].calls == []


def test_after_not_found_a_second_look_is_verified_like_any_answer(corpus_env, models):
    models.answer = [prompts.NOT_FOUND, "Run make demo to install the service [1]."]
    out = ask(models, "How do I install the service?")
    assert out["outcome"] == "verified" and out["answer"].startswith("Run make demo")
    second = models.chats["generator"].calls[1][-1].text
    assert second.startswith(prompts.ANSWER_SECOND_LOOK.text.split("{")[0].strip()[:40])
    assert prompts.NOT_FOUND not in second  # no way out this time

    models.answer = [prompts.NOT_FOUND, "Run make demo to install the service [1]."]
    models.confidence = 0.1  # not verified: shown marked, like any answer, and not redone
    out = ask(models, "How do I install the service?")
    assert out["outcome"] == "not_verified" and out["answer"].startswith("Run make demo")
    assert len(models.chats["generator"].calls) == 4  # and no regeneration followed
    models.answer = [prompts.NOT_FOUND, "Run make demo to install the service [1]."]
    out = ask(models, "How do I install the service?", {"on_unverified": "abstain"})
    assert out["outcome"] == "abstained"

    models.answer = prompts.NOT_FOUND
    out = ask(models, "How do I install the service?", {"second_look": False})
    assert out["outcome"] == "not_in_documents" and len(models.chats["generator"].calls) == 7


def test_after_two_not_founds_the_words_copied_from_a_passage_are_the_answer(corpus_env, models):
    # dev halves: the 1.5B generator pointed at the passage ("[2] [3]", "... is [1].")
    # where copying the words found the answer (OUTPUT_FILE, 40001, EXTERNAL)
    models.answer = [prompts.NOT_FOUND, "[1]", "make demo"]
    out = ask(
        models, "How do I install the service?", CHECK_5_OFF | {"verify_threshold_alone": 0.9}
    )
    copy = models.chats["generator"].calls[2][-1].text
    assert copy.startswith(prompts.OWN_ANSWER.text.split("{")[0])  # asked as check 5 asks
    assert out["answer"].startswith("make demo [1]") and out["citations"]
    # that reading is check 5's own: its agreement is not asked, the yes alone decides
    assert out["verdict"]["copied"] and "own_answer" not in out["verdict"]

    models.answer = [prompts.NOT_FOUND, "[1]", "make install-everything"]  # not a copy
    out = ask(models, "How do I install the service?")
    assert out["outcome"] == "not_in_documents" and out["answer"] == prompts.ABSTAIN_NOT_FOUND


def test_an_answer_of_citation_markers_alone_is_no_answer_and_gets_the_second_look(
    corpus_env, models
):
    models.answer = ["[1]", "Run make demo to install the service [1]."]
    out = ask(models, "How do I install the service?")
    assert out["outcome"] == "verified" and out["answer"].startswith("Run make demo")
    assert len(models.chats["generator"].calls) == 2
    second_look = prompts.ANSWER_SECOND_LOOK.text.split("{")[0]
    assert models.chats["generator"].calls[1][-1].text.startswith(second_look)

    models.answer = "[1][2]."  # and again at the second look: nothing to show or verify
    out = ask(models, "How do I install the service?")
    assert out["outcome"] == "not_in_documents" and out["answer"] == prompts.ABSTAIN_NOT_FOUND
    assert len(models.chats["verifier"].calls) == 1  # only the first question's


def test_the_question_written_back_around_a_marker_is_no_answer_and_gets_the_second_look(
    corpus_env, models
):
    models.answer = ["The way to install the service is [1].", "Run make demo [1]."]
    out = ask(models, "What is the way to install the service?")
    assert out["answer"].startswith("Run make demo")
    assert len(models.chats["generator"].calls) == 2

    models.answer = "The way to install the service is [1]."  # at the second look too
    out = ask(models, "What is the way to install the service?")
    assert out["outcome"] == "not_in_documents" and out["answer"] == prompts.ABSTAIN_NOT_FOUND


def test_a_sentence_about_the_passages_is_left_out_of_the_answer(corpus_env, models):
    models.answer = "Run make demo to install the service [1]. This is supported by passage [1]."
    out = ask(models, "How do I install the service?")
    assert out["outcome"] == "verified"
    assert "passage" not in out["answer"] and out["answer"].startswith("Run make demo")


def test_unsupported_answer_is_regenerated_with_feedback(corpus_env, models):
    models.answer = ["Install with `pip` [1].", "Run make demo to install the service [1]."]
    out = ask(models, "How do I install the service?")
    assert out["verdict"]["grounded"] is True
    assert len(models.chats["generator"].calls) == 2
    assert len(models.chats["verifier"].calls) == 1  # the first failed before the model
    retry_prompt = models.chats["generator"].calls[1][-1].text
    assert "Install with `pip` [1]. (not in the passages it cites: pip)" in retry_prompt
    assert out["answer"] == "Run make demo to install the service [1]."


@pytest.mark.parametrize(("policy", "abstained"), [("return", False), ("abstain", True)])
def test_loop_cap_then_policy(corpus_env, models, policy, abstained):
    # one statement the passage states, one it does not: supported, not confirmed
    models.answer = "Run make demo to install the service [1]. Then install with `pip` [1]."
    out = ask(
        models, "How do I install the service?", {"max_regenerations": 1, "on_unverified": policy}
    )
    assert len(models.chats["generator"].calls) == 2  # first answer + 1 regeneration
    assert out["verdict"]["grounded"] is False
    assert out["abstained"] is abstained
    assert out["outcome"] == ("abstained" if abstained else "not_verified")
    if abstained:
        assert out["answer"] == prompts.ABSTAIN_UNVERIFIED and out["citations"] == []


def test_no_regeneration_when_cap_is_zero(corpus_env, models):
    models.answer = "Install with `pip` [1]."
    ask(models, "How do I install the service?", {"max_regenerations": 0})
    assert len(models.chats["generator"].calls) == 1


def test_an_answer_the_verifier_is_unsure_of_is_not_regenerated(corpus_env, models):
    models.confidence = 0.1  # every literal and citation checks out; only the model doubts
    out = ask(models, "How do I install the service?", {"max_regenerations": 1})
    assert len(models.chats["generator"].calls) == 1 and out["outcome"] == "not_verified"
    assert out["verdict"]["confidence"] == 0.1 and out["verdict"]["unsupported"] == []


def test_citations_to_missing_passages_are_dropped(corpus_env, models):
    models.answer = "Run make demo to install the service [1][9]."
    out = ask(models, "How do I install the service?", {"k": 2})
    assert out["answer"] == "Run make demo to install the service [1]."
    assert [c["n"] for c in out["citations"]] == [1]


def test_citations_are_numbered_from_one_in_reading_order(corpus_env, models):
    models.answer = (
        "Set LANGFUSE_TRACING_ENABLED=false [2]. It takes 99 minutes [2]. Run make demo [1]."
    )
    out = ask(models, "How do I install the service?", {"k": 2, "max_regenerations": 0})
    assert out["answer"] == (
        "Set LANGFUSE_TRACING_ENABLED=false [1]. It takes 99 minutes [1]. Run make demo [2]."
    )
    assert [c["n"] for c in out["citations"]] == [1, 2]
    assert out["verdict"]["unsupported"] == ["It takes 99 minutes [1]."]  # as shown
    assert out["verdict"]["cited"] == [1, 2]
    shown = models.chats["generator"].calls[0][0].text  # the generator read it as [2]
    assert out["citations"][0]["snippet"][:60] in shown.split("[2] (")[1]


def test_the_second_opinion_is_renumbered_with_the_answer(corpus_env, models):
    models.answer = ["Set LANGFUSE_PUBLIC_KEY [2]", "LANGFUSE_PUBLIC_KEY [2]"]
    short = {"k": 2, "max_regenerations": 0, "answer_style": "short"}
    out = ask(models, "How do I enable tracing?", short)  # [1] is the "Turning it off" part
    assert out["answer"] == "Set LANGFUSE_PUBLIC_KEY [1]"
    assert out["verdict"]["second_opinion"]["answer"] == "LANGFUSE_PUBLIC_KEY [1]"


def test_literal_check_catches_an_invented_number(corpus_env, models):
    models.answer = "The first install takes 12 minutes [1]."
    out = ask(models, "How long does the install take?", {"max_regenerations": 0})
    assert out["verdict"]["grounded"] is False
    assert out["verdict"]["missing"] == {"The first install takes 12 minutes [1].": ["12"]}


def test_regeneration_is_told_which_literals_are_missing(corpus_env, models):
    models.answer = ["The first install takes 12 minutes [1].", "Run make demo [1]."]
    out = ask(models, "How long does the install take?", {"max_regenerations": 1})
    retry_prompt = models.chats["generator"].calls[1][-1].text
    assert "takes 12 minutes [1]. (not in the passages it cites: 12)" in retry_prompt
    assert out["verdict"]["grounded"] is True


def test_feedback_notes_copied_into_an_answer_are_removed(corpus_env, models):
    first = "Run make demo to install the service [1]."
    note = prompts.NOT_SUPPORTED_NOTE.format(missing="pip")
    models.answer = ["Install with `pip` [1].", first + note]  # as the 1.5B model does
    out = ask(models, "How do I install the service?", {"max_regenerations": 1})
    assert out["answer"] == first and out["outcome"] == "verified"
    note = prompts.NOT_SUPPORTED_NOTE.format(missing="12, RAG_K")
    assert prompts.without_notes(f"It takes 12 minutes{note}. Set RAG_K [1]{note}.") == (
        "It takes 12 minutes. Set RAG_K [1]."
    )


def test_a_verifier_held_to_logprobs_without_them_is_reported_not_fatal(corpus_env, models):
    models.no_logprobs()
    settings = {"llm_max_retries": 1, "verifier_confidence": "logprobs"}
    out = ask(models, "How do I install the service?", settings)
    assert out["verdict"]["grounded"] is False
    assert "RAG_VERIFIER_CONFIDENCE=sampled" in out["verdict"]["error"]
    assert out["answer"].startswith("Run make demo")
    assert len(models.chats["verifier"].calls) == 1  # asking again cannot bring them


def test_a_verifier_without_logprobs_is_read_by_sampling_on_uncalibrated_thresholds(
    corpus_env, models
):
    models.no_logprobs()
    replies = ["Yes.", "yes", "No", "Yes", "yes", "Yes", "no", "Yes", "Perhaps", "Yes"]
    models.chats["verifier"].respond = lambda _: replies.pop(0) if replies else "Yes"
    out = ask(models, "How do I install the service?", {"verifier_samples": 10})
    verdict = out["verdict"]
    # 1 call finds no log-probabilities, then 10 samples: 7 yes of 9 yes-or-no
    assert verdict["confidence_method"] == "sampled" and verdict["confidence"] == 0.7778
    assert verdict["thresholds"]["source"] == "uncalibrated"
    assert "calibrate" in verdict["thresholds"]["warning"]
    assert out["outcome"] == "verified"  # 0.78 >= the default 0.62, with the warning
    # the next answer samples at once: the process has learnt the verifier's kind
    calls = len(models.chats["verifier"].calls)
    ask(models, "How do I install the service?", {"verifier_samples": 10})
    assert len(models.chats["verifier"].calls) - calls == 10


def test_llm_rerank_reorders_and_cuts(corpus_env, models):
    models.grades = {"Turning it off": 3, "verifier is": 1}
    ask(
        models,
        "How do I install the service?",
        {"rerank": "llm", "k": 3, "rerank_keep": 2, "distance_threshold": 2.0},
    )
    context = models.chats["generator"].calls[0][0].text
    assert context.index("Turning it off") < context.index("verifier is")
    assert len(re.findall(r"^\[\d+\] \(", context, flags=re.M)) == 2  # cut to rerank_keep


def test_window_strategy_merges_neighbours(corpus_env, models):
    out = ask(models, "How do I turn tracing off?", {"retrieval_strategy": "window", "k": 1})
    context = models.chats["generator"].calls[0][0].text
    assert "Set LANGFUSE_PUBLIC_KEY" in context and "Unset the keys" in context
    assert out["retrieval"]["strategy"] == "window"


@pytest.mark.parametrize("question", ["", "   ", None, "x" * 3000])
def test_bad_questions_are_rejected(corpus_env, models, question):
    with pytest.raises(ValueError, match="question"):
        ask(models, question)


def test_unknown_collection_is_a_clear_error(corpus_env, models):
    with pytest.raises(ConfigError, match="unknown collection 'nope'"):
        ask(models, "How do I install?", collection="nope")


def test_state_resets_between_questions_on_a_thread(corpus_env, models):
    from langgraph.checkpoint.memory import InMemorySaver

    app = build_graph(checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "t1"}}
    models.confidence = [0.1, 0.9]  # the first is not verified (and not regenerated)
    models.answer = [
        "Run make demo to install the service [1].",
        "Unset the keys or set LANGFUSE_TRACING_ENABLED=false [1].",
    ]
    models.rephrased = "How do I turn tracing off?"  # what the passage's section is about
    first = app.invoke(
        {"question": "How do I install the service?"}, config, context=models.services
    )
    second = app.invoke({"question": "How do I turn tracing off?"}, config, context=models.services)
    assert first["verdict"]["grounded"] is False and second["verdict"]["grounded"] is True
    assert second["timings"]["generate_answer"] < 5
    assert len(app.get_state(config).values["messages"]) == 4
    assert models.chats["query"].calls  # the second question was rephrased with history


def test_querying_with_another_embedding_model_is_refused(corpus_env, models):
    with pytest.raises(ConfigError, match="was embedded with 'local'"):
        ask(models, "How do I install?", {"embedding_model": "openai:other@http://127.0.0.1:9/v1"})


def test_short_answer_style_uses_its_own_prompt_and_the_verifier_sees_the_question(
    corpus_env, models
):
    models.answer = "make demo [1]"
    out = ask(models, "How do I install the service?", {"answer_style": "short"})
    assert out["answer"] == "make demo [1]" and out["verdict"]["grounded"] is True
    assert "shortest exact phrase" in models.chats["generator"].calls[0][-1].text
    assert "Question: How do I install the service?" in models.chats["verifier"].calls[0][-1].text


def test_an_uncited_statement_is_not_verified_and_the_model_is_not_asked(corpus_env, models):
    models.answer = "Run `make setup` to install the service.\n\nIt takes 4 minutes [1]."
    out = ask(models, "How do I install the service?", {"max_regenerations": 0})
    assert out["outcome"] == "not_verified" and out["verdict"]["confidence"] == 0.0
    assert out["verdict"]["missing"] == {
        "Run `make setup` to install the service.": ["cites no passage"]
    }
    assert models.chats["verifier"].calls == []


def test_an_uncited_statement_a_passage_holds_is_cited_to_it_and_checked(corpus_env, models):
    models.answer = "Run make demo to install the service.\n\nIt takes 4 minutes [1]."
    out = ask(models, "How do I install the service?", {"max_regenerations": 0})
    assert out["answer"] == "Run make demo to install the service. [1]\n\nIt takes 4 minutes [1]."
    assert out["outcome"] == "verified" and models.chats["verifier"].calls


def test_a_citation_closing_a_paragraph_covers_the_sentences_before_it(corpus_env, models):
    models.answer = "Run make demo to install the service. It takes 4 minutes [1]."
    out = ask(models, "How do I install the service?", {"max_regenerations": 0})
    assert out["verdict"]["unsupported"] == [] and out["outcome"] == "verified"
    # a statement no passage states is named, and the answer is not verified
    models.answer = "Run make demo to install the service. It builds the index [1]."
    out = ask(models, "How do I install the service?", {"max_regenerations": 0})
    assert out["outcome"] == "not_verified"
    assert out["judgement"]["unsupported"] == ["It builds the index."]
    models.answer = "Run `make setup` to install the service. It takes 4 minutes [1]."
    out = ask(models, "How do I install the service?", {"max_regenerations": 0})
    assert out["outcome"] == "not_verified", out["verdict"]  # still checked against [1]
    assert list(out["verdict"]["missing"]) == ["Run `make setup` to install the service."]
    # and when no statement is stated by its passage, the documents do not say it
    models.answer = "Run `make setup` to install the service. It builds the index [1]."
    out = ask(models, "How do I install the service?", {"max_regenerations": 0})
    assert out["outcome"] == "not_in_documents" and out["abstained"], out["verdict"]
    assert out["answer"] == prompts.ABSTAIN_NOT_STATED and out["support"] == []
    assert out["closest"][0]["source"].endswith("install.md")
    assert "Run make demo" in out["closest"][0]["quote"]


@pytest.mark.parametrize(("threshold", "outcome"), [(0.95, "not_verified"), (0.85, "verified")])
def test_verify_threshold_decides_the_label(corpus_env, models, threshold, outcome):
    out = ask(
        models,
        "How do I install the service?",
        {"verify_threshold": threshold, "max_regenerations": 0},
    )
    assert out["outcome"] == outcome and out["verdict"]["threshold"] == threshold
    assert out["answer"].startswith("Run make demo")  # not verified is shown, marked


def test_a_bare_phrase_needs_the_phrase_threshold(corpus_env, models):
    models.confidence = BETWEEN_THRESHOLDS
    models.answer = "Run make demo to install the service [1]."
    config = {"max_regenerations": 0, **CHECK_5_OFF}
    out = ask(models, "How do I install the service?", config)
    assert out["verdict"]["form"] == "sentence" and out["outcome"] == "verified"
    models.answer = "make demo [1]"  # repeats none of the question's words
    out = ask(models, "How do I install the service?", config)
    assert out["verdict"]["form"] == "phrase"
    assert out["verdict"]["threshold"] == DEFAULTS.verify_threshold_phrase
    assert out["outcome"] == "not_verified"


def test_a_short_answer_must_quote_its_passage_and_is_judged_as_a_phrase(corpus_env, models):
    short = {"answer_style": "short", "max_regenerations": 0}
    models.confidence = BETWEEN_THRESHOLDS
    models.answer = "Run make demo to install the service [1]."  # quoted, repeats the question
    out = ask(models, "How do I install the service?", short)
    assert out["verdict"]["form"] == "phrase" and out["outcome"] == "not_verified"
    models.confidence = 0.9
    out = ask(models, "How do I install the service?", short)
    assert out["outcome"] == "verified" and out["verdict"]["unsupported"] == []
    models.answer = "Run make demo to set up the service [1]."  # reworded: not a quote
    out = ask(models, "How do I install the service?", short)
    assert out["outcome"] == "not_verified" and out["verdict"]["confidence"] == 0.0
    assert list(out["verdict"]["missing"].values()) == [["this wording"]]
    out = ask(models, "How do I install the service?", {"max_regenerations": 0})
    assert out["outcome"] == "verified"  # the full style may reword


def test_a_short_answer_quoting_another_passage_is_cited_to_it(corpus_env, models):
    models.answer = "make demo [9]"  # the words are in install.md; [9] is no passage
    out = ask(models, "How do I install the service?", {"answer_style": "short"})
    assert out["answer"] == "make demo [1]" and out["outcome"] == "verified"
    assert out["citations"][0]["source"].endswith("install.md")
    assert len(models.chats["generator"].calls) == 2  # the answer and its second opinion
    evidence = models.chats["verifier"].calls[0][0].text  # the sentence holding the quote
    assert "Run make demo to install the service." in evidence and "4 minutes" not in evidence


# guard_max_distance 2: every question is near enough, so the query model decides
GUARDED = {
    "guard_domain": "installing and tracing the service",
    "max_regenerations": 0,
    "guard_max_distance": 2.0,
}


def test_the_guard_is_off_by_default_and_not_in_the_path(corpus_env, models):
    out = ask(models, "How do I install the service?")
    assert out["guard"] is None and "guard" not in out["timings"]


def test_the_guard_refuses_an_off_topic_question_before_retrieval(corpus_env, models):
    models.guard_verdict = {"verdict": "off_topic", "reason": "cooking"}
    out = ask(models, "How long do I boil an egg?", {**GUARDED, "guard": "refuse"})
    assert out["abstained"] is True and out["outcome"] == "abstained"
    assert out["answer"] == "I can only answer questions about installing and tracing the service."
    assert out["guard"]["verdict"] == "off_topic" and out["guard"]["reason"] == "cooking"
    assert "retrieve" not in out["timings"] and models.chats["generator"].calls == []
    guard_prompt = models.chats["query"].calls[0][-1].text
    assert "installing and tracing the service" in guard_prompt
    assert "How long do I boil an egg?" in guard_prompt


def test_a_question_far_from_every_passage_is_off_topic_without_the_model(corpus_env, models):
    near = {**GUARDED, "guard": "refuse", "guard_max_distance": 0.6}
    out = ask(models, "Recommend a lasagna recipe for tonight", near)
    assert out["guard"]["verdict"] == "off_topic" and out["guard"]["distance"] > 0.6
    assert "guard_max_distance 0.6" in out["guard"]["reason"]
    assert models.chats["query"].calls == [] and "retrieve" not in out["timings"]
    out = ask(models, "How do I install the service?", near)  # shares its words with a page
    assert out["guard"]["verdict"] == "allowed" and out["guard"]["distance"] <= 0.6


def test_warn_answers_and_says_what_the_guard_thought(corpus_env, models):
    models.guard_verdict = {"verdict": "blocked", "reason": "pricing"}
    out = ask(models, "How do I install the service?", {**GUARDED, "guard": "warn"})
    assert out["abstained"] is False and out["outcome"] == "verified"
    assert out["guard"]["verdict"] == "blocked" and out["timings"]["guard"] >= 0


def test_an_allowed_question_goes_on_and_a_failed_guard_lets_it_through(corpus_env, models):
    out = ask(models, "How do I install the service?", {**GUARDED, "guard": "refuse"})
    assert out["guard"]["verdict"] == "allowed" and out["outcome"] == "verified"
    models.chats["query"].respond = lambda m: "not json"
    out = ask(
        models,
        "How do I install the service?",
        {**GUARDED, "guard": "refuse", "llm_max_retries": 0},
    )
    assert out["guard"]["verdict"] == "allowed" and "error" in out["guard"]
    assert out["outcome"] == "verified"


def test_a_guard_without_a_domain_is_refused_at_start_up():
    with pytest.raises(ConfigError, match="guard=refuse needs guard_domain"):
        config_for(guard="refuse")


def test_a_short_answer_is_verified_only_if_a_second_opinion_agrees(corpus_env, models):
    short = {"answer_style": "short", "max_regenerations": 0}
    models.answer = ["make demo [1]", "4 minutes [2]"]  # the second reading disagrees
    out = ask(models, "How do I install the service?", short)
    assert out["outcome"] == "not_verified" and out["answer"] == "make demo [1]"
    assert out["verdict"]["confidence"] == 0.9  # the verifier was sure; the order decided
    assert out["verdict"]["second_opinion"] == {
        "answer": "4 minutes [2]",
        "agreement": 0.0,
        "needed": SAME_ANSWER_F1,
    }
    first, second = (call[0].text for call in models.chats["generator"].calls)
    numbers = [int(n) for n in re.findall(r"^\[(\d+)\] \(", second, flags=re.M)]
    assert numbers == sorted(numbers, reverse=True) and len(numbers) > 1  # own numbers kept
    assert re.findall(r"^\[\d+\] \(", first, flags=re.M) != re.findall(
        r"^\[\d+\] \(", second, flags=re.M
    )

    models.answer = ["make demo [1]", "Make demo. [2]"]  # same words, another citation
    out = ask(models, "How do I install the service?", short)
    assert out["outcome"] == "verified" and out["verdict"]["second_opinion"]["agreement"] == 1.0


def test_the_second_opinion_is_asked_only_of_a_short_answer_about_to_be_verified(
    corpus_env, models
):
    out = ask(models, "How do I install the service?", {"max_regenerations": 0})
    assert out["outcome"] == "verified" and "second_opinion" not in out["verdict"]
    models.answer, models.confidence = "make demo [1]", 0.5  # below the phrase threshold
    out = ask(models, "How do I install the service?", {"answer_style": "short"})
    assert out["outcome"] == "not_verified" and "second_opinion" not in out["verdict"]
    assert len(models.chats["generator"].calls) == 2  # one per question: no second opinion


def test_a_second_opinion_that_fails_leaves_the_answer_not_verified(corpus_env, models):
    replies = []

    def generator(messages) -> str:
        replies.append(messages)
        if len(replies) > 1:  # every try of the second opinion
            raise LLMTimeoutError("generator: no reply in 30 s")
        return "make demo [1]"

    models.chats["generator"].respond = generator
    out = ask(models, "How do I install the service?", {"answer_style": "short"})
    assert out["outcome"] == "not_verified" and out["answer"] == "make demo [1]"
    assert "no reply" in out["verdict"]["second_opinion"]["error"]


def test_answering_reads_against_the_thresholds_recorded_for_its_verifier(corpus_env, models):
    record(corpus_env, "logprobs", {"sentence": 0.95, "phrase": 0.95})
    out = ask(models, "How do I install the service?")  # the fake verifier is 0.9 sure
    assert out["verdict"]["thresholds"]["source"] == "calibrated"
    assert out["verdict"]["threshold"] == 0.95 and out["outcome"] == "not_verified"


def test_reversed_passage_order_gives_the_generator_the_best_passage_last(corpus_env, models):
    def read(order: str) -> list[str]:
        settings = {"k": 2, "distance_threshold": 2.0, "passage_order": order}
        ask(models, "How do I install the service?", settings)
        context = models.chats["generator"].calls[-1][0].text
        return re.findall(r"<passage>\n(.*?)\n</passage>", context, re.S)

    ranked = read("rank")
    assert len(ranked) == 2 and "make demo" in ranked[0]
    assert read("reversed") == ranked[::-1]


def test_a_refused_question_on_a_thread_carries_nothing_of_the_last_one(corpus_env, models):
    """Per-question fields are reset from the state type (graph/state.py): a guard
    refusal after an answered question shows no retrieval, passages or verdict of it."""
    from langgraph.checkpoint.memory import InMemorySaver

    from graph.state import PER_QUESTION

    app = build_graph(InMemorySaver())
    config = config_for(thread_id="t", **GUARDED, guard="refuse")
    first = app.invoke(
        {"question": "How do I install the service?"}, config, context=models.services
    )
    assert first["retrieval"] and first["passages"]
    models.guard_verdict = {"verdict": "off_topic", "reason": "cooking"}
    second = app.invoke({"question": "How long do I boil an egg?"}, config, context=models.services)
    assert second["guard"]["verdict"] == "off_topic"
    assert second["retrieval"] == {} and second["passages"] == [] and second["verdict"] == {}
    assert {"retrieval", "passages", "verdict", "queries", "draft"} <= set(PER_QUESTION)


def test_a_failed_retrieval_on_a_thread_carries_nothing_of_the_last_one(corpus_env, models):
    """The same for a question whose retrieval fails: its answer object shows its own
    error and no passages, retrieval report or verdict of the question before."""
    from langgraph.checkpoint.memory import InMemorySaver

    from tools.errors import ModelError

    class Down:
        def embed_query(self, text):
            raise ModelError("the embedding server is down")

        embed_documents = embed_query

    app = build_graph(InMemorySaver())
    config = config_for(thread_id="t")
    first = app.invoke(
        {"question": "How do I install the service?"}, config, context=models.services
    )
    assert first["retrieval"] and first["passages"] and first["verdict"]
    broken = Services(chat=lambda s, role: models.chats[role], embed=lambda _: Down())
    second = app.invoke({"question": "How do I turn off tracing?"}, config, context=broken)
    assert second["error"]["stage"] == "retrieve" and second["abstained"]
    assert second["retrieval"] == {} and second["passages"] == [] and second["verdict"] == {}
