"""The server's HTTP guard: API key, per-request settings, limits, and where it may bind."""

from __future__ import annotations

import pytest
from starlette.testclient import TestClient

from rag_cli.main import main
from rag_cli.serve_cmd import exposure_problem, server_key
from server.app import app
from tools.config import load_settings, masked


@pytest.fixture
def client(tmp_path):
    (tmp_path / "data" / "collections").mkdir(parents=True)
    (tmp_path / "data" / "collections" / "docs.sqlite").touch()  # list_collections sees it
    return TestClient(app, base_url="http://127.0.0.1:8123")


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
    assert assistant.status_code == 404  # assistants are fixed by the operator


EVIL_MODEL = {"generator_model": "openai:evil@http://127.0.0.1:9/v1"}
QUESTION = {"assistant_id": "rag", "input": {"question": "q"}}


@pytest.mark.parametrize(
    ("method", "path", "body", "status"),
    [
        ("post", "/runs", {**QUESTION, "config": {"configurable": EVIL_MODEL}}, 422),
        ("post", "/runs/stream", {**QUESTION, "context": EVIL_MODEL}, 422),
        ("post", "/threads/t1/runs/wait", {**QUESTION, "checkpoint": EVIL_MODEL}, 422),
        ("post", "/runs/batch", [QUESTION, QUESTION], 404),
        ("post", "/runs", {**QUESTION, "config": EVIL_MODEL}, 422),  # beside configurable
        ("post", "/runs", {**QUESTION, "config": {"metadata": {"a": 1}}}, 422),
        ("post", "/threads/t1/state", {"values": {"answer": "forged"}}, 404),
        ("post", "/threads/t1/copy", {}, 404),
        ("post", "/threads/prune", {"thread_ids": ["t1"]}, 404),
        ("post", "/runs/cancel", {"status": "all"}, 403),
        ("post", "/runs/crons", {**QUESTION, "schedule": "* * * * *"}, 404),
        ("post", "/threads/t1/runs/crons", {**QUESTION, "schedule": "* * * * *"}, 404),
        ("post", "/assistants", {"graph_id": "rag"}, 404),
        ("patch", "/assistants/a1", {"config": {}}, 404),
        ("delete", "/assistants/a1", None, 404),
        ("post", "/assistants/a1/latest", {"version": 1}, 404),
        ("get", "/internal/debug/thread/t1", None, 404),  # langgraph dev's, outside its auth
        ("post", "/internal/truncate", {}, 404),
        ("get", "/deploy", None, 404),
        ("post", "/threads/t1/commands", {"type": "run.start"}, 404),  # v2: not used
        ("post", "/threads/t1/stream/events", {}, 404),
        ("post", "/runs/wait", {**QUESTION, "webhook": "http://127.0.0.1:9/hook"}, 422),
        ("post", "/runs/wait", {**QUESTION, "command": {"resume": 1}}, 422),
        ("post", "/runs/wait", {**QUESTION, "config": {"configurable": {"rag_settings": {}}}}, 422),
        ("put", "/store/items", {"namespace": ["a"], "key": "k", "value": {}}, 404),
        ("post", "/mcp/tools", {}, 404),  # LangGraph's own MCP; /mcp is the product's
        ("post", "/a2a/rag", {}, 404),
    ],
)
def test_every_route_that_can_start_a_run_or_store_config_is_guarded(
    client, method, path, body, status
):
    kwargs = {} if body is None else {"json": body}
    response = client.request(method.upper(), path, **kwargs)
    assert response.status_code == status, response.text
    if status == 404:  # refused by the guard, not merely absent from this test's app
        assert "not served here" in response.json()["detail"]


def test_reading_assistants_stays_open(client):
    assert client.post("/assistants/search", json={}).status_code == 404  # reached LangGraph
    assert client.get("/assistants/a1").status_code == 404


@pytest.mark.parametrize(
    "body",
    [
        b"[" * 100_000 + b"]" * 100_000,  # nesting Python's parser cannot follow
        b'{"assistant_id": "rag", "input": {"question": "q", "messages": ['
        + b",".join([b'{"role": "user", "content": "hi"}'] * 101)
        + b"]}}",
        b'{"assistant_id": "rag", "input": {"question": "q", "messages": [{"role": "user", '
        b'"content": "' + b"x" * 20_001 + b'"}]}}',
    ],
)
def test_junk_and_oversized_histories_are_4xx(client, body):
    response = client.post("/runs/wait", content=body, headers={"content-type": "application/json"})
    assert response.status_code == 422, response.text


