"""Every model call of a question is counted where the model is called, retries and
sampled readings included: ``max_model_calls`` is a true ceiling on a client's run, the
door's plan (graph/budget.py) covers what the checks call, and the answer carries its
account of the calls (tools/models/metered.py)."""

from __future__ import annotations

import pytest
from langchain_core.messages import AIMessage, AIMessageChunk, HumanMessage
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from langgraph.checkpoint.memory import InMemorySaver
from pydantic import BaseModel

from graph import build_graph, config_for
from graph.budget import budget_problem, most_model_calls
from graph.state import PER_QUESTION
from ingest.partition import PartitionOptions
from ingest.pipeline import IngestOptions, Ingestor
from tests.fakes import RuleChat
from tests.unit.conftest import EMB
from tools.config import load_settings
from tools.models.metered import CallLimitError, CallMeter, metered
from tools.store.collection import Collection

QUESTION = {"question": "How do I install the service?"}
ROLES = ("generator", "query", "verifier")
# a page where an answer's command has a rival: the literal choice reads the verifier
RIVALS = (
    "# Install\n\nRun `make demo` to install the service, or `make setup` without the "
    "demo data. It takes 4 minutes the first time.\n"
)
WHICH = {"question": "Which command installs the service?"}


class Flaky(RuleChat):
    """A rule chat whose attempts fail ``fails`` times before one succeeds, so each call
    takes that many retries; counts every attempt, failed or not."""

    attempts: int = 0
    fails: int = 1

    def _generate(self, messages, stop=None, run_manager=None, **kwargs) -> ChatResult:
        self.attempts += 1
        if self.attempts % (self.fails + 1):
            raise RuntimeError("the model dropped the connection")
        return super()._generate(messages, stop, run_manager, **kwargs)


def flaky(models, fails: int = 1) -> None:
    for role in ROLES:
        old = models.chats[role]
        models.chats[role] = Flaky(respond=old.respond, first_token=old.first_token, fails=fails)


