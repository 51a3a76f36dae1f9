"""HTTP additions to the LangGraph server: request validation that answers 4xx, and /healthz.

The LangGraph server accepts any JSON as a run's input and would only fail inside the
run; this middleware checks run-creating requests first, so a bad request gets a 422
that says what is wrong and the server never starts a doomed run.
"""

from __future__ import annotations

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
INPUT_FIELDS = {"question", "messages", "collection", "k", "rerank", "user_id"}
RERANKERS = ("none", "llm", "cross-encoder", "litellm")


def check_run_request(body: Any, base: Settings) -> str | None:
    """Return what is wrong with a run request, or None if it may go ahead."""
    if not isinstance(body, dict):
        return "the request body must be a JSON object"
    if body.get("command") is not None and body.get("input") is None:
        return None  # resuming an interrupted run carries no new question
    payload = body.get("input")
    if not isinstance(payload, dict):
        return "'input' must be an object with a 'question' string"
    unknown = set(payload) - INPUT_FIELDS
    if unknown:
        return f"unknown input field(s) {sorted(unknown)}; accepted: {sorted(INPUT_FIELDS)}"
    question = payload.get("question")
    if not isinstance(question, str) or not question.strip():
        return "'input.question' is required and must be a non-empty string"
    configurable = (body.get("config") or {}).get("configurable") or {}
    if not isinstance(configurable, dict):
        return "'config.configurable' must be an object"
    overrides = {k: v for k, v in configurable.items() if k in Settings.model_fields}
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
        if request.method == "POST" and RUN_PATHS.match(request.url.path):
            try:
                body = json.loads(await request.body() or b"null")
            except (json.JSONDecodeError, UnicodeDecodeError) as exc:
                return JSONResponse({"detail": f"request body is not valid JSON: {exc}"}, 422)
            problem = check_run_request(body, load_settings())
            if problem:
                return JSONResponse({"detail": problem}, 422)
        return await call_next(request)


async def healthz(_: Request) -> JSONResponse:
    settings = load_settings()
    return JSONResponse({"ok": True, "collections": list_collections(settings)})


app = Starlette(routes=[Route("/healthz", healthz)])
app.add_middleware(ValidateRuns)
