"""The server's HTTP guard: API key, per-request settings, limits, and where it may bind."""

from __future__ import annotations

import pytest
from starlette.testclient import TestClient

from rag_cli.main import main
from rag_cli.serve_cmd import exposure_problem
from rag_cli.server_app import app
from tools.config import load_settings, masked


@pytest.fixture
def client(tmp_path):
    (tmp_path / "data" / "collections").mkdir(parents=True)
    (tmp_path / "data" / "collections" / "docs.sqlite").touch()  # list_collections sees it
    return TestClient(app)


def run(client, configurable=None, headers=None, **input_fields):
    body = {"assistant_id": "rag", "input": {"question": "What is rag?", **input_fields}}
    if configurable is not None:
        body["config"] = {"configurable": configurable}
    return client.post("/runs/wait", json=body, headers=headers or {})


def test_a_good_request_passes_the_guard(client):
    assert run(client, {"k": 4}).status_code == 404  # reached the (absent) LangGraph route


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"k": 51}, "k = 51"),
        ({"k": 0}, "k = 0"),
        ({"collection": "../../etc"}, "collection"),
        ({"collection": "a/../../b"}, "collection"),
        ({"question": "x" * 2001}, "max_question_chars=2000"),
        ({"user_id": "ana"}, "config.configurable.user_id"),  # the input cannot reach the trace
    ],
)
def test_limits_and_names_are_422_with_the_reason(client, fields, message):
    response = run(client, **fields)
    assert response.status_code == 422 and message in response.json()["detail"]


@pytest.mark.parametrize(
    "setting",
    ["data_dir", "cache_dir", "chroma_host", "generator_model", "api_key", "max_question_chars"],
)
def test_requests_cannot_change_fixed_settings(client, setting):
    response = run(client, {setting: "/etc"})
    assert response.status_code == 422
    assert f"may not set ['{setting}']" in response.json()["detail"]
    context = client.post(
        "/runs/wait",
        json={"assistant_id": "rag", "input": {"question": "q"}, "context": {setting: "/"}},
    )
    assert context.status_code == 422
    assistant = client.post(
        "/assistants", json={"graph_id": "rag", "config": {"configurable": {setting: "/"}}}
    )
    assert assistant.status_code == 422


def test_api_key_is_required_when_set(client, monkeypatch):
    monkeypatch.setenv("RAG_API_KEY", "s3cret")
    assert client.get("/healthz").status_code == 401
    assert run(client).status_code == 401
    assert run(client, headers={"X-API-Key": "wrong"}).status_code == 401
    assert client.get("/healthz", headers={"X-API-Key": "s3cret"}).json()["ok"] is True
    assert run(client, headers={"X-API-Key": "s3cret"}).status_code == 404


def test_api_key_is_masked():
    assert masked(load_settings({"api_key": "s3cret"}))["api_key"] == "***"


@pytest.mark.parametrize(
    ("host", "overrides", "refused"),
    [
        ("127.0.0.1", {}, False),
        ("localhost", {}, False),
        ("::1", {}, False),
        ("0.0.0.0", {}, True),
        ("192.168.1.5", {}, True),
        ("myhost.example", {}, True),
        ("0.0.0.0", {"api_key": "k"}, False),
        ("0.0.0.0", {"allow_remote": True}, False),
    ],
)
def test_non_loopback_bind_needs_a_key_or_explicit_permission(host, overrides, refused):
    assert (exposure_problem(host, load_settings(overrides)) is not None) is refused


def test_rag_serve_refuses_an_open_public_bind(capsys):
    assert main(["serve", "--host", "0.0.0.0"]) == 2
    assert "RAG_API_KEY" in capsys.readouterr().err


def test_cli_k_over_the_limit_is_a_clear_error(capsys):
    assert main(["ask", "question", "--k", "500"]) == 2
    assert "k = 500" in capsys.readouterr().err
