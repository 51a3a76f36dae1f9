"""HTTP additions to the LangGraph server: an API key, request validation, and /healthz.

The LangGraph server accepts any JSON as a run's input and would only fail inside the
run; this middleware checks every request that can start a run or store a config first,
so a bad request gets a 4xx that says what is wrong and the server never starts a
doomed run.

A request may only tune how a question is answered (``tools.config.REQUEST_SETTINGS``),
wherever it puts the setting: ``config.configurable``, ``context`` or ``checkpoint``, on
runs, thread runs, streamed or waited runs, and its settings may not cost more than
``max_model_calls`` model calls (graph/budget.py). The graph refuses the same settings
again when it builds a run's ``Settings`` (graph/configuration.py), so a route this
guard does not know still cannot change them. Routes the product does not use (crons,
batches, state writes, thread copies and prunes, assistant changes, the store, MCP,
A2A) are closed, and so are webhooks. With keys configured (``api_key``,
``client_keys``; ``rag serve`` generates one on loopback), every request must carry one
in the ``X-API-Key`` header.

Several clients on one server (``client_keys``): each reads only the collections
``client_collections`` gives it (another's is refused as an unknown one), cancels only
runs on its own threads, and is held to its quotas (server/quotas.py).
"""

from __future__ import annotations

from typing import Any

import psycopg
from starlette import routing
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.middleware.base import BaseHTTPMiddleware, RequestResponseEndpoint
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from graph.budget import budget_problem
from graph.configuration import PER_QUESTION_FIELDS, SETTINGS_KEY, service_settings, settings_for
from server.http_guard import HttpGuard, parse_json
from server.quotas import Refusal, metadata_problem, quota_problem, usage_of
from server.routes import Route, route_of
from tools.config import (
    ConfigError,
    Settings,
    client_of,
    readable_collections,
    request_overrides,
)
from tools.store.collection import as_of_problem, list_collections
from tools.store.postgres import DatabaseError

# what a run's top-level ``config`` may hold: anything else (a setting put beside
# ``configurable``) would be stored in the thread's record and break reading it back
CONFIG_KEYS = frozenset({"configurable", "tags", "recursion_limit"})
API_KEY_HEADER = "X-API-Key"
MAX_BODY_BYTES = 1_000_000
MAX_MESSAGES = 100
MAX_MESSAGE_CHARS = 20_000
INPUT_FIELDS = {"question", "messages", *PER_QUESTION_FIELDS}


def _overrides(body: dict[str, Any]) -> dict[str, Any] | str:
    """The settings a request overrides (config.configurable, context, checkpoint), or
    what is wrong."""
    config = body.get("config") or {}
    if not isinstance(config, dict):
        return "'config' must be an object"
    if stray := sorted(set(config) - CONFIG_KEYS):
        return (
            f"'config' may hold only {sorted(CONFIG_KEYS)}, not {stray}: settings go in "
            "config.configurable"
        )
    if body.get("webhook") is not None:
        return "'webhook' is not accepted: this server sends run records to no URL"
    found: dict[str, Any] = {}
    for where, values in (
        ("config.configurable", config.get("configurable")),
        ("context", body.get("context")),
        ("checkpoint", body.get("checkpoint")),
    ):
        values = values or {}
        if not isinstance(values, dict):
            return f"'{where}' must be an object"
        if SETTINGS_KEY in values:
            return f"'{where}' may not carry {SETTINGS_KEY!r}"
        try:
            found.update(request_overrides(values, where))
        except ConfigError as exc:
            return str(exc)
    return found


def _check_messages(messages: Any) -> str | None:
    if messages is None:
        return None
    if not isinstance(messages, list):
        return "'input.messages' must be a list"
    if len(messages) > MAX_MESSAGES:
        return f"'input.messages' has {len(messages)} messages, over {MAX_MESSAGES}"
    for message in messages:
        text = message.get("content") if isinstance(message, dict) else message
        if len(str(text)) > MAX_MESSAGE_CHARS:
            return f"a message in 'input.messages' is over {MAX_MESSAGE_CHARS} characters"
    return None


def check_run_request(body: Any, base: Settings, client: str) -> str | None:
    """Return what is wrong with a run request, or None if it may go ahead. A collection
    the client may not read is refused exactly as one that does not exist."""
    if not isinstance(body, dict):
        return "the request body must be a JSON object"
    overrides = _overrides(body)
    if isinstance(overrides, str):
        return overrides
    if body.get("command") is not None:
        return "'command' is not accepted: this graph never pauses for input"
    payload = body.get("input")
    if not isinstance(payload, dict):
        return "'input' must be an object with a 'question' string"
    unknown = set(payload) - INPUT_FIELDS
    if unknown:
        hint = "config.configurable.user_id sets the trace's user"
        where = f" ({hint})" if "user_id" in unknown else ""
        return f"unknown input field(s) {sorted(unknown)}{where}; accepted: {sorted(INPUT_FIELDS)}"
    problem = _check_messages(payload.get("messages"))
    if problem:
        return problem
    question = payload.get("question")
    if not isinstance(question, str) or not question.strip():
        return "'input.question' is required and must be a non-empty string"
    try:  # the graph's own merge: base, then the request's settings, then the input's
        settings = settings_for({"configurable": {**overrides, SETTINGS_KEY: base}}, payload)
    except ConfigError as exc:
        return str(exc)
    if len(question) > settings.max_question_chars:
        return (
            f"'input.question' is {len(question)} characters, over "
            f"max_question_chars={settings.max_question_chars}"
        )
    readable = readable_collections(base, client)
    known = [c for c in list_collections(settings) if readable is None or c in readable]
    if settings.collection not in known:
        return (
            f"unknown collection {settings.collection!r}; known: {', '.join(known) or 'none'}"
            " (ingest with `rag ingest PATH --collection NAME`)"
        )
    return as_of_problem(settings) or budget_problem(settings)


