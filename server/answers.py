"""A question from an outside door (MCP, the OpenAI-compatible chat route) and the answer
it gets back, in the shape both doors share.

Why the server path goes through LangGraph's own runs API: that is where every rule
about a client already holds. ``ServerAsker`` sends the question as a stateless run
(``POST /runs/stream``) to the server's own app, in process, with the client's own key:
the same door (Host/Origin, the served-routes table, the run checks and quotas in
server/app.py), the same auth handlers (owner, the reserved run place, server/auth.py)
and the same graph (which refuses a collection the client may not read and settings
over the model-call budget, graph/configuration.py). Nothing here re-implements a rule.

``LocalAsker`` answers in this process, as the operator: ``rag mcp`` for a desktop
client that starts a local process, like ``rag ask``.

A model that failed is not an answer: ``reply_of`` raises ``Refused`` (502), which each
door turns into its own error shape.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncGenerator, AsyncIterator
from dataclasses import dataclass, field
from typing import Any, Protocol

import anyio
from pydantic import BaseModel, ConfigDict, Field, create_model
from typing_extensions import TypedDict

from graph.configuration import AUTH_USER_KEY, SETTINGS_KEY, AccessRefused, run_settings
from graph.results import Citation, Closest, Outcome, Support
from graph.services import Services
from server.api_keys import API_KEY_HEADER
from server.routes import GRAPH_ID
from tools.config import REQUEST_SETTINGS, ConfigError, Settings, readable_collections
from tools.store.collection import list_collections

RUN_GONE_S = 5  # how long a run whose client went away has to stop before it is cancelled
# what a client reads as the outcome: the product's words for graph/results.py's Outcome
OUTCOME_WORDS: dict[str, str] = {
    "verified": "verified",
    "not_verified": "not verified",
    "not_in_documents": "the documents do not say",
    "abstained": "abstained",
}


def _question_settings() -> type[BaseModel]:
    """The settings a client may set for one question, as a typed model (derived from
    ``Settings``: each field's type and description); anything else is refused."""
    fields: dict[str, Any] = {
        name: (
            Settings.model_fields[name].annotation | None,
            Field(None, description=Settings.model_fields[name].description),
        )
        for name in sorted(REQUEST_SETTINGS - {"collection"})
    }
    return create_model("QuestionSettings", __config__=ConfigDict(extra="forbid"), **fields)


QuestionSettings = _question_settings()


class Refused(Exception):
    """The question was refused or could not be answered: an HTTP status and why."""

    def __init__(self, status: int, detail: str) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail


@dataclass(frozen=True)
class Ask:
    """One question: its earlier turns (oldest first) and the settings a client may set
    for it (tools.config.REQUEST_SETTINGS; ``collection`` among them)."""

    question: str
    history: list[dict[str, str]] = field(default_factory=list)
    settings: dict[str, Any] = field(default_factory=dict)


class Reply(TypedDict):
    """What both doors return: the answer with its [n] markers, its outcome, and what it
    rests on (graph/results.py declares the parts)."""

    answer: str
    outcome: Outcome
    outcome_words: str  # verified / not verified / the documents do not say / abstained
    reason: str | None  # why a not-verified answer is not verified
    references: list[str]  # "[n] source, lines a-b", as `rag ask` prints them
    citations: list[Citation]
    support: list[Support]  # each statement's quoted support
    closest: list[Closest]  # when the documents do not say: the nearest sentences
    queries: list[str]  # what was searched for (a follow-up rephrased with its history)
    collection: str


def reply_of(out: dict[str, Any]) -> Reply:
    """The reply from a run's final state; ``Refused`` (502) when a model failed and no
    answer came of it (what makes `rag ask` exit 1)."""
    error = out.get("error")
    if error and out.get("abstained"):
        raise Refused(
            502, f"a model failed ({error['type']} in {error['stage']}): {error['message']}"
        )
    outcome = out.get("outcome") or "abstained"
    return Reply(
        answer=out.get("answer") or "",
        outcome=outcome,
        outcome_words=OUTCOME_WORDS[outcome],
        reason=out.get("reason"),
        references=list(out.get("references") or []),
        citations=list(out.get("citations") or []),
        support=list(out.get("support") or []),
        closest=list(out.get("closest") or []),
        queries=list(out.get("queries") or []),
        collection=str((out.get("retrieval") or {}).get("collection") or ""),
    )


def reply_text(reply: Reply) -> str:
    """The reply as a reader sees it: the answer, its references block, the outcome."""
    parts = [reply["answer"].strip()]
    if reply["references"]:
        parts.append("References:\n" + "\n".join(reply["references"]))
    outcome = f"Outcome: {reply['outcome_words']}"
    if reply["reason"]:
        outcome += f" ({reply['reason']})"
    return "\n\n".join([*parts, outcome])


def client_settings(base: Settings, client: str | None, overrides: dict[str, Any]) -> Settings:
    """The settings a question runs with for ``client`` (None: the operator, in
    process), checked where runs are checked (graph/configuration.py): only request
    settings, a collection the client may read, within the model-call budget."""
    configurable = dict(overrides)
    if client is None:
        configurable[SETTINGS_KEY] = base
    else:
        configurable[AUTH_USER_KEY] = client
    try:
        return run_settings({"configurable": configurable})
    except AccessRefused as exc:
        raise Refused(404, str(exc)) from None
    except ConfigError as exc:
        raise Refused(422, str(exc)) from None


def known_collections(settings: Settings, client: str | None) -> list[str]:
    """The collections that exist and ``client`` may read (None: the operator)."""
    readable = None if client is None else readable_collections(settings, client)
    return [c for c in list_collections(settings) if readable is None or c in readable]


def collection_problem(settings: Settings, client: str | None) -> str | None:
    """Why ``settings.collection`` cannot be read by ``client``, or None: a collection it
    may not read is refused exactly as one that does not exist (the run door's words)."""
    known = known_collections(settings, client)
    if settings.collection in known:
        return None
    return (
        f"unknown collection {settings.collection!r}; known: {', '.join(known) or 'none'}"
        " (ingest with `rag ingest PATH --collection NAME`)"
    )


def open_collection(settings: Settings, client: str | None) -> Settings:
    """``settings`` when its collection exists and the client may read it, else 404."""
    if problem := collection_problem(settings, client):
        raise Refused(404, problem)
    return settings


# What a run streams: the name of each step as it finishes, then the reply.
Event = str | Reply


class Asker(Protocol):
    def events(self, ask: Ask) -> AsyncGenerator[Event, None]: ...


async def final_reply(events: AsyncIterator[Event]) -> Reply:
    """The reply at the end of a run's events."""
    async for event in events:
        if not isinstance(event, str):
            return event
    raise Refused(502, "the run ended without an answer")


async def answer(asker: Asker, ask: Ask) -> Reply:
    return await final_reply(asker.events(ask))


@dataclass(frozen=True)
class ServerAsker:
    """Questions as runs of the server's own graph, sent with the client's key to
    ``app``: the application that received the request (``scope["app"]``), which in
    ``rag serve`` is the whole server, door and LangGraph routes."""

    key: str
    app: Any

    async def events(self, ask: Ask) -> AsyncGenerator[Event, None]:
        body = {
            "assistant_id": GRAPH_ID,
            "input": {"question": ask.question, "messages": ask.history},
            "config": {"configurable": ask.settings},
            "stream_mode": ["updates", "values"],
            "on_disconnect": "cancel",
        }
        headers = {API_KEY_HEADER: self.key} if self.key else {}
        response = _asgi_post(self.app, "/runs/stream", json.dumps(body).encode(), headers)
        try:
            start = await anext(response)
            if start["status"] != 200:
                raise Refused(
                    start["status"], _detail(b"".join([c async for c in _body(response)]))
                )
            final: dict[str, Any] = {}
            async for kind, data in _sse(_lines(_body(response))):
                if kind == "updates" and isinstance(data, dict):
                    for node in data:
                        yield node
                elif kind == "values" and isinstance(data, dict):
                    final = data
                elif kind == "error":
                    message = data.get("message") if isinstance(data, dict) else data
                    raise Refused(502, f"the run failed: {message}")
        finally:
            await response.aclose()  # a client gone mid-run: the run is cancelled
        yield reply_of(final)


async def _asgi_post(
    app: Any, path: str, body: bytes, headers: dict[str, str]
) -> AsyncIterator[dict[str, Any]]:
    """POST ``body`` to the ASGI ``app`` in this process and yield the messages it
    sends back as they come (a streamed response streams). Closing this generator
    tells the app its client went away."""
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": [
            (b"host", b"127.0.0.1"),
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
            *((k.lower().encode(), v.encode("latin-1")) for k, v in headers.items()),
        ],
        "client": ("127.0.0.1", 0),
        "server": ("127.0.0.1", 80),
    }
    messages: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue()
    gone = asyncio.Event()
    delivered = False

    async def receive() -> dict[str, Any]:
        nonlocal delivered
        if not delivered:
            delivered = True
            return {"type": "http.request", "body": body, "more_body": False}
        await gone.wait()
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        await messages.put(message)

    task = asyncio.create_task(app(scope, receive, send))
    task.add_done_callback(lambda _: messages.put_nowait(None))
    try:
        while (message := await messages.get()) is not None:
            if message["type"] == "http.response.start":
                yield message
            elif message["type"] == "http.response.body":
                yield message
                if not message.get("more_body"):
                    break
        if task.done() and task.exception() is not None:
            raise task.exception()
    finally:
        gone.set()
        if not task.done():
            await asyncio.wait({task}, timeout=RUN_GONE_S)
            task.cancel()


