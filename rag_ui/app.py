"""The chat page's HTTP app: the page itself, conversations, streamed answers and flags.

Routes (JSON in, JSON or Server-Sent Events out; junk gets a 4xx with the reason):

- ``GET /`` and ``/static/*``: one HTML, one JS and one CSS file shipped in this
  package; nothing is fetched from another host (the page's CSP forbids it).
- ``GET /api/options``: collections, defaults and limits for the page's controls.
- ``POST /api/sessions``: a new conversation (a graph thread).
- ``GET /api/sessions/{id}``: a conversation's answered exchanges, so a reloaded tab
  shows it again and goes on with it (404 once it expired or the process restarted).
- ``POST /api/ask``: one question, streamed as events: ``start``, ``step`` per node,
  ``token`` per generated token (the generator only), then ``answer`` with the whole
  exchange, or ``error``.
- ``POST /api/flag``: store an answered exchange with the user's comment.

Per-question settings (collection, k, rerank) pass through the LangGraph server's
allow-list and validation (``server.app.check_run_request``), so the page can
change nothing a server request could not.
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from langgraph.checkpoint.memory import InMemorySaver
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, Response, StreamingResponse
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from graph import build_graph, config_for
from graph.configuration import PER_QUESTION_FIELDS
from graph.draft import DRAFT, DRAFT_RESET, STEP, StepClock
from graph.services import Services
from rag_ui.exchange import PromptRecorder, build_exchange
from rag_ui.flags import MAX_COMMENT_CHARS, FlagError, check_comment, flag_store
from rag_ui.sessions import Session, Sessions
from rag_ui.token import RequireToken
from server.app import check_run_request, database_down
from server.http_guard import HttpGuard, parse_json
from tools import tracing
from tools.config import OPERATOR, Settings, choices
from tools.store import UNREACHABLE
from tools.store.backends import backend
from tools.store.collection import list_collections

log = logging.getLogger(__name__)
STATIC = Path(__file__).parent / "static"
MAX_BODY_BYTES = 64_000
TOGGLES = PER_QUESTION_FIELDS  # what the page may change for one question
ASK_FIELDS = frozenset({"session", "question", *TOGGLES})
FLAG_FIELDS = frozenset({"session", "exchange", "comment"})
PAGE_HEADERS = {
    "Content-Security-Policy": "default-src 'self'; img-src 'self' data:",
    "X-Content-Type-Options": "nosniff",
    "Cache-Control": "no-store",
}


class BadRequest(Exception):
    def __init__(self, status: int, detail: str) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail


async def _bad_request(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, BadRequest)
    return JSONResponse({"detail": exc.detail}, exc.status)


async def _body(request: Request, fields: frozenset[str]) -> dict[str, Any]:
    """The request's JSON object. Requiring the JSON content type also keeps other sites'
    plain form posts out: a cross-site JSON POST needs a CORS preflight we never grant."""
    if request.headers.get("content-type", "").split(";")[0].strip() != "application/json":
        raise BadRequest(415, "send a JSON body with Content-Type: application/json")
    try:  # HttpGuard has capped the body at MAX_BODY_BYTES already
        body = parse_json(await request.body())
    except ValueError as exc:
        raise BadRequest(422, str(exc)) from None
    if not isinstance(body, dict):
        raise BadRequest(422, "the request body must be a JSON object")
    unknown = sorted(set(body) - fields)
    if unknown:
        raise BadRequest(422, f"unknown field(s) {unknown}; accepted: {sorted(fields)}")
    return body


def _event(name: str, data: dict[str, Any]) -> str:
    return f"event: {name}\ndata: {json.dumps(data, default=str)}\n\n"


class ChatApp:
    """The page's state: settings, one graph with an in-memory checkpointer, sessions,
    the flag log."""

    def __init__(self, settings: Settings, services: Services | None = None) -> None:
        self.settings = settings
        self.services = services
        checkpointer = InMemorySaver()
        self.graph = build_graph(checkpointer=checkpointer)
        self.sessions = Sessions(checkpointer, backend(settings).session_log(settings))
        self.flags = flag_store(settings)

    async def _session(self, body: dict[str, Any]) -> Session:
        # off the event loop: with store = postgres the session may be read from there
        session = await run_in_threadpool(self.sessions.get, body.get("session"))
        if session is None:
            raise BadRequest(404, "unknown or expired session; reload the page")
        return session

    async def index(self, _: Request) -> Response:
        return FileResponse(STATIC / "index.html", headers=PAGE_HEADERS)

    async def options(self, _: Request) -> JSONResponse:
        s = self.settings
        usable = [r for r in choices("rerank") if r in ("none", "llm") or s.rerank_model]
        return JSONResponse(
            {
                "collections": await run_in_threadpool(list_collections, s),
                "collection": s.collection,
                "k": s.k,
                "k_max": Settings.model_fields["k"].metadata[1].le,
                "rerank": s.rerank,
                "rerankers": usable,
                "max_question_chars": s.max_question_chars,
                "max_comment_chars": MAX_COMMENT_CHARS,
                "models": {
                    "generator": s.generator_model,
                    "verifier": s.verifier_model,
                    "query": s.query_model,
                },
                "tracing": tracing.mode(s),
            }
        )

    async def new_session(self, _: Request) -> JSONResponse:
        return JSONResponse({"session": self.sessions.new().id}, 201)

    async def session(self, request: Request) -> JSONResponse:
        session = await self._session({"session": request.path_params["session"]})
        return JSONResponse({"session": session.id, "exchanges": list(session.exchanges.values())})

    async def ask(self, request: Request) -> Response:
        body = await _body(request, ASK_FIELDS)
        session = await self._session(body)
        toggles = {k: body[k] for k in TOGGLES if body.get(k) not in (None, "")}
        question = body.get("question")
        # the page is the operator's own (its token is the operator's): every collection
        problem = await run_in_threadpool(  # reads the collection list: off the event loop
            check_run_request, {"input": {"question": question, **toggles}}, self.settings, OPERATOR
        )
        if problem:
            raise BadRequest(422, problem.replace("'input.", "'"))
        if session.busy:
            raise BadRequest(409, "this conversation is still answering the previous question")
        valid = Settings(**{**self.settings.model_dump(), **toggles})  # "3" -> 3, as validated
        toggles = {key: getattr(valid, key) for key in toggles}
        return StreamingResponse(
            self._answer(session, question.strip(), toggles),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
        )

    async def _answer(
        self, session: Session, question: str, toggles: dict[str, Any]
    ) -> AsyncIterator[str]:
        if not self.sessions.claim(session):
            yield _event("error", {"message": "this conversation is still answering"})
            return
        try:
            async for event in self._run(session, question, toggles):
                yield event
        finally:
            self.sessions.release(session)

    async def _run(
        self, session: Session, question: str, toggles: dict[str, Any]
    ) -> AsyncIterator[str]:
        s = self.settings
        used = {"collection": s.collection, "k": s.k, "rerank": s.rerank, **toggles}
        config = config_for(s, thread_id=session.id, **toggles)
        recorder = PromptRecorder()
        config["callbacks"] = [*(config.get("callbacks") or []), recorder]
        history = (await self.graph.aget_state(config)).values.get("messages") or []
        inputs: dict[str, Any] = {"question": question}
        if not history and session.restored:  # after a restart: the saved turns come back
            history = inputs["messages"] = session.history()
        started, first_token = time.perf_counter(), None
        clock = StepClock()
        yield _event("start", {"question": question, "settings": used})
        try:
            async for mode, chunk in self.graph.astream(
                inputs,
                config,
                stream_mode=["updates", "custom"],
                context=self.services,
            ):
                if mode == "updates":
                    for node, update in chunk.items():
                        seconds = clock.seconds(node, update)
                        seconds = None if seconds is None else round(seconds, 4)
                        yield _event("step", {"node": node, "seconds": seconds})
                elif chunk.get("kind") == STEP:  # graph/draft.py: what runs now
                    yield _event("running", {"node": chunk["node"]})
                elif chunk.get("kind") == DRAFT:
                    first_token = first_token or time.perf_counter() - started
                    yield _event("token", {"text": chunk["text"], "call": chunk["attempt"]})
                elif chunk.get("kind") == DRAFT_RESET:
                    yield _event("draft_reset", {"call": chunk["attempt"]})
        except ValueError as exc:  # input the graph refuses, a configuration problem
            yield _event("error", {"message": str(exc)})
            return
        except Exception as exc:  # a model that cannot load: say so on the page
            log.exception("answering %r failed", question)
            yield _event("error", {"message": f"{type(exc).__name__}: {exc}"})
            return
        timings = {"total": round(time.perf_counter() - started, 3)}
        if first_token is not None:
            timings["first_token"] = round(first_token, 3)
        state = (await self.graph.aget_state(config)).values
        exchange = build_exchange(
            uuid.uuid4().hex, question, history, state, recorder, used, timings
        )
        session.remember(exchange)
        await run_in_threadpool(self.sessions.save, session)
        yield _event("answer", exchange)

    async def flag(self, request: Request) -> JSONResponse:
        body = await _body(request, FLAG_FIELDS)
        session = await self._session(body)
        exchange_id = body.get("exchange")
        exchange = session.exchanges.get(exchange_id) if isinstance(exchange_id, str) else None
        if exchange is None:
            raise BadRequest(404, "unknown answer: only this conversation's answers can be flagged")
        try:
            comment = check_comment(body.get("comment"))
            flag_id = await run_in_threadpool(self.flags.add, exchange, comment)
        except FlagError as exc:
            raise BadRequest(422, str(exc)) from None
        scored = bool(tracing.client(self.settings) and exchange.get("trace_id"))
        if scored:  # Langfuse, or the local sink as `rag feedback` does
            tracing.score(self.settings, exchange["trace_id"], "user_flag", 0, comment or None)
        return JSONResponse({"id": flag_id, "trace_scored": scored}, 201)


def create_app(
    settings: Settings, token: str | None = None, services: Services | None = None
) -> Starlette:
    """The page for these settings (the ones every other entry point loads); with
    ``token``, only for browsers that opened the URL carrying it (rag_ui/token.py);
    ``services`` as for ``rag_cli.main``."""
    chat = ChatApp(settings, services)
    app = Starlette(
        routes=[
            Route("/", chat.index),
            Route("/api/options", chat.options),
            Route("/api/sessions", chat.new_session, methods=["POST"]),
            Route("/api/sessions/{session}", chat.session),
            Route("/api/ask", chat.ask, methods=["POST"]),
            Route("/api/flag", chat.flag, methods=["POST"]),
            Mount("/static", StaticFiles(directory=STATIC), name="static"),
        ],
        exception_handlers={BadRequest: _bad_request, **dict.fromkeys(UNREACHABLE, database_down)},
    )
    if token:
        app.add_middleware(RequireToken, token=token)
    app.add_middleware(  # added last, so it runs first: Host and Origin before the token
        HttpGuard,
        settings=lambda: settings,
        max_body=MAX_BODY_BYTES,
    )
    app.state.chat = chat
    return app
