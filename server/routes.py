"""Which route a request is: the one answer the guard, the middleware and tests share.

Why one function: Starlette rebuilds ``request.url`` from the Host header, while the
router dispatches on the ASGI scope's ``path``. A middleware that decided on
``request.url.path`` could be shown one path (``Host: 127.0.0.1:8123?`` empties it)
while the router ran another: that is how a client once reached another client's
collection. Every decision here takes the scope's path, the string the router matches.
"""

from __future__ import annotations

import re
from enum import Enum


class Route(Enum):
    CLOSED = "closed"  # not served: store, crons, batches, MCP, A2A, copies, prunes, state writes
    ASSISTANT_WRITE = "assistant_write"  # assistants are fixed by the operator
    RUN = "run"  # starts a run: checked before it is queued
    CREATE_THREAD = "create_thread"
    PATCH_THREAD = "patch_thread"  # merges metadata: capped
    CANCEL = "cancel"  # POST /runs/cancel: by thread and run ids only
    OTHER = "other"  # reads, deletes, joins: LangGraph's own owner filters hold them


RUN_PATHS = re.compile(r"^(/threads/[^/]+)?/runs(/wait|/stream)?/?$")
ASSISTANT_READS = re.compile(
    r"^/assistants(/search|/count|/[^/]+(/graph|/schemas|/subgraphs.*)?)?/?$"
)
# Routes nothing in the product uses, each a way to store a config that runs later, to
# queue many runs at once, to write state, or to reach state another client owns.
# Under these prefixes every method is closed (no other route shares them) ...
CLOSED_PREFIXES = re.compile(r"^/(runs/crons|runs/batch|store|mcp|a2a)(/|$)")
# ... and these are POSTs whose paths other methods share with thread and run reads
# (GET /threads/prune reads a thread called "prune"): closed for POST only.
CLOSED_POSTS = re.compile(r"^/threads/(prune|[^/]+/(copy|state|runs/crons))/?$")
THREAD = re.compile(r"^/threads/[^/]+/?$")
ASSISTANT_QUERIES = ("/assistants/search", "/assistants/count")  # POST, but reads


def route_of(method: str, path: str) -> Route:
    """The route of a request, from its method and the scope's ``path`` (never the URL)."""
    method = method.upper()
    if CLOSED_PREFIXES.match(path) or (method == "POST" and CLOSED_POSTS.match(path)):
        return Route.CLOSED
    if path.startswith("/assistants"):
        read = method == "GET" or path.rstrip("/") in ASSISTANT_QUERIES
        return Route.OTHER if read and ASSISTANT_READS.match(path) else Route.ASSISTANT_WRITE
    if method == "POST" and RUN_PATHS.match(path):
        return Route.RUN
    if method == "POST" and path.rstrip("/") == "/threads":
        return Route.CREATE_THREAD
    if method == "PATCH" and THREAD.match(path):
        return Route.PATCH_THREAD
    if method == "POST" and path.rstrip("/") == "/runs/cancel":
        return Route.CANCEL
    return Route.OTHER
