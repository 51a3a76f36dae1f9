"""HTTP additions to the LangGraph server: an API key, request validation, and /healthz.

The LangGraph server accepts any JSON as a run's input and would only fail inside the
run; this middleware checks run-creating requests first, so a bad request gets a 422
that says what is wrong and the server never starts a doomed run.

A request may only tune how a question is answered (``REQUEST_SETTINGS``): settings
that name files, hosts or models (``data_dir``, ``chroma_host``, ``generator_model``...)
stay as the server was started, so no request can read outside the data directory or
point the server at another host. With ``api_key`` set, every request must carry it
in the ``X-API-Key`` header.
"""

from __future__ import annotations

import hmac
import json
import re
from typing import Any

from starlette.applications import Starlette
from starlette.middleware.base import BaseHTTPMiddleware, RequestResponseEndpoint
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from tools.collection import list_collections
from tools.config import ConfigError, Settings, load_settings

RUN_PATHS = re.compile(r"^(/threads/[^/]+)?/runs(/wait|/stream)?/?$")
ASSISTANT_PATHS = re.compile(r"^/assistants(/[^/]+)?/?$")
API_KEY_HEADER = "X-API-Key"
REQUEST_SETTINGS = frozenset(
    {
        "collection",
        "k",
        "fetch_k",
        "distance_threshold",
        "hybrid_weight",
        "retrieval_strategy",
        "window",
        "dedup_similarity",
        "multi_query",
        "rerank",
        "rerank_keep",
        "answer_style",
        "max_regenerations",
        "on_unverified",
        "answer_check_threshold",
    }
)
INPUT_FIELDS = {"question", "messages", "collection", "k", "rerank"}
RERANKERS = ("none", "llm", "cross-encoder", "litellm")


def _overrides(body: dict[str, Any]) -> dict[str, Any] | str:
    """The settings a request overrides (config.configurable and context), or what is wrong."""
    config = body.get("config") or {}
    if not isinstance(config, dict):
        return "'config' must be an object"
    found: dict[str, Any] = {}
    for where, values in (
        ("config.configurable", config.get("configurable")),
        ("context", body.get("context")),
    ):
        values = values or {}
        if not isinstance(values, dict):
            return f"'{where}' must be an object"
        fixed = sorted(set(values) & set(Settings.model_fields) - REQUEST_SETTINGS)
        if fixed:
            return (
                f"'{where}' may not set {fixed}: they are fixed when the server starts; "
                f"a request may set {sorted(REQUEST_SETTINGS)}"
            )
        found.update({k: v for k, v in values.items() if k in Settings.model_fields})
    return found


def check_assistant_request(body: Any) -> str | None:
    """Assistants carry a config for all their runs: the same rules as a run's."""
    if not isinstance(body, dict):
        return "the request body must be a JSON object"
    problem = _overrides(body)
    return problem if isinstance(problem, str) else None


def check_run_request(body: Any, base: Settings) -> str | None:
    """Return what is wrong with a run request, or None if it may go ahead."""
    if not isinstance(body, dict):
        return "the request body must be a JSON object"
    overrides = _overrides(body)
    if isinstance(overrides, str):
        return overrides
    if body.get("command") is not None and body.get("input") is None:
        return None  # resuming an interrupted run carries no new question
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
    for key in ("collection", "k", "rerank"):
        if key in payload:
            overrides[key] = payload[key]
    try:
        settings = load_settings({**base.model_dump(), **overrides})
    except ConfigError as exc:
        return str(exc)
    if len(question) > settings.max_question_chars:
        return (
            f"'input.question' is {len(question)} characters, over "
            f"max_question_chars={settings.max_question_chars}"
        )
    known = list_collections(settings)
    if settings.collection not in known:
        return (
            f"unknown collection {settings.collection!r}; known: {', '.join(known) or 'none'}"
            " (ingest with `rag ingest PATH --collection NAME`)"
        )
    return None


class ValidateRuns(BaseHTTPMiddleware):
    async def dispatch(self, request: Request, call_next: RequestResponseEndpoint) -> Response:
        path = request.url.path
        is_run = request.method == "POST" and RUN_PATHS.match(path)
        is_assistant = request.method in ("POST", "PATCH") and ASSISTANT_PATHS.match(path)
        if is_run or is_assistant:
            try:
                body = json.loads(await request.body() or b"null")
            except (json.JSONDecodeError, UnicodeDecodeError) as exc:
                return JSONResponse({"detail": f"request body is not valid JSON: {exc}"}, 422)
            if is_run:
                problem = check_run_request(body, load_settings())
            else:
                problem = check_assistant_request(body)
            if problem:
                return JSONResponse({"detail": problem}, 422)
        return await call_next(request)


class RequireApiKey(BaseHTTPMiddleware):
    """With ``api_key`` set, a request without the right X-API-Key header gets a 401."""

    async def dispatch(self, request: Request, call_next: RequestResponseEndpoint) -> Response:
        expected = load_settings().api_key
        given = request.headers.get(API_KEY_HEADER, "")
        if expected and not hmac.compare_digest(given.encode(), expected.encode()):
            return JSONResponse(
                {"detail": f"missing or wrong {API_KEY_HEADER} header"},
                401,
                headers={"WWW-Authenticate": API_KEY_HEADER},
            )
        return await call_next(request)


async def healthz(_: Request) -> JSONResponse:
    settings = load_settings()
    return JSONResponse({"ok": True, "collections": list_collections(settings)})


app = Starlette(routes=[Route("/healthz", healthz)])
app.add_middleware(ValidateRuns)
app.add_middleware(RequireApiKey)  # added last, so it runs first