def _refused(refusal: Refusal) -> JSONResponse:
    headers = {"Retry-After": str(refusal.retry_after_s)} if refusal.retry_after_s else None
    return JSONResponse({"detail": refusal.detail}, refusal.status, headers=headers)


class ValidateRuns(BaseHTTPMiddleware):
    """The early, friendly refusals. The same rules are enforced again behind it: by the
    auth handlers (server/auth.py) and by the graph where it reads (graph/configuration.py)."""

    async def dispatch(self, request: Request, call_next: RequestResponseEndpoint) -> Response:
        # the scope's path is what the router dispatches; request.url comes from the Host
        path, method = request.scope["path"], request.method
        route = route_of(method, path)
        if route is Route.CLOSED:
            return JSONResponse({"detail": f"{path} is not served here"}, 404)
        if route is Route.ASSISTANT_WRITE:
            return JSONResponse(
                {
                    "detail": "assistants are fixed by the operator; runs take per-request "
                    "settings in config.configurable"
                },
                403,
            )
        if route not in (Route.RUN, Route.CREATE_THREAD, Route.PATCH_THREAD, Route.CANCEL):
            return await call_next(request)
        try:
            body = parse_json(await request.body())
        except ValueError as exc:
            return JSONResponse({"detail": str(exc)}, 422)
        if route is Route.CANCEL and isinstance(body, dict) and body.get("status"):
            return JSONResponse(
                {
                    "detail": "cancelling by status reaches every client's runs: name "
                    "'thread_id' and 'run_ids' (or POST /threads/ID/runs/RUN/cancel)"
                },
                403,
            )
        if route is Route.CREATE_THREAD and isinstance(body, dict) and body.get("supersteps"):
            return JSONResponse(
                {"detail": "'supersteps' writes a thread's state: not accepted here"}, 422
            )
        base = service_settings()
        client = client_of(base, request.headers.get(API_KEY_HEADER, "")) or "anyone"
        if route is Route.RUN:  # reads the store: off the event loop
            problem = await run_in_threadpool(check_run_request, body, base, client)
            if problem:
                return JSONResponse({"detail": problem}, 422)
        if refusal := metadata_problem(body, base):
            return _refused(refusal)
        if route in (Route.RUN, Route.CREATE_THREAD):
            new_thread = route is Route.CREATE_THREAD or not path.startswith("/threads/")
            new_thread |= isinstance(body, dict) and body.get("if_not_exists") == "create"
            usage = await usage_of(client, base)
            is_run = route is Route.RUN
            if refusal := quota_problem(usage, base, new_thread=new_thread, run=is_run):
                return _refused(refusal)
        return await call_next(request)


class RequireApiKey(BaseHTTPMiddleware):
    """With keys configured (``api_key``, ``client_keys``), a request without one of them
    in the X-API-Key header gets a 401, on every route (server/auth.py then tells the
    LangGraph routes which client it is)."""

    async def dispatch(self, request: Request, call_next: RequestResponseEndpoint) -> Response:
        if client_of(service_settings(), request.headers.get(API_KEY_HEADER, "")) is None:
            return JSONResponse(
                {"detail": f"missing or wrong {API_KEY_HEADER} header"},
                401,
                headers={"WWW-Authenticate": API_KEY_HEADER},
            )
        return await call_next(request)


# What a request meets while the database is down or restarting: each is a 503 with
# Retry-After, not a 500.
UNREACHABLE: tuple[type[BaseException], ...] = (DatabaseError, psycopg.OperationalError)
RETRY_AFTER_S = 5


class DatabaseDown(BaseHTTPMiddleware):
    """While the database cannot be reached: a 503 that says so, with ``Retry-After``.
    Nothing needs a restart afterwards: pooled connections are checked before they are
    lent (tools/store/postgres.py), and an open collection whose connection died is
    opened again (Collection.outdated)."""

    async def dispatch(self, request: Request, call_next: RequestResponseEndpoint) -> Response:
        try:
            return await call_next(request)
        except UNREACHABLE as exc:
            return await database_down(request, exc)


async def database_down(_: Request, exc: Exception) -> JSONResponse:
    """The 503 of both servers (also `rag ui`'s handler of ``DatabaseError``)."""
    return JSONResponse(
        {"detail": f"the service's database cannot be reached, retry shortly: {exc}"},
        503,
        headers={"Retry-After": str(RETRY_AFTER_S)},
    )


async def healthz(_: Request) -> JSONResponse:
    """Up or not, and nothing else: collection names are for the clients that may read them."""
    return JSONResponse({"ok": True})


app = Starlette(routes=[routing.Route("/healthz", healthz)])
app.add_middleware(ValidateRuns)
app.add_middleware(RequireApiKey)
app.add_middleware(DatabaseDown)
app.add_middleware(  # added last, so it runs first
    HttpGuard,
    settings=service_settings,
    max_body=MAX_BODY_BYTES,
)
