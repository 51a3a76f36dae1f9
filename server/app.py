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
guard does not know still cannot change them. Only the routes in server/routes.py's
table are served: any other answers 404 before a handler runs (crons, batches, state
writes, the store, MCP, A2A, the v2 and WebSocket routes, ``langgraph dev``'s
``/internal/*`` and ``/deploy``), and webhooks are refused. With keys configured
(``api_key``, ``client_keys``; ``rag serve`` generates one on loopback), every route the
table does not open to anyone needs one in the ``X-API-Key`` header.

Several clients on one server (``client_keys``): each reads only the collections
``client_collections`` gives it (another's is refused as an unknown one), cancels only
runs on its own threads, and is held to its quotas (server/quotas.py).
"""

from __future__ import annotations

from typing import Any

from starlette import routing
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.middleware.base import BaseHTTPMiddleware, RequestResponseEndpoint
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from graph.budget import budget_problem
from graph.configuration import PER_QUESTION_FIELDS, SETTINGS_KEY, run_settings
from server.answers import collection_problem
from server.api_keys import key_of
from server.http_guard import (
    ASGIApp,
    HttpGuard,
    Receive,
    Scope,
    Send,
    headers_of,
    parse_json,
    refuse,
)
from server.integrations import ROUTES as INTEGRATIONS
from server.integrations import lifespan
from server.limits import run_problem
from server.quotas import Refusal, metadata_problem, quota_problem, records
from server.routes import Kind, may_call, served
from tools.config import (
    ConfigError,
    Settings,
    client_of,
    load_settings,
    request_overrides,
)
from tools.store import UNREACHABLE
from tools.store.collection import as_of_problem

API_KEY_HEADER = "X-API-Key"
MAX_BODY_BYTES = 1_000_000
INPUT_FIELDS = {"question", "messages", *PER_QUESTION_FIELDS}


def _overrides(body: dict[str, Any]) -> dict[str, Any] | str:
    """The settings a request overrides (config.configurable, context, checkpoint), or
    what is wrong."""
    config = body.get("config") or {}
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


def check_run_request(body: Any, base: Settings, client: str) -> str | None:
    """Return what is wrong with a run request, or None if it may go ahead. A collection
    the client may not read is refused exactly as one that does not exist."""
    if not isinstance(body, dict):
        return "the request body must be a JSON object"
    if problem := run_problem(body):  # config keys, webhook, command, messages
        return problem
    overrides = _overrides(body)
    if isinstance(overrides, str):
        return overrides
    payload = body.get("input")
    if not isinstance(payload, dict):
        return "'input' must be an object with a 'question' string"
    unknown = set(payload) - INPUT_FIELDS
    if unknown:
        hint = "config.configurable.user_id sets the trace's user"
        where = f" ({hint})" if "user_id" in unknown else ""
        return f"unknown input field(s) {sorted(unknown)}{where}; accepted: {sorted(INPUT_FIELDS)}"
    question = payload.get("question")
    if not isinstance(question, str) or not question.strip():
        return "'input.question' is required and must be a non-empty string"
    try:  # the graph's own merge: base, then the request's settings, then the input's
        settings = run_settings({"configurable": {**overrides, SETTINGS_KEY: base}}, payload)
    except ConfigError as exc:
        return str(exc)
    if len(question) > settings.max_question_chars:
        return (
            f"'input.question' is {len(question)} characters, over "
            f"max_question_chars={settings.max_question_chars}"
        )
    return (
        collection_problem(settings, client) or as_of_problem(settings) or budget_problem(settings)
    )


def _refused(refusal: Refusal) -> JSONResponse:
    headers = {"Retry-After": str(refusal.retry_after_s)} if refusal.retry_after_s else None
    return JSONResponse({"detail": refusal.detail}, refusal.status, headers=headers)


class ValidateRuns(BaseHTTPMiddleware):
    """The early, friendly refusals. The same rules are enforced again behind it: by the
    auth handlers (server/auth.py) and by the graph where it reads (graph/configuration.py)."""

    async def dispatch(self, request: Request, call_next: RequestResponseEndpoint) -> Response:
        row = served(request.scope)  # the scope's path: what the router dispatches
        kind = row.kind if row else None
        if kind not in (Kind.RUN, Kind.CREATE_THREAD, Kind.PATCH_THREAD, Kind.CANCEL):
            return await call_next(request)
        try:
            body = parse_json(await request.body())
        except ValueError as exc:
            return JSONResponse({"detail": str(exc)}, 422)
        if kind is Kind.CANCEL and isinstance(body, dict) and body.get("status"):
            return JSONResponse(
                {
                    "detail": "cancelling by status reaches every client's runs: name "
                    "'thread_id' and 'run_ids' (or POST /threads/ID/runs/RUN/cancel)"
                },
                403,
            )
        if kind is Kind.CREATE_THREAD and isinstance(body, dict) and body.get("supersteps"):
            return JSONResponse(
                {"detail": "'supersteps' writes a thread's state: not accepted here"}, 422
            )
        base = load_settings()
        client = client_of(base, key_of(request.headers)) or "anyone"
        if kind is Kind.RUN:  # reads the store: off the event loop
            problem = await run_in_threadpool(check_run_request, body, base, client)
            if problem:
                return JSONResponse({"detail": problem}, 422)
        if refusal := metadata_problem(body, base):
            return _refused(refusal)
        if kind in (Kind.RUN, Kind.CREATE_THREAD):
            path = request.scope["path"]
            new_thread = kind is Kind.CREATE_THREAD or not path.startswith("/threads/")
            new_thread |= isinstance(body, dict) and body.get("if_not_exists") == "create"
            usage = await records(base).usage(client)
            is_run = kind is Kind.RUN
            if refusal := quota_problem(usage, base, new_thread=new_thread, run=is_run):
                return _refused(refusal)
        return await call_next(request)


class ServedRoutesOnly:
    """The door's route and key checks, for HTTP and WebSocket alike: a request no row
    of server/routes.py's table serves answers 404 before any handler runs; one the
    table serves needs the key its row asks for (401 without a valid one, 403 for a
    client's key on an operator's route). Server/auth.py then tells the LangGraph
    routes which client it is."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)  # lifespan
            return
        row = served(scope)
        if row is None:
            await refuse(scope, receive, send, 404, f"{scope['path']} is not served here")
            return
        key = key_of(headers_of(scope))
        client = client_of(load_settings(), key)
        if not may_call(row, client):
            if client is None:
                detail, status = f"missing or wrong {API_KEY_HEADER} header", 401
            else:
                detail, status = f"{row.template} is for the operator's key", 403
            challenge = [(b"www-authenticate", API_KEY_HEADER.encode())] if status == 401 else []
            await refuse(scope, receive, send, status, detail, challenge)
            return
        await self.app(scope, receive, send)


# What a request meets while the store is down or restarting (tools.store.UNREACHABLE):
# each is a 503 with Retry-After, not a 500.
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
    """The 503 of both servers (also `rag ui`'s handler of ``UNREACHABLE``)."""
    return JSONResponse(
        {"detail": f"the service's database cannot be reached, retry shortly: {exc}"},
        503,
        headers={"Retry-After": str(RETRY_AFTER_S)},
    )


async def healthz(_: Request) -> JSONResponse:
    """Up or not, and nothing else: collection names are for the clients that may read them."""
    return JSONResponse({"ok": True})


app = Starlette(routes=[routing.Route("/healthz", healthz), *INTEGRATIONS], lifespan=lifespan)
app.add_middleware(ValidateRuns)
app.add_middleware(DatabaseDown)
app.add_middleware(ServedRoutesOnly)
app.add_middleware(  # added last, so it runs first
    HttpGuard,
    settings=load_settings,
    max_body=MAX_BODY_BYTES,
)
