"""Model calls that fail in a bounded, typed way: retries, then a ``ModelError`` subclass.

Providers fail in their own vocabulary (``openai.APITimeoutError``, litellm's
``Timeout``, a ``RuntimeError`` from llama.cpp, ``ConnectionError``...). The graph
must turn each into a clear ``error`` in the answer object, never an unhandled
exception, so every call goes through ``as_model_error`` and comes out as one of
the types in ``tools.errors``. LLM timeouts are not retried: each attempt already
waited the whole ``llm_timeout_s``, and retrying would multiply the wait. Nor is a
prompt over the context window: it would overflow again.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable
from typing import Protocol, TypeVar

from langchain_core.embeddings import Embeddings
from langchain_core.language_models import LanguageModelInput
from langchain_core.messages import BaseMessage
from langchain_core.runnables import Runnable, RunnableConfig

from tools.errors import ContextOverflowError, EmptyReplyError, LLMTimeoutError, ModelError

log = logging.getLogger(__name__)
T = TypeVar("T")


def is_timeout(exc: BaseException) -> bool:
    """Timeouts by type (ours, stdlib) or by name (openai, httpx, litellm classes)."""
    return isinstance(exc, TimeoutError) or "Timeout" in type(exc).__name__


# llama.cpp: "Requested tokens (4710) exceed context window of 4096"; OpenAI-compatible
# servers: "maximum context length is 4096 tokens" / code context_length_exceeded
_OVERFLOW = re.compile(r"exceed\w* context window|maximum context length|context_length_exceeded")


def as_model_error(exc: Exception, what: str) -> ModelError:
    if isinstance(exc, ModelError):
        return exc
    detail = f"{what}: {type(exc).__name__}: {exc}"
    if _OVERFLOW.search(str(exc)):
        return ContextOverflowError(f"{detail}; {ContextOverflowError.hint}")
    return LLMTimeoutError(detail) if is_timeout(exc) else ModelError(detail)


def with_retries(
    call: Callable[[], T],
    *,
    retries: int,
    what: str,
    backoff_s: float = 0.0,
    retry_timeouts: bool = False,
) -> T:
    """Run ``call`` up to ``retries + 1`` times; raise the last failure as a ``ModelError``.

    ``backoff_s`` doubles after each failure (1 s, 2 s, 4 s for remote services).
    Embedding calls are short, so their timeouts are worth retrying (``retry_timeouts``).
    """
    for attempt in range(retries + 1):
        try:
            return call()
        except Exception as exc:
            error = as_model_error(exc, what)
            final = not error.retried or (isinstance(error, LLMTimeoutError) and not retry_timeouts)
            if attempt == retries or final:
                if attempt:
                    error.args = (f"{error} (after {attempt + 1} attempts)",)
                raise error from exc
            log.warning("%s failed (attempt %d/%d): %s", what, attempt + 1, retries + 1, error)
            if backoff_s:
                time.sleep(backoff_s * 2**attempt)
    raise AssertionError("unreachable")


class TextSink(Protocol):
    """Where a streamed reply's pieces go as the model writes them."""

    def start(self) -> None: ...  # an attempt begins: what the last one sent is void

    def piece(self, text: str) -> None: ...

    def close(self) -> None: ...  # the reply is complete


def invoke_text(
    model: Runnable[LanguageModelInput, BaseMessage],
    messages: list[BaseMessage],
    *,
    retries: int,
    what: str,
    config: RunnableConfig | None = None,
    sink: TextSink | None = None,
) -> str:
    """The model's non-empty reply text; an empty reply counts as a failed attempt.

    With ``sink``, the reply is streamed into it piece by piece (each retry starts it
    again); the caller's config should then keep the raw tokens from other listeners.
    """

    def call() -> str:
        if sink is None:
            text = model.invoke(messages, config).text
        else:
            sink.start()
            pieces = []
            for chunk in model.stream(messages, config):
                pieces.append(chunk.text)
                sink.piece(chunk.text)
            sink.close()
            text = "".join(pieces)
        return nonempty(text, what)

    return with_retries(call, retries=retries, what=what)


def nonempty(text: str, what: str) -> str:
    """``text`` stripped; an empty reply raises, so the retry layer counts it as a failed
    attempt rather than a model that answered nothing."""
    if not (text := text.strip()):
        raise EmptyReplyError(f"{what}: the model returned an empty reply")
    return text


class ResilientEmbeddings(Embeddings):
    """Any embeddings with retries and typed errors, so a dead embedding service at
    question time becomes an answer with ``error.type``, not a traceback."""

    def __init__(self, inner: Embeddings, retries: int, backoff_s: float = 1.0) -> None:
        self.inner = inner
        self.retries = retries
        self.backoff_s = backoff_s

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return with_retries(
            lambda: self.inner.embed_documents(texts),
            retries=self.retries,
            what=f"embedding {len(texts)} texts",
            backoff_s=self.backoff_s,
            retry_timeouts=True,
        )

    def embed_query(self, text: str) -> list[float]:
        return with_retries(
            lambda: self.inner.embed_query(text),
            retries=self.retries,
            what="embedding the query",
            backoff_s=self.backoff_s,
            retry_timeouts=True,
        )
