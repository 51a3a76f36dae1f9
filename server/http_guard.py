"""The HTTP front door both servers share (``rag serve`` and ``rag ui``).

A server on loopback is still reachable by every web page its operator opens: a page
on another origin can send requests, and a page on a rebinding host name (evil.example
resolving to 127.0.0.1) is same-origin with it as far as the browser knows. So, before
any route runs:

- the request must be unambiguous: exactly one ``Host`` header of the exact form
  ``name[:port]`` (no query, fragment, path, user part or trailing dot), at most one
  ``X-API-Key``, and a path that starts with ``/``; anything else is a 400, because a
  Host that parses two ways lets a check and the router read two different requests;
- the ``Host`` header must name loopback or a host the operator listed
  (``allowed_hosts``), which defeats DNS rebinding;
- a request carrying an ``Origin`` (every browser fetch or form post from a page does)
  must come from the server's own origin or one the operator listed
  (``allowed_origins``); other sites get a 403 whether or not CORS would have let
  them read the answer, so they cannot start runs or change state either;
- a body is read at most ``max_body`` bytes, as a stream; beyond that a 413, before
  the rest is read (Content-Length is checked first when sent);
- the whole body must arrive within ``body_timeout_s``, else a 408: a client that
  trickles its body cannot hold a worker. (Slow *headers* arrive before any ASGI code
  runs: that limit belongs to the reverse proxy, see docs_corpus/security.md.)

A WebSocket handshake meets the same door: the same ambiguity, Host and Origin checks
(a page on any origin may open a WebSocket to loopback: browsers apply no CORS to
them), refused with the same status (``websocket.http.response`` where the server
supports it, else a close before accepting, which the server sends as a 403); and a
frame over ``max_body`` bytes closes the socket (1009) instead of reaching the app.

And every response forbids framing (``X-Frame-Options: DENY`` and CSP
``frame-ancestors 'none'``): a page on another port of 127.0.0.1 is same-site, so
the chat page's cookie reaches a frame of it, and a framed page can be clickjacked.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any
from urllib.parse import urlsplit

from tools.config import Settings

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})
_LABEL = r"[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?"
# name[:port]: DNS labels (no trailing dot) or a bracketed IPv6 address, then a port
EXACT_HOST = re.compile(rf"^(?:{_LABEL}(?:\.{_LABEL})*|\[[0-9a-f:.]+\])(?::[0-9]{{1,5}})?\Z", re.I)
# headers whose duplicates two layers could read differently (first or last)
SINGLE_HEADERS = (b"host", b"x-api-key", b"authorization")
NO_FRAMES = b"frame-ancestors 'none'"


def split_list(value: str) -> frozenset[str]:
    """A comma-separated setting as a set of lower-case, trimmed entries."""
    return frozenset(part.strip().lower().rstrip("/") for part in value.split(",") if part.strip())


def headers_of(scope: Scope) -> dict[str, str]:
    """An ASGI request's headers, names lower-cased."""
    return {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}


def ambiguity(scope: Scope) -> str | None:
    """Why this request could be read two ways (a 400), or None."""
    for name in SINGLE_HEADERS:
        if sum(1 for k, _ in scope["headers"] if k.lower() == name) > 1:
            return f"more than one {name.decode()} header"
    host = next((v for k, v in scope["headers"] if k.lower() == b"host"), b"")
    if not EXACT_HOST.match(host.decode("latin-1")):
        return "the Host header must be exactly name[:port]"
    if not scope.get("path", "").startswith("/"):
        return "the request target must be a path starting with '/'"
    target = bytes(scope.get("raw_path") or b"")
    # absolute form (some HTTP parsers keep it in raw_path): it must name the Host
    absolute = target[:7].lower() == b"http://" or target[:8].lower() == b"https://"
    if absolute and urlsplit(target.decode("latin-1")).netloc.lower() != host.decode().lower():
        return "the request target names another host than the Host header"
    return None


def host_name(host_header: str) -> str:
    """'Example.com:8123' -> 'example.com'; '[::1]:80' -> '::1'."""
    host = host_header.strip().lower()
    if host.startswith("["):
        return host[1:].split("]", 1)[0]
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


Headers = list[tuple[bytes, bytes]]


async def reply(send: Send, status: int, detail: str, more: Headers | None = None) -> None:
    body = json.dumps({"detail": detail}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers + (more or [])})
    await send({"type": "http.response.body", "body": body})


WEBSOCKET_POLICY = 1008  # close code: a policy refused the connection
WEBSOCKET_TOO_BIG = 1009