def test_a_body_over_the_cap_is_refused_before_it_is_read(client):
    big = b"x" * 1_000_001
    response = client.post("/runs/wait", content=big)
    assert response.status_code == 413

    def trickle():  # no Content-Length: the cap holds on the stream itself
        for _ in range(2000):
            yield b"y" * 1000

    assert client.post("/runs/wait", content=trickle()).status_code == 413


def test_a_body_that_trickles_past_the_deadline_gets_408():
    """Driven at the ASGI level: a client that sends one byte and then nothing."""
    import asyncio

    from server.http_guard import HttpGuard

    reached = []

    async def app(scope, receive, send):
        reached.append(scope["path"])

    async def receive():
        if not sent:
            sent.append(1)
            return {"type": "http.request", "body": b"{", "more_body": True}
        await asyncio.sleep(3600)

    sent: list[int] = []
    replies: list[dict] = []

    async def send(message):
        replies.append(message)

    guard = HttpGuard(app, settings=load_settings, max_body=1000, body_timeout_s=0.05)
    scope = {"type": "http", "path": "/runs/wait", "headers": [(b"host", b"127.0.0.1")]}
    asyncio.run(guard(scope, receive, send))
    assert replies[0]["status"] == 408 and reached == []


@pytest.mark.parametrize(
    ("headers", "status"),
    [
        ({"host": "evil.example"}, 403),  # DNS rebinding: a foreign name on our address
        ({"host": "evil.example:8123"}, 403),
        ({"origin": "http://127.0.0.1:9999"}, 403),  # another local origin
        ({"origin": "null"}, 403),
        ({"host": "127.0.0.1:8123", "origin": "http://127.0.0.1:8123"}, 200),
        ({"host": "[::1]:8123"}, 200),
        ({"host": "localhost:8123"}, 200),
    ],
)
def test_host_and_origin_are_checked(client, headers, status):
    assert client.get("/healthz", headers=headers).status_code == status


def test_operator_lists_more_hosts_and_origins(client, monkeypatch):
    monkeypatch.setenv("RAG_ALLOWED_HOSTS", "rag.internal")
    monkeypatch.setenv("RAG_ALLOWED_ORIGINS", "https://app.example")
    ok = {"host": "rag.internal", "origin": "https://app.example"}
    assert client.get("/healthz", headers=ok).status_code == 200
    assert client.get("/healthz", headers={"host": "other.internal"}).status_code == 403


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


def test_loopback_gets_a_generated_key_kept_across_restarts(tmp_path):
    settings, path = server_key(load_settings(), tmp_path)
    assert path == tmp_path / "api_key" and len(settings.api_key) >= 32
    assert path.stat().st_mode & 0o777 == 0o600  # other users of the machine cannot read it
    assert server_key(load_settings(), tmp_path)[0].api_key == settings.api_key
    for explicit in ({"api_key": "mine"}, {"open_loopback": True}, {"allow_remote": True}):
        chosen, generated = server_key(load_settings(explicit), tmp_path / "other")
        assert generated is None and chosen.api_key == explicit.get("api_key", "")


def test_client_keys_name_the_client_and_are_validated():
    from tools.config import ConfigError, client_of

    settings = load_settings({"client_keys": "alice:key-a, bob:key-b", "api_key": "op"})
    assert [client_of(settings, k) for k in ("key-a", "key-b", "op")] == [
        "alice",
        "bob",
        "operator",
    ]
    assert client_of(settings, "key-c") is None and client_of(settings, "") is None
    assert client_of(load_settings(), "") == "anyone"  # no key configured: one open client
    assert masked(settings)["client_keys"] == "alice:***,bob:***"
    for bad in ("alice", "alice:", ":k", "a:1,a:2", "operator:k"):
        with pytest.raises(ConfigError, match="client_keys"):
            load_settings({"client_keys": bad})


def test_any_configured_client_key_opens_the_server(client, monkeypatch):
    monkeypatch.setenv("RAG_CLIENT_KEYS", "alice:key-a,bob:key-b")
    assert client.get("/healthz").status_code == 401
    assert client.get("/healthz", headers={"X-API-Key": "key-b"}).status_code == 200


def test_rag_serve_refuses_an_open_public_bind(capsys):
    assert main(["serve", "--host", "0.0.0.0"]) == 2
    assert "RAG_API_KEY" in capsys.readouterr().err


