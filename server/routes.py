"""The routes `rag serve` serves: one table, and the lookup every layer shares.

The LangGraph server mounts far more than the product uses (crons, batches, the store,
MCP, A2A, thread copies, the v2 ``commands`` and WebSocket routes, and, under
``langgraph dev``, ``/internal/*`` and ``/deploy`` outside LangGraph's own auth). So
the door is an allow-list of what is *served*: a request whose (transport, method,
path) no row names answers 404 before any handler runs, on either runtime. Each row
also says who may call it and which LangGraph auth events it raises; the door
(server/app.py), the auth handlers (server/auth.py) and docs_corpus/security.md read
this table, and tests/unit/test_served_routes.py compares it with the routes the real
LangGraph app holds. Serving something new is adding a row.

No WebSocket route is served: nothing in the product (the CLI, the chat page, the
documented langgraph-sdk calls) opens one, and browsers send no ``X-API-Key`` on a
WebSocket. The v2 ``POST /threads/{id}/commands`` is closed for the same reason.

Why decide on the scope's path: Starlette rebuilds ``request.url`` from the Host
header, while the router dispatches on the ASGI scope's ``path``. A check that read
``request.url.path`` could be shown one path (``Host: 127.0.0.1:8123?`` empties it)
while the router ran another. Every decision here takes ``scope["path"]``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from starlette.routing import compile_path

from tools.config import OPERATOR

# the one assistant `rag serve` serves: the graph langgraph.json names (rag_cli/serve_cmd.py)
# and the assistant the MCP and chat-completions doors run (server/answers.py)
GRAPH_ID = "rag"


class Transport(Enum):
    HTTP = "http"
    WEBSOCKET = "websocket"


class Caller(Enum):
    """Who may call a route."""

    ANYONE = "anyone"  # no key needed
    CLIENT = "key"  # any configured key (client_keys or api_key)
    OPERATOR = "operator"  # the operator's api_key only


class Kind(Enum):
    """What a route does, for the door's early checks (server/app.py)."""

    READ = "read"  # reads, searches, joins: LangGraph's owner filters hold them
    DELETE = "delete"  # deletes an owned thread
    CREATE_THREAD = "create_thread"  # metadata and thread cap
    PATCH_THREAD = "patch_thread"  # merges metadata: capped as a whole
    RUN = "run"  # starts a run: checked before it is queued
    CANCEL = "cancel"  # cancels runs by id
    # asks through a run of the server's own, sent with the caller's key, which meets
    # the RUN row and its checks (server/answers.py): MCP and the OpenAI-compatible chat
    ASK = "ask"


@dataclass(frozen=True)
class Served:
    """One served route. ``fires``: the LangGraph auth events (``resource.action``) its
    handler raises; the auth handlers refuse every other event."""

    method: str  # "GET", "POST", ...; "GET" for a WebSocket handshake
    template: str  # Starlette's path template, as langgraph-api declares it
    kind: Kind
    fires: frozenset[str] = frozenset()
    caller: Caller = Caller.CLIENT
    transport: Transport = Transport.HTTP
    pattern: re.Pattern[str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "pattern", compile_path(self.template)[0])


def _row(method: str, template: str, kind: Kind, *fires: str) -> Served:
    return Served(method, template, kind, frozenset(fires))


READ_THREAD = "threads.read"
RUN = ("threads.create_run", READ_THREAD)  # a waited or streamed run joins it: a read
CANCEL = ("threads.update", READ_THREAD)  # a cancel is an update with an action

SERVED: tuple[Served, ...] = (
    _row("GET", "/healthz", Kind.READ),
    _row("GET", "/openapi.json", Kind.READ),
    _row("POST", "/assistants/search", Kind.READ, "assistants.search"),
    _row("GET", "/assistants/{assistant_id}", Kind.READ, "assistants.read"),
    _row("GET", "/assistants/{assistant_id}/schemas", Kind.READ, "assistants.read"),
    _row("POST", "/threads", Kind.CREATE_THREAD, "threads.create"),
    _row("POST", "/threads/search", Kind.READ, "threads.search"),
    _row("GET", "/threads/{thread_id}", Kind.READ, READ_THREAD),
    _row("PATCH", "/threads/{thread_id}", Kind.PATCH_THREAD, "threads.update", READ_THREAD),
    _row("DELETE", "/threads/{thread_id}", Kind.DELETE, "threads.delete", READ_THREAD),
    _row("GET", "/threads/{thread_id}/state", Kind.READ, READ_THREAD),
    _row("POST", "/runs", Kind.RUN, *RUN),
    _row("POST", "/runs/wait", Kind.RUN, *RUN),
    _row("POST", "/runs/stream", Kind.RUN, *RUN),
    _row("POST", "/threads/{thread_id}/runs", Kind.RUN, *RUN),
    _row("POST", "/threads/{thread_id}/runs/wait", Kind.RUN, *RUN),
    _row("POST", "/threads/{thread_id}/runs/stream", Kind.RUN, *RUN),
    _row("GET", "/threads/{thread_id}/runs", Kind.READ, READ_THREAD),
    _row("GET", "/threads/{thread_id}/runs/{run_id}", Kind.READ, READ_THREAD),
    _row("GET", "/threads/{thread_id}/runs/{run_id}/join", Kind.READ, READ_THREAD),
    # where langgraph-sdk reconnects a waited or streamed run whose answer was cut off
    _row("GET", "/threads/{thread_id}/runs/{run_id}/stream", Kind.READ, READ_THREAD),
    _row("POST", "/runs/cancel", Kind.CANCEL, *CANCEL),
    _row("POST", "/threads/{thread_id}/runs/{run_id}/cancel", Kind.CANCEL, *CANCEL),
    # the doors for tools people already use (docs_corpus/integrations.md)
    _row("POST", "/mcp", Kind.ASK),
    _row("GET", "/v1/models", Kind.READ),
    _row("POST", "/v1/chat/completions", Kind.ASK),
)

# what LangGraph's auth lets through: the events the served routes raise
AUTH_EVENTS: frozenset[str] = frozenset().union(*(row.fires for row in SERVED))


def served(scope: Mapping[str, Any]) -> Served | None:
    """The row serving this ASGI request (HTTP or WebSocket), or None: not served."""
    try:
        transport = Transport(scope["type"])
    except ValueError:
        return None
    method = "GET" if transport is Transport.WEBSOCKET else str(scope.get("method", "")).upper()
    path = scope.get("path", "")
    for row in SERVED:
        if row.transport is transport and row.method == method and row.pattern.match(path):
            return row
    return None


def may_call(row: Served, client: str | None) -> bool:
    """Whether the client a key names (None: no or a wrong key; 'anyone': no key is
    configured, an open server on purpose) may call this route."""
    if row.caller is Caller.ANYONE:
        return True
    if row.caller is Caller.OPERATOR:
        return client in (OPERATOR, "anyone")
    return client is not None
