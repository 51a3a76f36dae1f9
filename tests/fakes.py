"""Deterministic stand-ins for models, for unit tests of logic only (never the product path)."""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable

from langchain_core.embeddings import Embeddings
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from pydantic import Field

from tools.structured import parser_for
from tools.text import tokenize


class HashEmbeddings(Embeddings):
    """Bag-of-stemmed-words hashed into 64 dims: texts sharing words are close, others far."""

    dim = 64

    def __init__(self) -> None:
        self.calls: list[int] = []

    def _vector(self, text: str) -> list[float]:
        vec = [0.0] * self.dim
        for token in tokenize(text) or ["<empty>"]:
            vec[int(hashlib.md5(token.encode()).hexdigest(), 16) % self.dim] += 1.0
        norm = math.sqrt(sum(v * v for v in vec))
        return [v / norm for v in vec]

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        self.calls.append(len(texts))
        return [self._vector(t) for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return self._vector(text)


class RuleChat(BaseChatModel):
    """A chat model whose reply is computed by a Python function of the messages.

    For unit tests of graph logic only; it records every prompt it receives.
    """

    respond: Callable[[list[BaseMessage]], str]
    calls: list[list[BaseMessage]] = Field(default_factory=list)
    # first-token probabilities ({token: p}) for calls that ask for logprobs; None: the
    # model returns none, as some providers do
    first_token: Callable[[list[BaseMessage]], dict[str, float]] | None = None
    # for calls that ask for logprobs and room for words (the verifier's own answer):
    # the probability of the reply's first token
    sure: float = 1.0

    @property
    def _llm_type(self) -> str:
        return "rule-chat"

    def _generate(self, messages, stop=None, run_manager=None, **kwargs) -> ChatResult:
        self.calls.append(list(messages))
        if (
            kwargs.get("logprobs")
            and self.first_token is not None
            and kwargs.get("max_tokens", 1) > 1
        ):
            text = self.respond(list(messages))
            content = [{"token": text, "logprob": math.log(self.sure), "top_logprobs": []}]
            message = AIMessage(content=text, response_metadata={"logprobs": {"content": content}})
            return ChatResult(generations=[ChatGeneration(message=message)])
        if kwargs.get("logprobs") and self.first_token is not None:
            top = [
                {"token": token, "logprob": math.log(p)}
                for token, p in self.first_token(list(messages)).items()
            ]
            content = [{**top[0], "top_logprobs": top}]
            message = AIMessage(
                content=top[0]["token"], response_metadata={"logprobs": {"content": content}}
            )
            return ChatResult(generations=[ChatGeneration(message=message)])
        text = self.respond(list(messages))
        return ChatResult(generations=[ChatGeneration(message=AIMessage(content=text))])

    def _stream(self, messages, stop=None, run_manager=None, **kwargs):
        """The reply in 3-character pieces, as a real model splits words and markers."""
        message = self._generate(messages, stop, run_manager, **kwargs).generations[0].message
        if kwargs.get("logprobs"):  # a verdict token with its probabilities, in one piece
            yield ChatGenerationChunk(
                message=AIMessageChunk(
                    content=message.content, response_metadata=message.response_metadata
                )
            )
            return
        text = message.text
        for start in range(0, max(len(text), 1), 3):  # an empty reply is one empty piece
            piece = text[start : start + 3]
            if run_manager:
                run_manager.on_llm_new_token(piece)
            yield ChatGenerationChunk(message=AIMessageChunk(content=piece))

    def with_structured_output(self, schema, **_):
        return self | parser_for(schema)