def test_cli_k_over_the_limit_is_a_clear_error(capsys):
    assert main(["ask", "question", "--k", "500"]) == 2
    assert "k = 500" in capsys.readouterr().err


def test_the_graph_refuses_operator_settings_from_any_request():
    """Defence in depth: whatever route brought a config, the graph itself refuses it."""
    from graph.builder import config_for
    from graph.configuration import run_settings
    from server.graph_factory import make_graph
    from tools.config import ConfigError

    for bad in (EVIL_MODEL, {"data_dir": "/etc"}, {"verify_threshold": 0.0}):
        with pytest.raises(ConfigError, match="may not set"):
            run_settings({"configurable": {**bad, "thread_id": "t"}})
        with pytest.raises(ConfigError, match="may not set"):
            make_graph({"configurable": bad})
    forged = {"configurable": {"rag_settings": {"generator_model": "openai:x@http://h/v1"}}}
    assert run_settings(forged).generator_model == "local"  # a dict is not a Settings
    assert run_settings({"configurable": {"k": 3}}).k == 3
    operator = config_for(generator_model="openai:mine@http://127.0.0.1:8000/v1", k=2)
    assert run_settings(operator).generator_model.startswith("openai:mine")


def test_the_openai_key_goes_only_to_its_own_base_url(monkeypatch):
    from tools.models.factory import _openai_key
    from tools.models.spec import parse_model_spec

    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret")
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    spec = lambda text: parse_model_spec(text, kind="chat")  # noqa: E731
    assert _openai_key(spec("openai:gpt-4o-mini"), "RAG_GENERATOR_MODEL") == "sk-secret"
    evil = spec("openai:evil@http://127.0.0.1:9/v1")
    assert _openai_key(evil, "RAG_GENERATOR_MODEL") == "not-needed"
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1/")
    assert _openai_key(evil, "RAG_GENERATOR_MODEL") == "sk-secret"  # the operator's choice


def test_threads_are_stamped_with_their_owner_and_filtered_on_it(monkeypatch):
    import asyncio
    from types import SimpleNamespace

    from langgraph_sdk import Auth

    from server.auth import authenticate, own_threads

    monkeypatch.setenv("RAG_CLIENT_KEYS", "alice:key-a,bob:key-b")
    assert asyncio.run(authenticate({b"x-api-key": b"key-b"})) == "bob"
    with pytest.raises(Auth.exceptions.HTTPException):
        asyncio.run(authenticate({b"x-api-key": b"key-a "}))
    ctx = SimpleNamespace(user=SimpleNamespace(identity="alice"))
    value = {"metadata": {"owner": "bob", "topic": "x"}}  # a forged owner is overwritten
    assert asyncio.run(own_threads(ctx, value)) == {"owner": "alice"}
    assert value["metadata"] == {"owner": "alice", "topic": "x"}
    created = {"thread_id": "t"}
    asyncio.run(own_threads(ctx, created))
    assert created["metadata"] == {"owner": "alice"}


def test_rag_serve_runs_what_the_checkouts_langgraph_json_names(tmp_path):
    """rag serve writes its own langgraph.json from the installed modules (it also runs
    from a non-editable install); the checkout's file, for `langgraph dev`, must agree."""
    import json
    from pathlib import Path

    from rag_cli.serve_cmd import GRAPH_ID, SERVED, server_config

    repo = Path(__file__).resolve().parents[2]
    checkout = json.loads((repo / "langgraph.json").read_text())
    written = json.loads(server_config(tmp_path).read_text())

    def as_file(module: str, attribute: str) -> str:
        return f"./{module.replace('.', '/')}.py:{attribute}"

    assert checkout["graphs"] == {GRAPH_ID: as_file(*SERVED["graph"])}
    assert checkout["http"]["app"] == as_file(*SERVED["app"])
    assert checkout["auth"]["path"] == as_file(*SERVED["auth"])
    for entry in (written["graphs"][GRAPH_ID], written["http"]["app"], written["auth"]["path"]):
        path, _ = entry.rsplit(":", 1)
        assert Path(path).is_absolute() and Path(path).is_file()
    assert written["dependencies"] == [str(repo)]


def test_no_response_of_the_server_may_be_framed(client):
    for response in (client.get("/healthz"), run(client, {"k": 4}), run(client, {"k": 99})):
        assert response.headers["x-frame-options"] == "DENY"
        assert response.headers["content-security-policy"] == "frame-ancestors 'none'"


