"""The door decides on the route the router dispatches, whatever the Host header says.

Starlette builds ``request.url`` from the Host header; a middleware that read it could
check one path while the router ran another (``Host: 127.0.0.1:8123?`` emptied the
path and opened another client's collection). Here a router with LangGraph's own
route templates sits behind the real ``HttpGuard`` and the door
(``server.app.ServedRoutesOnly``), and for any Host and path Hypothesis makes, either
the request is refused (400 ambiguous, 403 a foreign host, 404 not served) or the row
``server.routes.served`` found on the scope is the very template the router matched.
"""

from __future__ import annotations

import string

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route as Path
from starlette.testclient import TestClient

from server.app import ServedRoutesOnly
from server.http_guard import HttpGuard
from server.routes import SERVED, served
from tools.config import load_settings

# (method, template): LangGraph's routes that share paths with the served ones
TABLE = {(r.method, r.template) for r in SERVED} | {
    ("POST", "/assistants"),
    ("POST", "/assistants/{assistant_id}/latest"),
    ("PATCH", "/assistants/{assistant_id}"),
    ("POST", "/runs/batch"),
    ("POST", "/runs/crons"),
    ("DELETE", "/runs/crons/{c}"),
    ("GET", "/threads/{thread_id}/runs/{run_id}/storage"),
    ("DELETE", "/threads/{thread_id}/runs/{run_id}"),
    ("POST", "/threads/{thread_id}/runs/crons"),
    ("GET", "/threads/{thread_id}/runs"),
    ("POST", "/threads/prune"),
    ("POST", "/threads/{thread_id}/state"),
    ("POST", "/threads/{thread_id}/copy"),
    ("POST", "/threads/{thread_id}/history"),
    ("POST", "/threads/{thread_id}/commands"),
    ("PUT", "/store/items"),
    ("POST", "/mcp"),
    ("GET", "/internal/debug/thread/{thread_id}"),
    ("POST", "/internal/truncate"),
    ("GET", "/deploy"),
}


def _endpoint(method: str, template: str):
    async def matched(request: Request) -> JSONResponse:
        row = served(request.scope)
        decided = row.template if row else None
        return JSONResponse({"template": template, "method": method, "decided": decided})

    return matched


# the exact routes first, as langgraph-api lists them (/threads/search before /threads/{t})
ORDER = sorted(TABLE, key=lambda mt: "{" in mt[1])
ROUTER = Starlette(routes=[Path(t, _endpoint(m, t), methods=[m]) for m, t in ORDER])
APP = HttpGuard(ServedRoutesOnly(ROUTER), settings=load_settings, max_body=10_000)
CLIENT = TestClient(APP, base_url="http://127.0.0.1:8123")

segment = st.one_of(
    st.sampled_from(["runs", "crons", "state", "store", "..", ".", "threads", "wait", "x%2Fy"]),
    st.text(string.ascii_letters + string.digits + "-._~%:@!$&'()*+,;=", min_size=1, max_size=8),
)
host = st.one_of(
    st.just("127.0.0.1:8123"),
    st.sampled_from(
        [
            "127.0.0.1:8123",
            "127.0.0.1:8123?",
            "127.0.0.1:8123#",
            "127.0.0.1:8123/..",
            "localhost.:8123",
            "localhost",
            "[::1]:8123",
            "127.0.0.1:8123/store/items?x=",
            "evil.example",
            "127.0.0.1:8123 ",
            "127.0.0.1:8123\t",
        ]
    ),
    st.text(string.printable.strip() + " ", max_size=24),
)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(sorted(TABLE, key=str)), host, st.lists(segment, min_size=3, max_size=3))
def test_the_doors_route_is_the_routers(method_template, host_header, params):
    method, template = method_template
    path = template
    for name, value in zip(
        ("{assistant_id}", "{c}", "{thread_id}", "{run_id}"), params + params[:1], strict=False
    ):
        path = path.replace(name, value)
    try:
        response = CLIENT.request(method, path, headers={"host": host_header})
    except Exception:  # httpx refuses to send some headers at all: nothing to decide
        return
    if response.status_code in (400, 403, 404, 405):
        return  # ambiguous, a foreign host, not served, or matched by no route
    body = response.json()
    assert body["decided"] == body["template"], (path, body)


def test_the_host_variants_of_the_exploit_are_refused():
    for bent in ("127.0.0.1:8123?", "127.0.0.1:8123#", "127.0.0.1:8123/..", "localhost.:8123"):
        response = CLIENT.request("PUT", "/store/items", headers={"host": bent})
        assert response.status_code in (400, 403), bent


def test_duplicate_host_or_key_headers_are_refused():
    raw = [(b"host", b"127.0.0.1:8123"), (b"host", b"evil.example")]
    assert _raw(raw).status_code == 400
    keys = [(b"host", b"127.0.0.1:8123"), (b"x-api-key", b"a"), (b"x-api-key", b"b")]
    assert _raw(keys).status_code == 400


def _raw(headers: list[tuple[bytes, bytes]]):
    """Send through the ASGI app with exactly these headers (clients merge duplicates)."""
    import asyncio

    sent: list[dict] = []

    async def receive():
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message):
        sent.append(message)

    scope = {
        "type": "http",
        "method": "GET",
        "path": "/threads/x",
        "raw_path": b"/threads/x",
        "query_string": b"",
        "headers": headers,
    }
    asyncio.run(APP(scope, receive, send))

    class Reply:
        status_code = sent[0]["status"]

    return Reply


def test_the_door_decides_on_the_scope_even_without_the_guard():
    """Behind no HttpGuard at all, a bent Host still cannot move the door's decision."""
    bare = Starlette(
        routes=[Path("/store/items", _endpoint("PUT", "/store/items"), methods=["PUT"])]
    )
    bare.add_middleware(ServedRoutesOnly)
    client = TestClient(bare, base_url="http://127.0.0.1:8123")
    for bent in ("127.0.0.1:8123?", "127.0.0.1:8123#", "127.0.0.1:8123"):
        response = client.put("/store/items", headers={"host": bent})
        assert response.status_code == 404 and "not served" in response.text, bent
