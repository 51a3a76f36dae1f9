"""The MCP tools (server/mcp_tools.py) through the official ``mcp`` client, in process,
with fake models over a real (tmp) collection: the tools and their schemas, an answer
with its references, support and outcome as structured content and as text, search,
and a client's collections (the real servers are in tests/slow/test_integrations.py)."""

from __future__ import annotations

import asyncio

from mcp import Client

from server.answers import LocalAsker
from server.mcp_tools import Caller, build_mcp
from tools.config import REQUEST_SETTINGS, load_settings
from tools.store.collection import Collection


def operator(models, settings) -> Caller:
    return Caller(LocalAsker(models.services, settings), None, models.services, settings)


def call(caller: Caller, tool: str | None = None, **arguments):
    async def go():
        async with Client(build_mcp(lambda _ctx: caller)) as client:
            if tool is None:
                return await client.list_tools()
            return await client.call_tool(tool, arguments)

    return asyncio.run(go())


def test_the_tools_publish_their_inputs_and_outputs(corpus_env, models):
    tools = {t.name: t for t in call(operator(models, corpus_env)).tools}
    assert set(tools) == {"ask", "search"}
    ask = tools["ask"]
    assert ask.input_schema["required"] == ["question"]
    settings = ask.input_schema["$defs"]["QuestionSettings"]
    assert set(settings["properties"]) == REQUEST_SETTINGS - {"collection"}
    assert settings["additionalProperties"] is False
    outputs = set(ask.output_schema["properties"])
    assert {"answer", "outcome", "references", "citations", "support"} <= outputs
    assert {"collection", "passages"} == set(tools["search"].output_schema["properties"])


def test_ask_returns_the_checked_answer_as_data_and_as_text(corpus_env, models):
    result = call(operator(models, corpus_env), "ask", question="How do I install the service?")
    assert not result.is_error
    data = result.structured_content
    assert data["outcome"] == "verified" and data["outcome_words"] == "verified"
    assert data["answer"].startswith("Run make demo") and "[1]" in data["answer"]
    assert data["references"][0].startswith("[1] docs/install.md, lines ")
    assert data["support"] and data["support"][0]["n"] == 1
    assert data["collection"] == "docs"
    text = result.content[0].text
    assert "References:\n[1] docs/install.md" in text and text.endswith("Outcome: verified")


def test_ask_refuses_a_setting_no_client_may_set(corpus_env, models):
    result = call(
        operator(models, corpus_env),
        "ask",
        question="How do I install the service?",
        settings={"generator_model": "other"},
    )
    assert result.is_error
    assert models.chats["generator"].calls == []


def test_a_failed_model_is_a_tool_error(corpus_env, models):
    def broken(messages):
        raise TimeoutError("the model did not answer")

    models.chats["generator"].respond = broken
    result = call(operator(models, corpus_env), "ask", question="How do I install the service?")
    assert result.is_error
    assert "a model failed" in result.content[0].text


def test_search_returns_passages_with_source_and_lines(corpus_env, models):
    result = call(operator(models, corpus_env), "search", query="install make demo", k=2)
    assert not result.is_error
    passages = result.structured_content["passages"]
    assert 1 <= len(passages) <= 2
    assert passages[0]["source"] == "docs/install.md" and passages[0]["start_line"] >= 1
    assert passages[0]["location"].startswith("docs/install.md, lines ")
    assert "[1] docs/install.md" in result.content[0].text


def test_a_client_cannot_search_another_clients_collection(corpus_env, models, monkeypatch):
    monkeypatch.setenv("RAG_CLIENT_KEYS", "alice:KEY-A,bob:KEY-B")
    monkeypatch.setenv("RAG_CLIENT_COLLECTIONS", "alice:docs,bob:bobdocs")
    Collection(load_settings(), "bobdocs", create=True).close()
    settings = load_settings()
    alice = Caller(LocalAsker(models.services, settings), "alice", models.services, settings)
    refused = call(alice, "search", query="install", collection="bobdocs")
    assert refused.is_error and "unknown collection 'bobdocs'" in refused.content[0].text
    assert not call(alice, "search", query="install", collection="docs").is_error