async def _body(response: AsyncIterator[dict[str, Any]]) -> AsyncIterator[bytes]:
    async for message in response:
        yield message.get("body", b"")


async def _lines(chunks: AsyncIterator[bytes]) -> AsyncIterator[str]:
    pending = ""
    async for chunk in chunks:
        pending += chunk.decode("utf-8")
        *lines, pending = pending.split("\n")
        for line in lines:
            yield line.rstrip("\r")
    if pending:
        yield pending


def _detail(raw: bytes) -> str:
    try:
        body = json.loads(raw)
    except ValueError:
        return raw.decode("utf-8", "replace")
    return str(body.get("detail", body)) if isinstance(body, dict) else str(body)


async def _sse(lines: AsyncIterator[str]) -> AsyncIterator[tuple[str, Any]]:
    """(event, decoded data) pairs of a server-sent event stream."""
    kind, data = "", []
    async for line in lines:
        if line.startswith("event:"):
            kind = line[6:].strip()
        elif line.startswith("data:"):
            data.append(line[5:].strip())
        elif not line and kind:
            yield kind, json.loads("\n".join(data) or "null")
            kind, data = "", []


@dataclass
class LocalAsker:
    """Questions answered in this process as the operator (``rag mcp``), with its
    services (a test passes fakes)."""

    services: Services
    base: Settings

    async def events(self, ask: Ask) -> AsyncGenerator[Event, None]:
        from graph import build_graph, config_for

        settings = client_settings(self.base, None, ask.settings)
        open_collection(settings, None)
        inputs = {"question": ask.question, "messages": ask.history}
        config = config_for(settings)
        app = build_graph()
        try:
            out = await anyio.to_thread.run_sync(
                lambda: app.invoke(inputs, config, context=self.services)
            )
        except ValueError as exc:  # a question the graph refuses (empty, too long)
            raise Refused(422, str(exc)) from None
        yield reply_of(out)
