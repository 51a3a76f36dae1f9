"""The chat page's token URL redirects only to the page's own paths (rag_ui/token.py):
a path that a browser would read as another host's is not one."""

from __future__ import annotations

import asyncio

import pytest

from rag_ui.token import RequireToken, own_location


def redirect(path: str, query: str = "token=s3cret") -> dict:
    """The response start the middleware sends for ``GET path?query``."""
    sent: list[dict] = []

    async def app(scope, receive, send):  # reached only without a token in the URL
        raise AssertionError("the token URL must be answered by the middleware")

    async def receive():
        return {"type": "http.request", "body": b""}

    async def send(message):
        sent.append(message)

    scope = {
        "type": "http",
        "method": "GET",
        "path": path,
        "query_string": query.encode(),
        "headers": [(b"host", b"127.0.0.1:8124")],
        "server": ("127.0.0.1", 8124),
    }
    asyncio.run(RequireToken(app, token="s3cret")(scope, receive, send))
    return sent[0]


@pytest.mark.parametrize(
    ("path", "location"),
    [
        ("//evil.example/x", "/evil.example/x"),
        ("///evil.example", "/evil.example"),
        ("/\\evil.example/x", "/evil.example/x"),
        ("/\\\\evil.example", "/evil.example"),
        ("/", "/"),
        ("/chat/page", "/chat/page"),
        ("/a\r\nSet-Cookie: x=1", "/a%0D%0ASet-Cookie%3A%20x%3D1"),
    ],
)
def test_the_token_redirect_stays_on_the_page(path, location):
    start = redirect(path)
    headers = dict(start["headers"])
    assert start["status"] == 303
    assert headers[b"location"].decode() == location


def test_the_rest_of_the_query_is_kept():
    start = redirect("//evil.example/x", "token=s3cret&x=1")
    assert dict(start["headers"])[b"location"] == b"/evil.example/x?x=1"
    assert own_location("/p", "") == "/p"
