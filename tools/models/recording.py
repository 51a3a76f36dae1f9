"""Record every model call of a run, and replay a recording instead of calling the model.

Why: the answer checks are heuristics over model replies, and a change to them must be
shown not to change an answer by accident. A recording keys each call by what decides
its reply (the role, every message, and the call's own arguments: ``logprobs``,
``max_tokens``, ``seed``, ``response_format``...) and keeps the reply with its
log-probabilities. Replayed through old and new code, the same recording gives the
same model replies, so any difference in answers, verdicts or confidences is the
code's. A prompt the recording lacks is an error (``NotRecordedError``), never a guess:
it means the code under test asked the model something new.

Recordings are JSON lines, one call each: ``{"key", "role", "messages", "kwargs",
"content", "response_metadata"}``. Record with ``rag eval answers --record FILE``,
replay with ``--replay FILE`` (rag_cli/eval_answers_cmd.py).
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from langchain_core.runnables import Runnable
from pydantic import ConfigDict, Field, PrivateAttr

from tools.config import Settings
from tools.errors import ModelError

ChatFactory = Callable[[Settings, str], BaseChatModel]
STREAM_PIECE_CHARS = 3  # a replayed reply streams in pieces, as a real model's does


class NotRecordedError(ModelError):
    """The code asked the model something the recording does not hold."""

    kind = "model_error"


def _asked(role: str, messages: list[BaseMessage], kwargs: dict[str, Any]) -> dict[str, Any]:
    """What decides a reply: the role, each message's type and text, the call's args
    (``stream`` only changes how the reply arrives)."""
    return {
        "role": role,
        "messages": [(m.type, m.text) for m in messages],
        "kwargs": {k: v for k, v in sorted(kwargs.items()) if k != "stream"},
    }


def call_key(role: str, messages: list[BaseMessage], kwargs: dict[str, Any]) -> str:
    asked = _asked(role, messages, kwargs)
    return hashlib.sha256(json.dumps(asked, sort_keys=True, default=str).encode()).hexdigest()


def _structured(model: BaseChatModel, schema: Any) -> Runnable:
    """JSON-schema output as the local model does it: the schema travels in the call's
    ``response_format`` (so it is part of the key), then the reply is parsed."""
    from tools.structured import parser_for

    json_schema = schema if isinstance(schema, dict) else schema.model_json_schema()
    bound = model.bind(response_format={"type": "json_object", "schema": json_schema})
    return bound | parser_for(schema)


class RecordingChat(BaseChatModel):
    """Calls ``inner`` and appends each call and its reply to ``path``."""

    model_config = ConfigDict(arbitrary_types_allowed=True)
    inner: BaseChatModel
    role: str
    path: Path
    model_name: str = "model"  # the inner model's, as messages name it
    _lock: threading.Lock = PrivateAttr(default_factory=threading.Lock)

    @property
    def _llm_type(self) -> str:
        return f"recording-{self.inner._llm_type}"

    def _write(self, messages: list[BaseMessage], kwargs: dict[str, Any], reply: Any) -> None:
        record = {
            "key": call_key(self.role, messages, kwargs),
            **_asked(self.role, messages, kwargs),
            "model": self.model_name,
            "content": reply.text,
            "response_metadata": reply.response_metadata or {},
        }
        with self._lock, self.path.open("a") as out:
            out.write(json.dumps(record, default=str) + "\n")

    def _generate(self, messages, stop=None, run_manager=None, **kwargs) -> ChatResult:
        reply = self.inner.invoke(messages, stop=stop, **kwargs)
        self._write(messages, kwargs, reply)
        return ChatResult(generations=[ChatGeneration(message=reply)])

    def _stream(self, messages, stop=None, run_manager=None, **kwargs) -> Iterator:
        whole: AIMessageChunk | None = None
        for chunk in self.inner.stream(messages, stop=stop, **kwargs):
            whole = chunk if whole is None else whole + chunk
            if run_manager:
                run_manager.on_llm_new_token(chunk.text)
            yield ChatGenerationChunk(message=chunk)
        self._write(messages, kwargs, whole or AIMessageChunk(content=""))

    def with_structured_output(self, schema: Any, **_: Any) -> Runnable:
        return _structured(self, schema)


class ReplayChat(BaseChatModel):
    """Answers each call from a recording; a call it does not hold raises, or, with a
    ``fallback`` (a recording model), goes to the model and is recorded: a change that
    asks the model something new on a few items is measured by calling only those."""

    model_config = ConfigDict(arbitrary_types_allowed=True)
    role: str
    replies: dict[str, dict[str, Any]] = Field(repr=False)
    model_name: str = "model"  # the recorded model's, as messages name it
    fallback: BaseChatModel | None = None

    @property
    def _llm_type(self) -> str:
        return "replay"

    def _recorded(
        self, messages: list[BaseMessage], kwargs: dict[str, Any]
    ) -> AIMessage | BaseChatModel:
        """The recorded reply, or the fallback model that is to make this call."""
        found = self.replies.get(call_key(self.role, messages, kwargs))
        if found is not None:
            return AIMessage(content=found["content"], response_metadata=found["response_metadata"])
        if self.fallback is None:
            last = messages[-1].text[:120] if messages else ""
            raise NotRecordedError(f"no recorded {self.role} reply for this call: {last!r}")
        return self.fallback

    def _generate(self, messages, stop=None, run_manager=None, **kwargs) -> ChatResult:
        reply = self._recorded(messages, kwargs)
        if isinstance(reply, BaseChatModel):
            reply = reply.invoke(messages, stop=stop, **kwargs)
        return ChatResult(generations=[ChatGeneration(message=reply)])

    def _stream(self, messages, stop=None, run_manager=None, **kwargs) -> Iterator:
        reply = self._recorded(messages, kwargs)
        if isinstance(reply, BaseChatModel):
            for chunk in reply.stream(messages, stop=stop, **kwargs):
                if run_manager:
                    run_manager.on_llm_new_token(chunk.text)
                yield ChatGenerationChunk(message=chunk)
            return
        if reply.response_metadata.get("logprobs"):  # a reading: one piece, as recorded
            yield ChatGenerationChunk(
                message=AIMessageChunk(
                    content=reply.text, response_metadata=reply.response_metadata
                )
            )
            return
        text = reply.text
        for start in range(0, max(len(text), 1), STREAM_PIECE_CHARS):
            piece = text[start : start + STREAM_PIECE_CHARS]
            if run_manager:
                run_manager.on_llm_new_token(piece)
            yield ChatGenerationChunk(message=AIMessageChunk(content=piece))

    def with_structured_output(self, schema: Any, **_: Any) -> Runnable:
        return _structured(self, schema)


def recording(chat: ChatFactory, path: Path) -> ChatFactory:
    """A chat factory whose models record every call to ``path`` (appended)."""
    path.parent.mkdir(parents=True, exist_ok=True)

    def build(settings: Settings, role: str) -> BaseChatModel:
        inner = chat(settings, role)
        name = str(getattr(inner, "model_name", None) or getattr(inner, "model", None) or "model")
        return RecordingChat(inner=inner, role=role, path=path, model_name=name)

    return build


def replaying(path: Path, fallback: ChatFactory | None = None) -> ChatFactory:
    """A chat factory whose models answer from the recording at ``path``; a call it
    lacks goes to ``fallback``'s model (``recording(...)``), or fails."""
    by_role: dict[str, dict[str, dict[str, Any]]] = {}
    for line in path.read_text().splitlines():
        if line.strip():
            call = json.loads(line)
            by_role.setdefault(call["role"], {})[call["key"]] = call

    def build(settings: Settings, role: str) -> BaseChatModel:
        replies = by_role.get(role, {})
        name = next((c.get("model", "model") for c in replies.values()), "model")
        live = fallback(settings, role) if fallback else None
        return ReplayChat(role=role, replies=replies, model_name=name, fallback=live)

    return build
