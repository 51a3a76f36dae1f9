"""The doors for tools people already use (issue 72), driven by their official clients:
the ``mcp`` client against a real `rag serve` over Streamable HTTP and against `rag mcp`
over stdio, and the ``openai`` client with ``base_url`` at `rag serve`.

One server with two client keys answers every test here (each run costs ~1 s of queue
polling). The corpus is the test's own two pages; the tiny local model stands in for
every role, so only the answer's shape and its outcome field are asserted, never what
it says.
"""

from __future__ import annotations

import asyncio
import json

import httpx
import httpx2
import openai
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from bench.local_service import RAG, ingest, smollm2_env, start, wait_until_up
from server.answers import OUTCOME_WORDS
from tests.net import free_port

pytestmark = pytest.mark.slow
OUTCOMES = set(OUTCOME_WORDS)
QUESTION = "How do I install the service?"
PAGES = {
    "docs": "# Install\n\nRun make demo to install the service. It takes four minutes.\n\n"
    "# Upgrade\n\nRun make upgrade to upgrade the service; the data stays.\n",
    "bobdocs": "# Plan\n\nBob's release is called Heron.\n",
}
REPLY_FIELDS = {"answer", "outcome", "outcome_words", "references", "citations", "support"}


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    root = tmp_path_factory.mktemp("integrations")
    env = smollm2_env(
        root / "data",
        client_keys="alice:key-a,bob:key-b",
        api_key="op-key",
        client_collections="alice:docs,bob:bobdocs",
    )
    for name, text in PAGES.items():
        folder = root / name
        folder.mkdir()
        (folder / "page.md").write_text(text)
        ingest(env, folder, name)
    return env


@pytest.fixture(scope="module")
def url(env, tmp_path_factory):
    port = free_port()
    log = tmp_path_factory.mktemp("integrations-log") / "server.log"
    proc = start(["serve", "--port", str(port)], env, log)
    try:
        base = f"http://127.0.0.1:{port}"
        wait_until_up(proc, f"{base}/healthz", log, headers=lambda: {"X-API-Key": "key-a"})
        yield base
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def _checked_reply(data: dict) -> None:
    assert set(data) >= REPLY_FIELDS, data
    assert data["outcome"] in OUTCOMES
    assert isinstance(data["references"], list) and isinstance(data["support"], list)


async def _mcp_session(server, steps):
    async with Client(server) as client:
        return await steps(client)


def _over_http(url: str, key: str, headers: dict | None = None):
    http = httpx2.AsyncClient(
        headers={"Authorization": f"Bearer {key}", **(headers or {})},
        timeout=httpx2.Timeout(30, read=300),  # an answer takes a while on a shared CPU
    )
    return streamable_http_client(f"{url}/mcp", http_client=http)


def test_mcp_over_streamable_http_lists_asks_and_searches(url):
    async def steps(client):
        tools = {t.name for t in (await client.list_tools()).tools}
        asked = await client.call_tool("ask", {"question": QUESTION})
        found = await client.call_tool("search", {"query": "install", "k": 2})
        return tools, asked, found

    tools, asked, found = asyncio.run(_mcp_session(_over_http(url, "key-a"), steps))
    assert tools == {"ask", "search"}
    assert not asked.is_error, asked.content
    _checked_reply(asked.structured_content)
    assert asked.structured_content["collection"] == "docs"
    assert "Outcome: " in asked.content[0].text
    assert not found.is_error
    passages = found.structured_content["passages"]
    assert passages and passages[0]["source"].endswith("page.md") and passages[0]["start_line"]


