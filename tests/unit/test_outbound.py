"""No outbound call the operator did not ask for, and the doctor lists every one there is."""

from __future__ import annotations

from rag_cli.serve_cmd import server_env
from tools.config import load_settings
from tools.outbound import destinations, without_unasked_telemetry


def test_langsmith_keys_never_reach_the_server_unless_asked(monkeypatch):
    monkeypatch.setenv("LANGSMITH_API_KEY", "lsv2-secret")
    monkeypatch.setenv("LANGCHAIN_TRACING_V2", "true")
    env = server_env(load_settings())
    assert "LANGSMITH_API_KEY" not in env and "LANGCHAIN_TRACING_V2" not in env
    assert env["LANGSMITH_TRACING"] == "false"
    asked = server_env(load_settings({"langsmith": True}))
    assert asked["LANGSMITH_API_KEY"] == "lsv2-secret"


def test_the_cli_process_drops_them_too():
    names = [
        "LANGSMITH_API_KEY",
        "LANGCHAIN_API_KEY",
        "LANGSMITH_TRACING_V2",
        "LANGSMITH_RUNS_ENDPOINTS",
        "LANGCHAIN_TRACING_V2",
        "LANGSMITH_ENDPOINT",
    ]
    env = {name: "x" for name in names} | {"PATH": "/bin"}
    without_unasked_telemetry(load_settings(), env)
    assert env == {"LANGSMITH_TRACING": "false", "PATH": "/bin"}


def test_destinations_name_every_remote_address(monkeypatch):
    monkeypatch.delenv("LANGFUSE_PUBLIC_KEY", raising=False)
    assert destinations(load_settings()) == []  # the defaults: everything local
    monkeypatch.setenv("OPENAI_API_KEY", "sk-x")
    monkeypatch.setenv("LANGFUSE_PUBLIC_KEY", "pk")
    monkeypatch.setenv("LANGFUSE_SECRET_KEY", "sk")
    monkeypatch.setenv("LANGFUSE_BASE_URL", "https://lf.example")
    settings = load_settings(
        {
            "generator_model": "openai:q@http://gpu.lan:8000/v1",
            "verifier_model": "openai:gpt-4o-mini",
            "chroma_host": "db.lan:8000",
            "langsmith": True,
        }
    )
    assert destinations(settings) == [
        "http://gpu.lan:8000/v1: generator model",
        "https://api.openai.com/v1: verifier model",
        "http://db.lan:8000: vectors (Chroma)",
        "https://lf.example: traces (Langfuse)",
        "https://api.smith.langchain.com: traces and server usage (LangSmith)",
    ]
