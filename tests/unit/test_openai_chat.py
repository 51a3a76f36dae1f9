"""The OpenAI-compatible chat routes (server/openai_chat.py): what a request may hold, how
a conversation becomes a question with its history, and the door's rules on the real
app (server/app.py) with two client keys. The answer itself comes from a real server in
tests/slow/test_integrations.py."""

from __future__ import annotations

import pytest
from starlette.testclient import TestClient

from server.answers import Refused, reply_of, reply_text
from server.api_keys import key_of
from server.app import app
from server.openai_chat import ask_of
from tools.config import load_settings
from tools.store.collection import Collection

QUESTION = {"role": "user", "content": "How do I install it?"}


def test_the_last_user_message_is_the_question_and_the_rest_its_history():
    model, ask, streamed = ask_of(
        {
            "model": "docs",
            "stream": True,
            "temperature": 0.2,
            "messages": [
                {"role": "system", "content": "Be brief."},
                {"role": "user", "content": "What is make demo?"},
                {"role": "assistant", "content": "It installs it [1].\n\nReferences:\n[1] a.md"},
                {"role": "user", "content": [{"type": "text", "text": "How long does it take?"}]},
            ],
            "settings": {"k": 3},
        }
    )
    assert (model, streamed) == ("docs", True)
    assert ask.question == "How long does it take?"
    assert ask.history == [
        {"role": "user", "content": "What is make demo?"},
        {"role": "assistant", "content": "It installs it [1]."},  # our own block left out
    ]
    assert ask.settings == {"k": 3, "collection": "docs"}


@pytest.mark.parametrize(
    ("body", "says"),
    [
        ({"model": "docs", "messages": [QUESTION], "tools": []}, "not supported here"),
        ({"model": "docs", "messages": [QUESTION], "n": 2}, "'n' must be 1"),
        ({"messages": [QUESTION]}, "'model' is required"),
        ({"model": "docs", "messages": []}, "non-empty list"),
        ({"model": "docs", "messages": [{"role": "tool", "content": "x"}]}, "role"),
        ({"model": "docs", "messages": [QUESTION, {"role": "assistant", "content": "a"}]}, "last"),
        ({"model": "docs", "messages": [QUESTION], "settings": {"api_key": "x"}}, "settings"),
    ],
)
def test_what_a_request_may_not_hold(body, says):
    with pytest.raises(Refused, match=says) as refused:
        ask_of(body)
    assert refused.value.status == 400


def test_a_failed_model_is_refused_not_answered():
    fault = {"type": "timeout", "stage": "generate_answer", "message": "no reply in 60 s"}
    with pytest.raises(Refused, match="a model failed") as refused:
        reply_of({"answer": "", "abstained": True, "error": fault})
    assert refused.value.status == 502


def test_the_reply_text_carries_markers_references_and_outcome():
    reply = reply_of(
        {
            "answer": "Run make demo [1].",
            "outcome": "not_verified",
            "reason": "the check was unsure",
            "references": ["[1] install.md, lines 1-3"],
            "retrieval": {"collection": "docs"},
        }
    )
    assert reply["outcome_words"] == "not verified" and reply["collection"] == "docs"
    assert reply_text(reply) == (
        "Run make demo [1].\n\nReferences:\n[1] install.md, lines 1-3\n\n"
        "Outcome: not verified (the check was unsure)"
    )


def test_a_key_is_read_from_either_header():
    assert key_of({"x-api-key": "K"}) == "K"
    assert key_of({"authorization": "Bearer K"}) == "K"
    assert key_of({"authorization": "Basic K"}) == ""
    assert key_of({"x-api-key": "A", "authorization": "Bearer B"}) == "A"


@pytest.fixture
def two_clients(corpus_env, monkeypatch):
    monkeypatch.setenv("RAG_CLIENT_KEYS", "alice:KEY-A,bob:KEY-B")
    monkeypatch.setenv("RAG_CLIENT_COLLECTIONS", "alice:docs,bob:bobdocs")
    Collection(load_settings(), "bobdocs", create=True).close()
    with TestClient(app, base_url="http://127.0.0.1:8123") as client:
        yield client


ALICE = {"Authorization": "Bearer KEY-A"}


def test_models_are_the_collections_the_caller_may_read(two_clients):
    def models(headers):
        response = two_clients.get("/v1/models", headers=headers)
        assert response.status_code == 200
        return [m["id"] for m in response.json()["data"]]

    assert models(ALICE) == ["docs"]
    assert models({"X-API-Key": "KEY-B"}) == ["bobdocs"]
    assert two_clients.get("/v1/models").status_code == 401
    assert (
        two_clients.get("/v1/models", headers={"Authorization": "Bearer nope"}).status_code == 401
    )


def chat(client, model="docs", headers=ALICE, **body):
    body = {"model": model, "messages": [QUESTION], **body}
    return client.post("/v1/chat/completions", json=body, headers=headers)


def test_the_run_meets_the_door_with_the_callers_key(two_clients):
    """The question goes to the app's own run route with the caller's key: its checks
    refuse another client's collection and over-budget settings (this app has no
    LangGraph routes, so a run the checks let through meets a 404)."""
    bob = chat(two_clients, "bobdocs")
    assert (
        bob.status_code == 422 and "unknown collection 'bobdocs'" in bob.json()["error"]["message"]
    )
    budget = chat(two_clients, settings={"rerank": "llm", "k": 20})
    assert budget.status_code == 422 and "max_model_calls" in budget.json()["error"]["message"]
    passed = chat(two_clients)
    assert passed.status_code == 404 and passed.json()["error"]["type"] == "invalid_request_error"


def test_a_page_on_another_origin_is_refused(two_clients):
    foreign = {**ALICE, "Origin": "http://evil.example"}
    assert chat(two_clients, headers=foreign).status_code == 403
    assert two_clients.get("/v1/models", headers=foreign).status_code == 403
    mcp = two_clients.post(
        "/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "ping"}, headers=foreign
    )
    assert mcp.status_code == 403