@pytest.fixture
def rivals_env(tmp_path, monkeypatch):
    root = tmp_path / "docs"
    root.mkdir()
    (root / "install.md").write_text(RIVALS)
    monkeypatch.setenv("RAG_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("RAG_DISTANCE_THRESHOLD", "2.0")
    settings = load_settings()
    Ingestor(
        settings,
        Collection(settings, "docs", create=True),
        EMB,
        IngestOptions(partition=PartitionOptions("structure", 100, 0)),
        progress=False,
    ).run([root])


def every_check(models, confidence: float, own_share: float) -> None:
    """The verifier says yes with ``confidence`` and gives the answer's own command
    ``own_share`` of the literal choice (its option A: `make demo` < `make setup`)."""
    models.answer = "Run `make demo` to install the service [1]."

    def first_token(messages):
        if "left blank" in messages[-1].text:
            return {"A": own_share, "B": 1 - own_share}
        return {" yes": confidence, "no": 1 - confidence}

    models.chats["verifier"].first_token = first_token


def attempts(models) -> int:
    return sum(getattr(models.chats[r], "attempts", len(models.chats[r].calls)) for r in ROLES)


def as_client(thread: str = "t1") -> dict:
    """A run's config as the LangGraph server hands it to the graph after auth."""
    return {
        "configurable": {
            "langgraph_auth_user_id": "alice",
            "langgraph_request_id": "r",
            "thread_id": thread,
        }
    }


@pytest.mark.parametrize("style", ["full", "short"])
@pytest.mark.parametrize("method", ["logprobs", "sampled", "auto"])
@pytest.mark.parametrize("confidence", [0.3, 0.6, 0.7, 0.8, 0.84, 0.95])
def test_the_plan_covers_every_call_the_checks_make(corpus_env, models, style, method, confidence):
    """Whatever the verifier reads (a confidence in every band, regenerations), the
    calls a run makes without a failure stay within what the door plans for it."""
    models.confidence = confidence
    settings = {
        "answer_style": style,
        "verifier_confidence": method,
        "verifier_samples": 3,
        "max_regenerations": 2,
        "distance_threshold": 2.0,
    }
    out = build_graph().invoke(QUESTION, config_for(**settings), context=models.services)
    made = attempts(models)
    assert made == len(out["calls"]) > 0
    assert made <= sum(most_model_calls(load_settings(settings)).values()), out["calls"]


@pytest.mark.parametrize("method", ["logprobs", "sampled", "auto"])
@pytest.mark.parametrize("confidence", [0.6, 0.7, 0.8, 0.95])
@pytest.mark.parametrize("own_share", [0.2, 0.9])
def test_the_plan_covers_the_literal_choice_and_the_own_answer(
    rivals_env, models, method, confidence, own_share
):
    every_check(models, confidence, own_share)
    settings = {"verifier_confidence": method, "verifier_samples": 3, "max_regenerations": 1}
    out = build_graph().invoke(WHICH, config_for(**settings), context=models.services)
    made = attempts(models)
    assert made == len(out["calls"])
    assert made <= sum(most_model_calls(load_settings(settings)).values()), out["calls"]


def test_a_full_answer_can_read_the_verifier_three_times(rivals_env, models):
    """The case the plan's three verifier calls per full answer stand for."""
    every_check(models, 0.7, 0.9)
    out = build_graph().invoke(
        WHICH, config_for(verifier_confidence="logprobs"), context=models.services
    )
    assert [c["role"] for c in out["calls"] if c["step"] == "verify"] == ["verifier"] * 3


@pytest.mark.parametrize(("method", "fails"), [("logprobs", 3), ("sampled", 5)])
def test_retries_never_take_a_client_past_max_model_calls(
    rivals_env, models, monkeypatch, method, fails
):
    """The checks read the verifier as often as they can and every call fails ``fails``
    times before it succeeds: a client's question, admitted at the door with its plan
    exactly at the ceiling, stops at the ceiling with a typed error, not verified."""
    monkeypatch.setenv("RAG_VERIFIER_CONFIDENCE", method)
    monkeypatch.setenv("RAG_VERIFIER_SAMPLES", "3")
    monkeypatch.setenv("RAG_LLM_MAX_RETRIES", str(fails))
    ceiling = sum(most_model_calls(load_settings()).values())
    monkeypatch.setenv("RAG_MAX_MODEL_CALLS", str(ceiling))
    assert budget_problem(load_settings()) is None  # the door lets it in
    every_check(models, 0.7, 0.9)
    flaky(models, fails)
    out = build_graph(InMemorySaver()).invoke(WHICH, as_client(), context=models.services)
    assert attempts(models) <= ceiling
    assert len(out["calls"]) == attempts(models)
    assert out["error"]["type"] == "call_limit", out["error"]
    assert "max_model_calls" in out["error"]["message"]
    assert out["outcome"] != "verified"


def test_the_ceiling_is_per_question_on_a_thread(corpus_env, models, monkeypatch):
    """A thread's second question starts with no calls spent."""
    monkeypatch.setenv("RAG_MAX_MODEL_CALLS", "11")
    app = build_graph(InMemorySaver())
    first = app.invoke(QUESTION, as_client(), context=models.services)
    second = app.invoke(QUESTION, as_client(), context=models.services)
    assert first.get("error") is None and second.get("error") is None
    assert 0 < len(second["calls"]) <= 11
    assert PER_QUESTION["calls"] == []


def test_the_operators_own_runs_are_accounted_but_not_capped(corpus_env, models):
    flaky(models)
    out = build_graph().invoke(
        QUESTION, config_for(max_model_calls=2, distance_threshold=2.0), context=models.services
    )
    assert out.get("error") is None
    assert len(out["calls"]) == attempts(models) > 2
    failed = [c for c in out["calls"] if c["error"]]
    assert failed and {c["error"] for c in failed} == {"model_error"}
    assert {c["step"] for c in out["calls"]} >= {"generate_answer", "verify"}
    assert {c["role"] for c in out["calls"]} >= {"generator", "verifier"}


USAGE = {
    "input_tokens": 120,
    "output_tokens": 2,
    "total_tokens": 122,
    "input_token_details": {"cache_read": 100},
}


class Cached(RuleChat):
    """Reports usage as the local model does: prompt tokens, with those the cache kept;
    streamed, in the last piece."""

    def _generate(self, messages, stop=None, run_manager=None, **kwargs) -> ChatResult:
        message = AIMessage(content="yes", usage_metadata=USAGE)
        return ChatResult(generations=[ChatGeneration(message=message)])

    def _stream(self, messages, stop=None, run_manager=None, **kwargs):
        yield ChatGenerationChunk(message=AIMessageChunk(content="ye"))
        yield ChatGenerationChunk(message=AIMessageChunk(content="s", usage_metadata=USAGE))


def test_a_call_records_its_tokens_reused_and_computed():
    meter = CallMeter("verify", ceiling=None)
    model = metered(Cached(respond=lambda _: "yes"), "verifier", meter)
    model.invoke([HumanMessage("q")])
    for _ in model.stream([HumanMessage("q")]):
        pass
    assert len(meter.calls) == 2
    for call in meter.calls:
        assert call["step"] == "verify" and call["role"] == "verifier"
        assert (call["prompt_tokens"], call["reused_tokens"], call["computed_tokens"]) == (
            120,
            100,
            20,
        )
        assert call["generated_tokens"] == 2 and call["error"] is None


def test_a_call_over_the_ceiling_is_refused_before_the_model_is_asked():
    meter = CallMeter("verify", ceiling=3, made_before=2)
    inner = RuleChat(respond=lambda _: "yes")
    model = metered(inner, "verifier", meter)
    model.invoke([HumanMessage("q")])
    with pytest.raises(CallLimitError, match="model call 4 of this question"):
        model.invoke([HumanMessage("q")])
    assert len(inner.calls) == 1 and meter.made == 3


class Grade(BaseModel):
    grade: int


def test_structured_calls_go_through_the_meter():
    """Both shapes of structured output: the model piped into a parser (the fakes), and
    a bound model (the local model, langchain-openai, tool calling)."""
    meter = CallMeter("rerank", ceiling=None)
    piped = RuleChat(respond=lambda _: '{"grade": 2}')
    assert metered(piped, "query", meter).with_structured_output(Grade).invoke("q").grade == 2
    assert len(meter.calls) == 1 and len(piped.calls) == 1

    from langchain_openai import ChatOpenAI

    remote = ChatOpenAI(model="m", api_key="not-needed", base_url="http://127.0.0.1:9/v1")
    wrapped = metered(remote, "query", meter)
    structured = wrapped.with_structured_output(Grade)
    assert structured.first.bound is wrapped  # the call is made through the meter


def call(step, prompt, reused, generated, seconds=1.0):
    return {
        "step": step,
        "role": "generator" if step == "generate_answer" else "verifier",
        "prompt_tokens": prompt,
        "reused_tokens": reused,
        "computed_tokens": None if prompt is None or reused is None else prompt - reused,
        "generated_tokens": generated,
        "seconds": seconds,
        "error": None,
    }


def test_verbose_shows_each_steps_tokens_read_reused_and_generated():
    from rag_cli.ask_cmd import call_lines

    calls = [
        call("generate_answer", 500, 0, 20, 4.0),
        call("verify", 300, 250, 1, 0.5),
        call("verify", None, None, None, 0.25),
    ]
    assert call_lines(calls) == [
        "generate_answer: 1 call, read 500 (0 reused + 500 computed), generated 20, 4.00 s",
        "verify: 2 calls, read 300 (250 reused + 50 computed), generated 1, 0.75 s "
        "(1 without token counts)",
        "total: 3 calls, read 800 (250 reused + 550 computed), generated 21, 4.75 s "
        "(1 without token counts)",
    ]


def test_rag_ask_verbose_prints_the_calls_per_step(corpus_env, models, capsys):
    from rag_cli.main import main

    question = ["ask", "How do I install the service?", "--set", "max_regenerations=0"]
    assert main([*question, "--verbose"], services=models.services) == 0
    out = capsys.readouterr().out
    assert "model calls, tokens read (reused from the cache + computed) and generated:" in out
    assert "  generate_answer: 1 call, read 0 (0 reused + 0 computed)" in out  # fakes: no usage
    assert "  total: " in out
