"""An OpenAI-compatible chat door for chat clients (Open WebUI, LibreChat, the ``openai``
package): ``GET /v1/models`` and ``POST /v1/chat/completions``, streamed or not.

- A model is a collection: ``/v1/models`` lists the ones the calling client may read.
- The conversation's last user message is the question; the earlier user and assistant
  turns are its history, which the graph uses to rephrase a follow-up as it does on a
  thread. The references block and outcome line this route appended to an earlier reply
  are left out of the history.
- The reply's text carries the answer with its [n] markers, a references block and the
  outcome; the extension field ``rag`` (in the message, or in the last streamed chunk's
  delta) carries the same as data: citations, quoted support, outcome, references.
- Streamed, the reply is sent once the answer is checked (an unchecked draft would have
  to be taken back); meanwhile each finished step arrives as an SSE comment, which
  keeps the connection alive and which clients ignore.
- Sampling fields (temperature, max_tokens, ...) are accepted and ignored: the
  operator's models and settings answer. Tools, functions, response formats and any
  other field are refused. ``settings`` (an extension) takes the per-question settings
  a client may set.

Every question is a run of the server's graph sent with the caller's key
(server/answers.py ``ServerAsker``), so the key, collections, quotas, budget and the
Host/Origin rules hold as on the LangGraph routes. A refusal or a model failure is an
error in OpenAI's shape with its HTTP status, never a 500.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import AsyncGenerator, AsyncIterator
from typing import Any

from pydantic import ValidationError
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse

from server.answers import (
    Ask,
    QuestionSettings,
    Refused,
    Reply,
    ServerAsker,
    final_reply,
    known_collections,
    reply_text,
)
from server.api_keys import key_of
from server.http_guard import parse_json
from tools.config import client_of, load_settings

OWNER = "agentic-rag"
# accepted because chat clients send them, and ignored: the operator's models answer
IGNORED_FIELDS = frozenset(
    {
        "temperature",
        "top_p",
        "max_tokens",
        "max_completion_tokens",
        "presence_penalty",
        "frequency_penalty",
        "seed",
        "user",
        "stream_options",
        "n",
    }
)
FIELDS = frozenset({"model", "messages", "stream", "settings"}) | IGNORED_FIELDS
ROLES = frozenset({"system", "developer", "user", "assistant"})
# what this route appended to its own earlier replies: not part of the conversation
APPENDED = ("\n\nReferences:\n", "\n\nOutcome: ")


def error(status: int, message: str) -> JSONResponse:
    """An error as OpenAI's API and clients shape it."""
    kind = "invalid_request_error" if status < 500 else "server_error"
    if status == 429:
        kind = "rate_limit_error"
    return JSONResponse({"error": {"message": message, "type": kind, "code": status}}, status)


async def list_models(request: Request) -> Response:
    """One model per collection the caller may read (the door refused a wrong key)."""
    client = client_of(load_settings(), key_of(request.headers)) or "anyone"
    names = await run_in_threadpool(known_collections, load_settings(), client)
    data = [{"id": n, "object": "model", "created": 0, "owned_by": OWNER} for n in names]
    return JSONResponse({"object": "list", "data": data})


