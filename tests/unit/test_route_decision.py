"""The guard decides on the route the router dispatches, whatever the Host header says.

Starlette builds ``request.url`` from the Host header; a middleware that read it could
check one path while the router ran another (``Host: 127.0.0.1:8123?`` emptied the
path and opened another client's collection). Here a router with the LangGraph
server's own route table (langgraph-api 0.7) sits behind the real ``HttpGuard``, and
for any Host and path Hypothesis makes, either the request is refused as ambiguous
(400) or not served (403, a foreign host), or the route ``server.routes.route_of``
decides from the scope is exactly the route of the template the router matched.
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

from server.http_guard import HttpGuard
from server.routes import Route, route_of
from tools.config import load_settings

R = Route
# (method, template) -> what the product must decide for it: LangGraph's routes
TABLE = {
    ("POST", "/assistants"): R.ASSISTANT_WRITE,
    ("POST", "/assistants/search"): R.OTHER,
    ("POST", "/assistants/count"): R.OTHER,
    ("POST", "/assistants/{a}/latest"): R.ASSISTANT_WRITE,
    ("POST", "/assistants/{a}/versions"): R.ASSISTANT_WRITE,
    ("GET", "/assistants/{a}"): R.OTHER,
    ("GET", "/assistants/{a}/graph"): R.OTHER,
    ("GET", "/assistants/{a}/schemas"): R.OTHER,
    ("GET", "/assistants/{a}/subgraphs"): R.OTHER,
    ("PATCH", "/assistants/{a}"): R.ASSISTANT_WRITE,
    ("DELETE", "/assistants/{a}"): R.ASSISTANT_WRITE,
    ("POST", "/runs/stream"): R.RUN,
    ("POST", "/runs/wait"): R.RUN,
    ("POST", "/runs"): R.RUN,
    ("POST", "/runs/batch"): R.CLOSED,
    ("POST", "/runs/cancel"): R.CANCEL,
    ("POST", "/runs/crons"): R.CLOSED,
    ("POST", "/runs/crons/search"): R.CLOSED,
    ("PATCH", "/runs/crons/{c}"): R.CLOSED,
    ("DELETE", "/runs/crons/{c}"): R.CLOSED,
    ("GET", "/threads/{t}/runs/{r}/join"): R.OTHER,
    ("POST", "/threads/{t}/runs/{r}/cancel"): R.OTHER,
    ("GET", "/threads/{t}/runs/{r}"): R.OTHER,
    ("DELETE", "/threads/{t}/runs/{r}"): R.OTHER,
    ("POST", "/threads/{t}/runs/stream"): R.RUN,
    ("POST", "/threads/{t}/runs/wait"): R.RUN,
    ("POST", "/threads/{t}/runs"): R.RUN,
    ("POST", "/threads/{t}/runs/crons"): R.CLOSED,
    ("GET", "/threads/{t}/runs"): R.OTHER,
    ("POST", "/threads"): R.CREATE_THREAD,
    ("POST", "/threads/search"): R.OTHER,
    ("POST", "/threads/prune"): R.CLOSED,
    ("GET", "/threads/{t}"): R.OTHER,
    ("PATCH", "/threads/{t}"): R.PATCH_THREAD,
    ("DELETE", "/threads/{t}"): R.OTHER,
    ("GET", "/threads/{t}/state"): R.OTHER,
    ("POST", "/threads/{t}/state"): R.CLOSED,
    ("POST", "/threads/{t}/copy"): R.CLOSED,
    ("POST", "/threads/{t}/history"): R.OTHER,
    ("POST", "/threads/{t}/state/checkpoint"): R.OTHER,
    ("PUT", "/store/items"): R.CLOSED,
    ("GET", "/store/items"): R.CLOSED,
    ("POST", "/store/items/search"): R.CLOSED,
    ("POST", "/store/namespaces"): R.CLOSED,
    ("POST", "/mcp"): R.CLOSED,
    ("POST", "/a2a/{a}"): R.CLOSED,
}


def _endpoint(method: str, template: str):
    async def matched(request: Request) -> JSONResponse:
        return JSONResponse(
            {
                "template": template,
                "method": method,
                "decided": route_of(method, request.scope["path"]).value,
            }
        )

    return matched


# the exact routes first, as langgraph-api lists them (/threads/search before /threads/{t})
ORDER = sorted(TABLE, key=lambda mt: "{" in mt[1])
ROUTER = Starlette(routes=[Path(t, _endpoint(m, t), methods=[m]) for m, t in ORDER])
APP = HttpGuard(ROUTER, settings=load_settings, max_body=10_000)
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
def test_the_guards_route_is_the_routers(method_template, host_header, params):
    method, template = method_template
    path = template
    for name, value in zip(("{a}", "{c}", "{t}", "{r}"), params + params[:1], strict=False):
        path = path.replace(name, value)
    try:
        response = CLIENT.request(method, path, headers={"host": host_header})
    except Exception:  # httpx refuses to send some headers at all: nothing to decide
        return
    if response.status_code in (400, 403):
        return  # ambiguous request, or a host that is not served
    if response.status_code in (404, 405):
        return  # the router matched nothing: no route to disagree about
    body = response.json()
    assert body["decided"] == TABLE[(body["method"], body["template"])].value, (path, body)


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


def test_validate_runs_decides_on_the_scope_even_without_the_guard():
    """Behind no HttpGuard at all, a bent Host still cannot move ValidateRuns' decision."""
    from server.app import ValidateRuns

    bare = Starlette(
        routes=[Path("/store/items", _endpoint("PUT", "/store/items"), methods=["PUT"])]
    )
    bare.add_middleware(ValidateRuns)
    client = TestClient(bare, base_url="http://127.0.0.1:8123")
    for bent in ("127.0.0.1:8123?", "127.0.0.1:8123#", "127.0.0.1:8123"):
        response = client.put("/store/items", headers={"host": bent})
        assert response.status_code == 404 and "not served" in response.text, bent
