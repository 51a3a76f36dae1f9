"""Switching a role to an OpenAI-compatible endpoint is one setting, not a code change."""

import json

import pytest
from langchain_core.messages import HumanMessage

from rag_cli.main import main
from tests.openai_stub_server import OpenAIStub
from tools.config import ConfigError, load_settings
from tools.errors import ModelError
from tools.models.factory import chat_model, embeddings
from tools.resilient import with_retries


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


def test_a_server_error_is_a_typed_model_error_after_the_retries(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with OpenAIStub(status=500) as server:
        settings = load_settings({"generator_model": f"openai:chat@{server.base_url}"})
        model = chat_model(settings, "generator")
        with pytest.raises(ModelError, match="Error code: 500") as failed:
            with_retries(lambda: model.invoke([HumanMessage("hi")]), retries=1, what="generator")
    assert failed.value.kind == "model_error" and "after 2 attempts" in str(failed.value)
    assert len(server.requests) == 2  # the one retry layer, not the client's own retries


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
    assert chat["verifier"].startswith("confidence from token log-probabilities (P(yes) 0.92")
    assert "not this one: run rag eval verifier" in chat["verifier"]  # thresholds uncalibrated


def verifier_apart(monkeypatch, server: OpenAIStub, verifier: OpenAIStub) -> None:
    """Every model on ``server`` but the verifier, which is on ``verifier``."""
    for role in ("GENERATOR", "QUERY", "JUDGE"):
        monkeypatch.setenv(f"RAG_{role}_MODEL", f"openai:chat@{server.base_url}")
    monkeypatch.setenv("RAG_VERIFIER_MODEL", f"openai:chat@{verifier.base_url}")
    monkeypatch.setenv("RAG_EMBEDDING_MODEL", f"openai:emb@{server.base_url}")


def test_doctor_fails_on_a_verifier_without_log_probabilities(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    with OpenAIStub() as server, OpenAIStub(logprobs=False) as plain:
        verifier_apart(monkeypatch, server, plain)
        monkeypatch.setenv("RAG_LLM_MAX_RETRIES", "0")
        code = main(["doctor", "--json"])
    report = json.loads(capsys.readouterr().out)
    other, verifier = report["models"][:2]
    assert other["error"] is None and other["verifier"] == ""  # not a verifier: not asked
    assert verifier["roles"] == ["verifier"] and code == 1 and report["ok"] is False
    # no log-probabilities, and sampled replies ("4") are not yes or no
    assert "none of yes, no among its first replies" in verifier["error"]
    assert "verifier_model" in verifier["error"]  # names the setting to change


def test_doctor_names_a_sampled_confidence_for_a_verifier_without_log_probabilities(
    tmp_path, monkeypatch, capsys
):
    monkeypatch.chdir(tmp_path)
    with OpenAIStub() as server, OpenAIStub(reply="Yes.", logprobs=False) as plain:
        verifier_apart(monkeypatch, server, plain)
        monkeypatch.setenv("RAG_VERIFIER_SAMPLES", "4")
        code = main(["doctor", "--json"])
        sampled = [body for _, body in plain.requests if "seed" in body]
    verifier = json.loads(capsys.readouterr().out)["models"][1]
    assert verifier["error"] is None and code == 0
    assert verifier["verifier"].startswith("confidence from sampled replies (4 per check")
    assert "UNCALIBRATED" in verifier["verifier"]
    # each sample at temperature 1 with its own seed, so they are not one reply 4 times
    assert [(b["temperature"], b["seed"]) for b in sampled] == [(1.0, s) for s in range(4)]


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


def _local(first_call_s: float) -> dict:
    return {"spec": "local:qwen", "local": True, "first_call_s": first_call_s}


def test_doctor_advice_names_the_busy_machine_and_the_setting_that_helps():
    from rag_cli.doctor import advise

    idle, busy = 0.2, 1.9  # load averages on 2 cores
    settings = load_settings(environ={})
    assert advise([_local(1.4)], settings, idle, 2) == []
    slow_busy = advise([_local(38.0)], settings, busy, 2)
    assert slow_busy[0].startswith("the machine is busy: load average 1.9 on 2 cores")
    assert "38.0s where about 1.5s is expected" in slow_busy[1] and "busy" in slow_busy[1]
    one_thread = load_settings(environ={"RAG_LLM_THREADS": "1"})
    assert "set llm_threads=0" in advise([_local(9.0)], one_thread, idle, 4)[0]
    hosted = {"spec": "openai:x@http://h/v1", "local": False, "first_call_s": 30.0}
    assert advise([hosted], settings, idle, 2) == []  # a remote model's speed is not ours
    too_many = load_settings(environ={"RAG_LLM_THREADS": "8"})
    assert advise([], too_many, idle, 2) == [
        "llm_threads=8 is more than the 2 cores: set llm_threads=0 (all cores)."
    ]