def _text(content: Any) -> str:
    """A message's text: a string, or the text parts of a list of parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list) and all(
        isinstance(p, dict) and p.get("type") == "text" for p in content
    ):
        return "\n".join(str(p.get("text", "")) for p in content)
    raise Refused(400, "a message's content must be text (a string or text parts)")


def _earlier(text: str) -> str:
    for marker in APPENDED:
        text = text.split(marker, 1)[0]
    return text


def ask_of(body: Any) -> tuple[str, Ask, bool]:
    """(the model, the question with its history and settings, streamed or not) of a
    request body."""
    if not isinstance(body, dict):
        raise Refused(400, "the request body must be a JSON object")
    if stray := sorted(set(body) - FIELDS):
        raise Refused(400, f"not supported here: {stray}; accepted: {sorted(FIELDS)}")
    if body.get("n", 1) != 1:
        raise Refused(400, "'n' must be 1: one answer per question")
    model, messages = body.get("model"), body.get("messages")
    if not isinstance(model, str) or not model:
        raise Refused(400, "'model' is required: the collection to answer from (GET /v1/models)")
    if not isinstance(messages, list) or not messages:
        raise Refused(400, "'messages' must be a non-empty list")
    turns = []
    for message in messages:
        role = message.get("role") if isinstance(message, dict) else None
        if role not in ROLES:
            raise Refused(400, f"a message's role must be one of {sorted(ROLES)}, not {role!r}")
        if role in ("user", "assistant"):  # the operator's prompts answer, not a system's
            turns.append({"role": role, "content": _text(message.get("content"))})
    if not turns or turns[-1]["role"] != "user":
        raise Refused(400, "the last message must be the user's question")
    history = [{**t, "content": _earlier(t["content"])} for t in turns[:-1]]
    try:
        chosen = QuestionSettings.model_validate(body.get("settings") or {})
    except ValidationError as exc:
        raise Refused(400, f"'settings': {exc}") from None
    settings = {**chosen.model_dump(exclude_none=True), "collection": model}
    return model, Ask(turns[-1]["content"], history, settings), body.get("stream") is True


def _extension(reply: Reply) -> dict[str, Any]:
    return {k: v for k, v in reply.items() if k != "answer"}


async def chat_completions(request: Request) -> Response:
    try:
        model, ask, streamed = ask_of(parse_json(await request.body()))
    except ValueError as exc:  # not JSON
        return error(400, str(exc))
    except Refused as exc:
        return error(exc.status, exc.detail)
    events = ServerAsker(key_of(request.headers), request.scope["app"]).events(ask)
    try:  # the run's first event: a refusal (key, collection, quota) is an HTTP error
        first = await anext(events)
    except Refused as exc:
        return error(exc.status, exc.detail)
    completion = f"chatcmpl-{uuid.uuid4().hex}"
    head = {"id": completion, "created": int(time.time()), "model": model}
    if streamed:
        return StreamingResponse(_stream(head, first, events), media_type="text/event-stream")
    try:
        reply = first if not isinstance(first, str) else await final_reply(events)
    except Refused as exc:
        return error(exc.status, exc.detail)
    message = {"role": "assistant", "content": reply_text(reply), "rag": _extension(reply)}
    choice = {"index": 0, "message": message, "finish_reason": "stop"}
    return JSONResponse({**head, "object": "chat.completion", "choices": [choice]})


def _chunk(head: dict[str, Any], delta: dict[str, Any], finish: str | None = None) -> str:
    choice = {"index": 0, "delta": delta, "finish_reason": finish}
    return (
        f"data: {json.dumps({**head, 'object': 'chat.completion.chunk', 'choices': [choice]})}\n\n"
    )


async def _stream(
    head: dict[str, Any], first: str | Reply, events: AsyncGenerator[str | Reply, None]
) -> AsyncIterator[str]:
    yield _chunk(head, {"role": "assistant", "content": ""})
    event: str | Reply = first
    try:
        while isinstance(event, str):
            yield f": step {event}\n\n"
            event = await anext(events)
    except (Refused, StopAsyncIteration) as exc:
        detail = exc.detail if isinstance(exc, Refused) else "the run ended without an answer"
        status = exc.status if isinstance(exc, Refused) else 502
        yield f"data: {json.dumps({'error': {'message': detail, 'code': status}})}\n\n"
        return
    finally:
        await events.aclose()  # a client gone mid-answer: the run is cancelled
    for n, paragraph in enumerate(reply_text(event).split("\n\n")):
        yield _chunk(head, {"content": ("\n\n" if n else "") + paragraph})
    yield _chunk(head, {"rag": _extension(event)}, "stop")
    yield "data: [DONE]\n\n"
