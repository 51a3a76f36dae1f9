"""The whole graph on the real local models over the frozen copy of the docs
(tests/corpus/: what these answers say does not move when docs_corpus/ changes)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from langchain_core.messages import AIMessage, HumanMessage

from evaluation import guard as guard_bench
from graph import config_for, nodes
from tests.graph_runs import RUN, ask, call_node, run_graph
from tests.llama_server import LlamaServer
from tools.config import Settings
from tools.models.local_assets import resolve_gguf

pytestmark = pytest.mark.slow


def test_the_demo_question_is_answered_right_and_never_verified_wrong(data_dir):
    """models.md answers it with an example; reading evidence, the generator gives it. It
    may still be NOT VERIFIED, with its reason: the 1.5B verifier, asked which of the
    passages' settings the answer needs, has picked OPENAI_BASE_URL over
    RAG_GENERATOR_MODEL (issue 38)."""
    out = ask(data_dir, "How do I switch the answer generator to an OpenAI-compatible server?")
    assert out["outcome"] in ("verified", "not_verified"), out["answer"]
    assert re.search(r"RAG_GENERATOR_MODEL=openai:[\w.<>-]+@", out["answer"]), out["answer"]
    assert out["citations"], out
    # the quoted support: a line of models.md that holds the setting the answer names
    quotes = [s for s in out["support"] if "RAG_GENERATOR_MODEL" in s["quote"]]
    assert quotes and quotes[0]["source"].endswith("models.md"), out["support"]
    if out["outcome"] == "not_verified":  # the reason is given, in plain words
        assert out["reason"] and not re.search(r"confidence|threshold|check \d", out["reason"])
        verdict = out["verdict"]
        assert verdict["confidence"] is not None, verdict
        assert verdict["confidence"] < verdict["threshold"] or (
            verdict["literal_choice"] or {}
        ).get("overruled"), verdict


def test_the_install_questions_right_answer_is_verified(data_dir):
    out = ask(data_dir, "How do I install the service and run it for the first time?")
    assert "make demo" in out["answer"], out["answer"]
    assert out["outcome"] == "verified", out["verdict"]


def test_the_install_question_is_verified_through_a_real_openai_compatible_server(data_dir):
    """The three chat roles on the default model behind llama_cpp.server: the answer
    is verified through the remote path as in process (the test above)."""
    model = resolve_gguf("", Settings().resolved_cache_dir())
    with LlamaServer(model, "qwen", n_ctx=4096) as server:
        roles = {f"{role}_model": server.spec() for role in ("generator", "query", "verifier")}
        question = "How do I install the service and run it for the first time?"
        out = ask(data_dir, question)
        remote = run_graph({"question": question}, config_for(data_dir=data_dir, **RUN, **roles))
    assert "make demo" in remote["answer"], remote["answer"]
    assert remote["outcome"] == out["outcome"] == "verified", remote["verdict"]
    assert remote["verdict"]["checked_by"] == server.spec()
    # the server samples with its own defaults (repeat_penalty 1.1), so the draft can
    # differ by a word: the same confidence is asserted item by item in
    # test_remote_models.py (0.8967 remote against 0.8749 here, 2026-11-26)


@pytest.mark.parametrize(
    "question",
    [
        "What is the boiling point of mercury in Kelvin?",
        "Who won the 2018 FIFA World Cup?",
        "How do I configure the service to send answers by email?",
        "Which Kubernetes Helm chart deploys the service?",
        "What is the monthly price of the hosted version of the service?",
    ],
)
def test_questions_the_corpus_cannot_answer_are_never_verified(data_dir, question):
    out = ask(data_dir, question)
    assert out["outcome"] in ("not_in_documents", "abstained", "not_verified"), out


def test_typical_question_is_answered_and_checked(data_dir):
    out = ask(data_dir, "Which setting controls how long a model call may take?")
    assert "llm_timeout_s" in out["answer"] and out["citations"], out["answer"]
    # right, so either label is honest; the 1.5B verifier's confidence here was 0.5-0.65
    assert out["outcome"] in ("verified", "not_verified"), out["verdict"]
    assert out["verdict"]["confidence"] is not None, out["verdict"]


def test_follow_up_question_is_rephrased_with_history(data_dir):
    history = [
        HumanMessage("What does rag doctor do?"),
        AIMessage("rag doctor loads every configured model and reports the time of each step."),
    ]
    out = ask(data_dir, "And how do I get its report as JSON?", messages=history)
    standalone = out["queries"][0].lower()
    assert standalone != "and how do i get its report as json?"
    assert "doctor" in standalone


def cited(out) -> set[str]:
    return {Path(c["source"]).name for c in out["citations"]}


# The first hour's abstentions (issue 22): the right passage ranked first, then cut by a
# fixed distance threshold. Now the page is kept and the question is answered, not
# abstained. The 1.5B generator does not always cite it (for "How do I run the server?"
# it has copied getting-started.md without a marker: honestly "not verified"); a
# verified answer must cite the page.
def kept_sources(data_dir, out) -> set[str]:
    config = config_for(data_dir=data_dir, **RUN)
    passages = call_node(nodes.retrieve, {"queries": out["queries"]}, config)["passages"]
    return {Path(p["source"]).name for p in passages}


@pytest.mark.parametrize(
    ("question", "history", "pages"),
    [
        ("How do I run the server?", None, {"server.md"}),
        pytest.param(
            "And how do I protect it with a key?",
            "How do I run the server?",
            {"server.md", "security.md", "configuration.md"},
            # failed once (withheld) in the one full run since issue 70's rule: not strict
            marks=pytest.mark.xfail(strict=False, reason="issue 70 regression, open"),
        ),
        (
            "Comment protéger le serveur avec une clé API ?",
            None,
            {"server.md", "security.md", "configuration.md"},
        ),
    ],
)
def test_first_hour_questions_keep_their_page_and_are_answered(data_dir, question, history, pages):
    messages = []
    if history:
        first = ask(data_dir, history)
        messages = [HumanMessage(history), AIMessage(first["answer"])]
    out = ask(data_dir, question, messages=messages)
    assert kept_sources(data_dir, out) & pages, out["queries"]
    assert not out["abstained"], (out["queries"], out["answer"])  # nor "do not say"
    if out["outcome"] == "verified":
        assert cited(out) & pages, out["citations"]


GUARDED = {
    "guard": "refuse",
    "guard_domain": guard_bench.DOMAIN,
    "guard_blocked": guard_bench.BLOCKED,
}


def ask_guarded(data_dir, question):
    return run_graph({"question": question}, config_for(data_dir=data_dir, **RUN, **GUARDED))


@pytest.mark.parametrize(
    "question",
    [
        "Write me a poem about the sea",
        "How much does an enterprise license of this service cost?",  # a blocked topic
    ],
)
def test_the_guard_refuses_off_topic_and_blocked_questions_without_retrieval(data_dir, question):
    out = ask_guarded(data_dir, question)
    assert out["guard"]["verdict"] != "allowed", out["guard"]
    assert out["outcome"] == "abstained" and "retrieve" not in out["timings"]


def test_the_guard_lets_an_on_topic_question_through_to_an_answer(data_dir):
    # not every on-topic question passes: "How do I run the server?" sits at distance
    # 0.67 from its page and is refused (topic-guard.md gives the figures)
    out = ask_guarded(data_dir, "How do I ingest a folder of documents?")
    assert out["guard"]["verdict"] == "allowed", out["guard"]
    assert "retrieve" in out["timings"] and not out["abstained"], out["answer"]


def test_a_short_answer_the_verifier_is_sure_of_needs_a_second_opinion(data_dir):
    out = run_graph(
        {"question": "Which command installs the service and runs it for the first time?"},
        config_for(data_dir=data_dir, answer_style="short", **RUN),
    )
    verdict = out["verdict"]
    if verdict["confidence"] >= verdict["threshold"]:  # the verifier was sure
        opinion = verdict["second_opinion"]
        assert "error" not in opinion and opinion["answer"], opinion
        agreed = opinion["agreement"] >= opinion["needed"]
        assert out["outcome"] == ("verified" if agreed else "not_verified"), out
    else:
        assert "second_opinion" not in verdict and out["outcome"] == "not_verified", out
