"""A run's model calls recorded, then replayed instead of the models: same answers.

The recorder is the net under every change to the answer checks (issue 59): replaying
one recording through old and new code shows any difference is the code's.
"""

from __future__ import annotations

import json

from graph import build_graph, config_for
from graph.services import Services
from tests.unit.conftest import EMB
from tools.models.recording import NotRecordedError, recording, replaying

QUESTIONS = ["How do I install the service?", "How do I turn tracing off?"]


def run_all(services: Services) -> list[dict]:
    app = build_graph()
    outs = []
    for n, question in enumerate(QUESTIONS):
        out = app.invoke(
            {"question": question},
            config_for(trace_seed=f"q{n}", rerank="llm", k=4),
            context=services,
        )
        outs.append({k: out[k] for k in ("answer", "outcome", "verdict", "citations")})
    return outs


def test_a_replayed_run_gives_the_recorded_answers_and_verdicts(corpus_env, models, tmp_path):
    log = tmp_path / "calls.jsonl"
    chat = models.services._chat
    recorded = run_all(Services(chat=recording(chat, log), embed=lambda _: EMB))
    calls = [json.loads(line) for line in log.read_text().splitlines()]
    assert {c["role"] for c in calls} >= {"generator", "verifier", "query"}
    assert any(c["response_metadata"].get("logprobs") for c in calls)  # readings kept
    replayed = run_all(Services(chat=replaying(log), embed=lambda _: EMB))
    assert replayed == recorded


def test_a_call_the_recording_lacks_fails_instead_of_guessing(corpus_env, models, tmp_path):
    log = tmp_path / "calls.jsonl"
    run_all(Services(chat=recording(models.services._chat, log), embed=lambda _: EMB))
    out = build_graph().invoke(
        {"question": "How do I install the service quickly?"},
        config_for(rerank="llm", k=4),
        context=Services(chat=replaying(log), embed=lambda _: EMB),
    )
    # a model fault, as the graph reports every one: the run says so, it never guesses
    assert out["error"] and "no recorded" in out["error"]["message"], out["error"]
    assert NotRecordedError.kind == out["error"]["type"]


def test_with_a_fallback_only_the_calls_the_recording_lacks_are_made_and_recorded(
    corpus_env, models, tmp_path
):
    log, new = tmp_path / "calls.jsonl", tmp_path / "new.jsonl"
    chat = models.services._chat
    recorded = run_all(Services(chat=recording(chat, log), embed=lambda _: EMB))
    replayed = run_all(
        Services(chat=replaying(log, fallback=recording(chat, new)), embed=lambda _: EMB)
    )
    assert replayed == recorded and not new.exists()  # nothing new was asked
    question = "How do I install the service quickly?"
    services = Services(chat=replaying(log, fallback=recording(chat, new)), embed=lambda _: EMB)
    out = build_graph().invoke(
        {"question": question}, config_for(rerank="llm", k=4), context=services
    )
    assert not out.get("error"), out["error"]
    asked = [json.loads(line) for line in new.read_text().splitlines()]
    assert asked and any(question in text for c in asked for _, text in c["messages"])
    old = {json.loads(line)["key"] for line in log.read_text().splitlines()}
    assert not old & {c["key"] for c in asked}  # a recorded call is never made again