def test_mcp_keeps_each_client_to_its_collections(url):
    async def steps(client):
        return [
            await client.call_tool("ask", {"question": QUESTION, "collection": "bobdocs"}),
            await client.call_tool("search", {"query": "release", "collection": "bobdocs"}),
            await client.call_tool(
                "ask", {"question": QUESTION, "settings": {"rerank": "llm", "k": 20}}
            ),
        ]

    ask_bob, search_bob, over_budget = asyncio.run(_mcp_session(_over_http(url, "key-a"), steps))
    for refused in (ask_bob, search_bob):
        assert refused.is_error and "unknown collection 'bobdocs'" in refused.content[0].text
        assert "Heron" not in refused.content[0].text
    assert over_budget.is_error and "max_model_calls" in over_budget.content[0].text


def test_mcp_refuses_a_foreign_origin_and_a_missing_key(url):
    init = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    headers = {"Accept": "application/json, text/event-stream", "Authorization": "Bearer key-a"}
    foreign = httpx.post(
        f"{url}/mcp", json=init, headers={**headers, "Origin": "http://evil.example"}
    )
    assert foreign.status_code == 403
    keyless = httpx.post(f"{url}/mcp", json=init, headers={"Accept": headers["Accept"]})
    assert keyless.status_code == 401


def test_rag_mcp_over_stdio_lists_and_asks(env):
    server = StdioServerParameters(command=RAG, args=["mcp"], env=env)

    async def steps(client):
        tools = {t.name for t in (await client.list_tools()).tools}
        return tools, await client.call_tool("ask", {"question": QUESTION})

    tools, asked = asyncio.run(_mcp_session(server, steps))
    assert tools == {"ask", "search"}
    assert not asked.is_error, asked.content
    _checked_reply(asked.structured_content)


def _openai(url: str, key: str, **kwargs) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{url}/v1", api_key=key, max_retries=0, **kwargs)


def test_openai_client_models_completion_stream_and_follow_up(url):
    alice = _openai(url, "key-a")
    assert [m.id for m in alice.models.list()] == ["docs"]
    assert [m.id for m in _openai(url, "key-b").models.list()] == ["bobdocs"]

    first = alice.chat.completions.create(
        model="docs", messages=[{"role": "user", "content": QUESTION}]
    )
    message = first.choices[0].message
    _checked_reply({"answer": message.content, **message.model_extra["rag"]})
    assert "Outcome: " in message.content

    follow = "And how long does it take?"
    chunks = list(
        alice.chat.completions.create(
            model="docs",
            stream=True,
            messages=[
                {"role": "user", "content": QUESTION},
                {"role": "assistant", "content": message.content},
                {"role": "user", "content": follow},
            ],
        )
    )
    text = "".join(c.choices[0].delta.content or "" for c in chunks)
    last = chunks[-1].choices[0]
    assert last.finish_reason == "stop"
    extension = last.delta.model_extra["rag"]
    _checked_reply({"answer": text, **extension})
    assert "Outcome: " in text
    assert extension["queries"] and extension["queries"][0] != follow  # rephrased


def test_openai_client_keeps_each_client_to_its_collections_and_budget(url):
    alice = _openai(url, "key-a")
    ask = {"messages": [{"role": "user", "content": QUESTION}]}
    with pytest.raises(openai.APIStatusError) as refused:
        alice.chat.completions.create(model="bobdocs", **ask)
    assert refused.value.status_code in (404, 422) and "Heron" not in str(refused.value)
    with pytest.raises(openai.UnprocessableEntityError, match="max_model_calls"):
        alice.chat.completions.create(
            model="docs", extra_body={"settings": {"rerank": "llm", "k": 20}}, **ask
        )
    with pytest.raises(openai.PermissionDeniedError):
        _openai(url, "key-a", default_headers={"Origin": "http://evil.example"}).models.list()
    with pytest.raises(openai.AuthenticationError):
        _openai(url, "wrong-key").models.list()
    answer = httpx.post(
        f"{url}/v1/chat/completions",
        json={"model": "docs", "tools": [], **ask},
        headers={"Authorization": "Bearer key-a"},
    )
    assert answer.status_code == 400 and "tools" in json.dumps(answer.json())