async def refuse(
    scope: Scope,
    receive: Receive,
    send: Send,
    status: int,
    detail: str,
    more: Headers | None = None,
) -> None:
    """Refuse an HTTP request or a WebSocket handshake with ``status`` and ``detail``. A
    handshake is answered with that HTTP response where the server supports it (ASGI's
    ``websocket.http.response``), else closed before it is accepted (an HTTP 403)."""
    if scope["type"] != "websocket":
        await reply(send, status, detail, more)
        return
    message = await receive()  # websocket.connect, or the client already left
    if message["type"] != "websocket.connect":
        return
    if "websocket.http.response" in scope.get("extensions", {}):
        body = json.dumps({"detail": detail}).encode()
        headers = [(b"content-type", b"application/json"), *(more or [])]
        start = {"type": "websocket.http.response.start", "status": status, "headers": headers}
        await send(start)
        await send({"type": "websocket.http.response.body", "body": body})
    else:
        await send({"type": "websocket.close", "code": WEBSOCKET_POLICY, "reason": detail[:120]})


class HttpGuard:
    """ASGI middleware: Host allow-list, Origin check, streamed body cap and deadline."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        settings: Callable[[], Settings],
        max_body: int,
        body_timeout_s: float = 30.0,
    ) -> None:
        self.app = app
        self.settings = settings  # read per request: allowed_hosts, allowed_origins
        self.max_body = max_body
        self.body_timeout_s = body_timeout_s

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)  # lifespan
            return
        send = _unframeable(send)
        if unclear := ambiguity(scope):
            await refuse(scope, receive, send, 400, unclear)
            return
        headers = headers_of(scope)
        problem = self._problem(headers)
        if problem:
            await refuse(scope, receive, send, *problem)
            return
        if scope["type"] == "websocket":
            await self.app(scope, _frames_capped(receive, send, self.max_body), send)
            return
        length = headers.get("content-length", "")
        if length.isdigit() and int(length) > self.max_body:
            await reply(send, 413, f"request body over {self.max_body} bytes")
            return
        chunks: list[bytes] = []
        size, more = 0, True
        deadline = time.monotonic() + self.body_timeout_s
        while more:
            try:
                message = await asyncio.wait_for(receive(), deadline - time.monotonic())
            except TimeoutError:
                await reply(
                    send, 408, f"request body not received within {self.body_timeout_s:g} s"
                )
                return
            if message["type"] != "http.request":
                break  # the client went away
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_body:
                await reply(send, 413, f"request body over {self.max_body} bytes")
                return
            chunks.append(chunk)
            more = message.get("more_body", False)
        await self.app(scope, _replay(b"".join(chunks), receive), send)

    def _problem(self, headers: dict[str, str]) -> tuple[int, str] | None:
        host = headers.get("host", "")
        settings = self.settings()
        allowed = LOOPBACK_NAMES | split_list(settings.allowed_hosts)
        if "*" not in allowed and host_name(host) not in allowed:
            return 403, (
                f"Host {host!r} is not served here; the operator lists other names in "
                "RAG_ALLOWED_HOSTS"
            )
        origin = headers.get("origin")
        if origin is None:
            return None
        parts = urlsplit(origin)
        same = parts.scheme in ("http", "https") and parts.netloc.lower() == host.lower()
        if not same and origin.lower().rstrip("/") not in split_list(settings.allowed_origins):
            return 403, (
                f"requests from pages on {origin} are refused; the operator lists trusted "
                "origins in RAG_ALLOWED_ORIGINS"
            )
        return None


def _unframeable(send: Send) -> Send:
    """``send`` with X-Frame-Options and CSP frame-ancestors added to the response start
    (appended to a CSP the application set itself)."""

    async def sending(message: Message) -> None:
        if message["type"] == "http.response.start":
            headers = [
                (k, v) for k, v in message.get("headers", []) if k.lower() != b"x-frame-options"
            ]
            csp = [v for k, v in headers if k.lower() == b"content-security-policy"]
            headers = [(k, v) for k, v in headers if k.lower() != b"content-security-policy"]
            policy = b"; ".join([*csp, NO_FRAMES])
            headers += [(b"x-frame-options", b"DENY"), (b"content-security-policy", policy)]
            message = {**message, "headers": headers}
        await send(message)

    return sending


def _frames_capped(receive: Receive, send: Send, max_bytes: int) -> Receive:
    """A WebSocket receive that closes the socket (1009) on a frame over ``max_bytes``
    and tells the app the client left, instead of handing the frame over."""

    async def receiving() -> Message:
        message = await receive()
        if message["type"] == "websocket.receive":
            data = message.get("bytes") or (message.get("text") or "").encode()
            if len(data) > max_bytes:
                await send({"type": "websocket.close", "code": WEBSOCKET_TOO_BIG})
                return {"type": "websocket.disconnect", "code": WEBSOCKET_TOO_BIG}
        return message

    return receiving


def _replay(body: bytes, receive: Receive) -> Receive:
    """A receive that hands the buffered body over once, then waits on the real one
    (for the disconnect that streaming responses listen for)."""
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay


def parse_json(raw: bytes) -> Any:
    """JSON from a request body; ValueError (with the reason) for junk, including nesting
    too deep for Python's parser, which raises RecursionError."""
    try:
        return json.loads(raw or b"null")
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ValueError(f"request body is not valid JSON: {exc}") from None
    except RecursionError:
        raise ValueError("request body is nested too deeply") from None