def test_a_database_that_cannot_be_reached_is_a_503_with_retry_after():
    from starlette.applications import Starlette
    from starlette.routing import Route
    from starlette.testclient import TestClient

    from server.app import DatabaseDown
    from tools.store.postgres import DatabaseError

    def down(_request):
        raise DatabaseError("no connection to the database at postgresql://h/db within 10 s")

    app = Starlette(routes=[Route("/runs/wait", down, methods=["POST"])])
    app.add_middleware(DatabaseDown)
    reply = TestClient(app).post("/runs/wait", json={})
    assert reply.status_code == 503 and reply.headers["Retry-After"] == "5"
    assert "cannot be reached" in reply.json()["detail"]


def test_a_route_the_table_does_not_name_is_404_for_every_key(client, monkeypatch):
    monkeypatch.setenv("RAG_CLIENT_KEYS", "alice:key-a")
    monkeypatch.setenv("RAG_API_KEY", "op")
    for key in ("key-a", "op", "wrong", None):
        headers = {"X-API-Key": key} if key else {}
        for method, path in (("GET", "/internal/debug/thread/t1"), ("POST", "/deploy")):
            response = client.request(method, path, headers=headers)
            assert response.status_code == 404 and "not served here" in response.text


def test_the_door_lets_each_caller_reach_only_its_rows():
    from server.routes import Caller, Kind, Served, may_call

    for caller, allowed in (
        (Caller.ANYONE, {None, "alice", "operator", "anyone"}),
        (Caller.CLIENT, {"alice", "operator", "anyone"}),
        (Caller.OPERATOR, {"operator", "anyone"}),  # anyone: no key configured at all
    ):
        row = Served("GET", "/x", Kind.READ, caller=caller)
        assert {c for c in (None, "alice", "operator", "anyone") if may_call(row, c)} == allowed


def _handshake(client, path, headers):
    """A WebSocket handshake's answer: 101, or the HTTP status it was refused with."""
    from starlette.testclient import WebSocketDenialResponse

    try:
        with client.websocket_connect("ws://127.0.0.1:8123" + path, headers=headers):
            return 101
    except WebSocketDenialResponse as denied:
        return denied.status_code


@pytest.mark.parametrize(
    ("headers", "status"),
    [
        ({"origin": "http://evil.example"}, 403),  # any page may open a socket to loopback
        ({"host": "evil.example:8123"}, 403),  # a rebinding name
        ({"host": "127.0.0.1:8123?"}, 400),
        ({}, 404),  # a clean handshake: no WebSocket route is served
        ({"origin": "http://127.0.0.1:8123"}, 404),
    ],
)
def test_websocket_handshakes_meet_the_same_door(client, headers, status):
    assert _handshake(client, "/threads/t1/stream/events", headers) == status


def test_a_websocket_is_refused_with_a_close_where_http_answers_are_unsupported():
    """A server without ASGI's websocket.http.response extension: closed before accept
    (the server answers the handshake with 403), never accepted."""
    import asyncio

    from server.app import app as door

    sent: list[dict] = []

    async def receive():
        return {"type": "websocket.connect"}

    async def send(message):
        sent.append(message)

    scope = {
        "type": "websocket",
        "path": "/threads/t1/stream/events",
        "raw_path": b"/threads/t1/stream/events",
        "query_string": b"",
        "headers": [(b"host", b"127.0.0.1:8123")],
        "extensions": {},
    }
    asyncio.run(door(scope, receive, send))
    assert [m["type"] for m in sent] == ["websocket.close"] and sent[0]["code"] == 1008


def test_a_websocket_frame_over_the_cap_closes_the_socket():
    import asyncio

    from server.http_guard import HttpGuard

    got: list[dict] = []

    async def app(scope, receive, send):
        await receive()  # connect
        got.append(await receive())

    frames = iter(
        [{"type": "websocket.connect"}, {"type": "websocket.receive", "text": "x" * 2000}]
    )

    async def receive():
        return next(frames)

    sent: list[dict] = []

    async def send(message):
        sent.append(message)

    guard = HttpGuard(app, settings=load_settings, max_body=1000)
    scope = {"type": "websocket", "path": "/ws", "headers": [(b"host", b"127.0.0.1")]}
    asyncio.run(guard(scope, receive, send))
    assert got == [{"type": "websocket.disconnect", "code": 1009}]
    assert sent == [{"type": "websocket.close", "code": 1009}]
