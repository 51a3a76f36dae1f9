"""A token for the chat page, the way Jupyter protects its notebook server.

Every user and process of the machine can connect to 127.0.0.1, so ``rag ui`` makes a
fresh token at start and prints the page's URL with it (``/?token=...``). Opening that
URL once stores the token in a cookie the browser sends only to this page
(HttpOnly, SameSite=Strict) and redirects to the clean URL; every other request needs
the cookie (or the ``X-UI-Token`` header, for scripts). Without it: 401, saying which
URL to open. As with Jupyter, a browser also sends that cookie to other ports of
127.0.0.1: a program of another local user listening there could read it while the
page runs (the token changes at every start).
"""

from __future__ import annotations

import hmac
import secrets
from http.cookies import SimpleCookie
from urllib.parse import parse_qsl, quote, urlencode

from server.http_guard import ASGIApp, Receive, Scope, Send, headers_of, reply

HEADER = "x-ui-token"


def cookie_name(scope: Scope) -> str:
    """One cookie per port: browsers send a 127.0.0.1 cookie to every port of it, and two
    pages on two ports must not overwrite each other's token."""
    server = scope.get("server") or ("", 0)
    return f"rag_ui_token_{server[1]}"


def new_token() -> str:
    return secrets.token_urlsafe(24)


def own_location(path: str, query: str) -> str:
    """A ``Location`` on this page for ``path``: one leading slash and the path
    percent-encoded again, so ``//evil.example/x`` (or ``/\\evil.example``, which
    browsers read alike) stays a path here instead of naming another host, and no
    decoded character can end the header."""
    return quote("/" + path.lstrip("/\\")) + (f"?{query}" if query else "")


class RequireToken:
    """ASGI middleware: the token from the URL once, then from the cookie."""

    def __init__(self, app: ASGIApp, *, token: str) -> None:
        self.app = app
        self.token = token.encode()

    def _valid(self, given: str) -> bool:
        return hmac.compare_digest(given.encode(), self.token)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = headers_of(scope)
        query = parse_qsl(scope.get("query_string", b"").decode("latin-1"))
        given = dict(query).get("token")
        if given is not None and self._valid(given):
            rest = urlencode([(k, v) for k, v in query if k != "token"])
            location = own_location(scope["path"], rest)
            cookie = f"{cookie_name(scope)}={given}; HttpOnly; SameSite=Strict; Path=/"
            await send(
                {
                    "type": "http.response.start",
                    "status": 303,
                    "headers": [(b"location", location.encode()), (b"set-cookie", cookie.encode())],
                }
            )
            await send({"type": "http.response.body", "body": b""})
            return
        jar = SimpleCookie(headers.get("cookie", ""))
        name = cookie_name(scope)
        from_cookie = jar[name].value if name in jar else ""
        if self._valid(headers.get(HEADER, "")) or self._valid(from_cookie):
            await self.app(scope, receive, send)
            return
        await reply(
            send,
            401,
            "this chat page needs its token: open the URL `rag ui` printed (it ends in ?token=...)",
        )
