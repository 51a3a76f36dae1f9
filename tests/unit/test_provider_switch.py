"""Switching a role to an OpenAI-compatible endpoint is one setting, not a code change."""

import json

import pytest
from langchain_core.messages import HumanMessage

from rag_cli.main import main
from tests.openai_stub_server import OpenAIStub
from tools.config import ConfigError, load_settings
from tools.models import chat_model, embeddings


def test_generator_setting_routes_to_openai_compatible_server(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with OpenAIStub(reply="four") as server:
        settings = load_settings(
            environ={"RAG_GENERATOR_MODEL": f"openai:qwen-test@{server.base_url}"}
        )
        reply = chat_model(settings, "generator").invoke([HumanMessage("2+2?")])
    assert reply.text == "four"
    path, body = server.requests[0]
    assert path == "/v1/chat/completions"
    assert body["model"] == "qwen-test"
    assert body["messages"][-1]["content"] == "2+2?"


def test_openai_without_key_or_url_explains(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    settings = load_settings(environ={"RAG_VERIFIER_MODEL": "openai:gpt-4o-mini"})
    with pytest.raises(ConfigError, match=r"RAG_VERIFIER_MODEL.*OPENAI_API_KEY"):
        chat_model(settings, "verifier")


def test_embeddings_route_to_openai_compatible_server(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with OpenAIStub() as server:
        settings = load_settings(environ={"RAG_EMBEDDING_MODEL": f"openai:emb@{server.base_url}"})
        vectors = embeddings(settings).embed_documents(["a", "b"])
    assert vectors == [[0.1, 0.2, 0.3]] * 2


def test_doctor_json_reports_each_model(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    with OpenAIStub() as server:
        for role in ("GENERATOR", "QUERY", "VERIFIER", "JUDGE"):
            monkeypatch.setenv(f"RAG_{role}_MODEL", f"openai:chat@{server.base_url}")
        monkeypatch.setenv("RAG_EMBEDDING_MODEL", f"openai:emb@{server.base_url}")
        code = main(["doctor", "--json"])
    report = json.loads(capsys.readouterr().out)
    assert code == 0 and report["ok"] is True
    chat, emb = report["models"]
    assert chat["roles"] == ["generator", "query", "verifier", "judge"]
    assert chat["loaded"] and chat["load_s"] is not None and chat["first_call_s"] is not None
    assert emb["kind"] == "embedding" and emb["detail"] == "3-d vector"


def test_doctor_fails_clearly_when_a_model_is_unreachable(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("RAG_GENERATOR_MODEL", "openai:chat@http://127.0.0.1:9/v1")
    monkeypatch.setenv("RAG_QUERY_MODEL", "openai:chat@http://127.0.0.1:9/v1")
    monkeypatch.setenv("RAG_VERIFIER_MODEL", "openai:chat@http://127.0.0.1:9/v1")
    monkeypatch.setenv("RAG_JUDGE_MODEL", "openai:chat@http://127.0.0.1:9/v1")
    monkeypatch.setenv("RAG_EMBEDDING_MODEL", "openai:emb@http://127.0.0.1:9/v1")
    monkeypatch.setenv("RAG_LLM_MAX_RETRIES", "0")
    code = main(["doctor", "--json"])
    report = json.loads(capsys.readouterr().out)
    assert code == 1 and report["ok"] is False
    assert all(m["error"] for m in report["models"])


def test_bad_setting_exits_2_with_message(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    code = main(["doctor", "--generator-model", "gpt5"])
    err = capsys.readouterr().err
    assert code == 2
    assert "generator_model = 'gpt5' (from command line)" in err
