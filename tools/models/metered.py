"""Every model call of a run, counted against its ceiling and accounted for.

Why one wrapper for two uses: the ceiling on a run's model calls (``max_model_calls``)
only holds if every attempt is counted where the model is actually called: retries
(tools/resilient.py), sampled confidence (tools/answer_check.py) and every check's
reading included. The same place sees each call's tokens and time, which is the
per-answer account that says where an answer's time goes (how many prompt tokens the
model had to read, and how many it reused from llama.cpp's KV cache).

A ``CallMeter`` belongs to one node run of one question (graph/run.py makes it, with
the calls the question made so far); ``Services.metered`` hands the node models wrapped
in ``MeteredChat``, so a node or a check cannot call a model past it. The call that
would pass the ceiling is refused with ``CallLimitError`` before the model is asked.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage
from langchain_core.outputs import ChatGenerationChunk, ChatResult
from langchain_core.runnables import Runnable, RunnableBinding, RunnableSequence
from pydantic import ConfigDict
from typing_extensions import TypedDict

from tools.errors import ModelError
from tools.resilient import as_model_error


class ModelCall(TypedDict):
    """One call to a model, as the answer's ``calls`` lists it. Token counts are None
    when the provider reported none."""

    step: str  # the graph node that made it
    role: str  # generator, verifier or query
    prompt_tokens: int | None  # the prompt's length in tokens
    reused_tokens: int | None  # ...of which taken from the KV cache (0: none reused)
    computed_tokens: int | None  # ...and computed: prompt - reused
    generated_tokens: int | None
    seconds: float
    # a failed attempt's error type (the answer's ``error.type`` vocabulary); None when
    # the model answered
    error: str | None


class CallLimitError(ModelError):
    """A run asked for more model calls than ``max_model_calls`` allows. Trying again
    cannot help: the run's budget is spent."""

    kind = "call_limit"
    retried = False


class CallMeter:
    """The model calls one node makes for one question, and the ceiling on the
    question's calls in all (``None``: no ceiling, an operator's own run)."""

    def __init__(self, step: str, ceiling: int | None, made_before: int = 0) -> None:
        self.step = step
        self.ceiling = ceiling
        self.made_before = made_before
        self.calls: list[ModelCall] = []
        self._lock = threading.Lock()

    @property
    def made(self) -> int:
        """Calls the question has made, this node's included."""
        return self.made_before + len(self.calls)

    def admit(self, role: str) -> ModelCall:
        """Count a call about to be made, or refuse it: the entry its outcome fills."""
        with self._lock:
            if self.ceiling is not None and self.made >= self.ceiling:
                raise CallLimitError(
                    f"{self.step}: a {role} call would be model call {self.made + 1} of this "
                    f"question, over max_model_calls={self.ceiling} (retries and sampled "
                    "readings count); the answer stops here"
                )
            call = ModelCall(
                step=self.step,
                role=role,
                prompt_tokens=None,
                reused_tokens=None,
                computed_tokens=None,
                generated_tokens=None,
                seconds=0.0,
                error=None,
            )
            self.calls.append(call)
            return call


def _settle(call: ModelCall, started: float, message: Any, error: BaseException | None) -> None:
    """Fill ``call`` from the reply's ``usage_metadata`` (LangChain's common shape:
    ``input_token_details.cache_read`` is the part of the prompt a cache served)."""
    call["seconds"] = round(time.perf_counter() - started, 4)
    if isinstance(error, Exception):  # as the retry layer will type it
        call["error"] = as_model_error(error, "").kind
    elif error is not None:
        call["error"] = type(error).__name__
    usage = getattr(message, "usage_metadata", None) if message is not None else None
    if not usage:
        return
    prompt = usage.get("input_tokens")
    reused = (usage.get("input_token_details") or {}).get("cache_read")
    call["prompt_tokens"] = prompt
    call["generated_tokens"] = usage.get("output_tokens")
    if prompt is not None and reused is not None:
        call["reused_tokens"] = reused
        call["computed_tokens"] = prompt - reused


class MeteredChat(BaseChatModel):
    """``inner`` with each call admitted by ``meter`` and its usage recorded. Calls go to
    the inner model's own ``_generate``/``_stream`` with this call's callback manager, so
    traces and streamed tokens look as they would without the meter."""

    model_config = ConfigDict(arbitrary_types_allowed=True)
    inner: BaseChatModel
    role: str
    meter: CallMeter
    model_name: str = "model"  # the inner model's, as messages and the verifier name it

    @property
    def _llm_type(self) -> str:
        return self.inner._llm_type

    @property
    def _identifying_params(self) -> dict[str, Any]:
        return self.inner._identifying_params

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        call = self.meter.admit(self.role)
        started = time.perf_counter()
        try:
            result = self.inner._generate(messages, stop=stop, run_manager=run_manager, **kwargs)
        except BaseException as exc:
            _settle(call, started, None, exc)
            raise
        _settle(call, started, result.generations[0].message, None)
        return result

    def _stream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> Iterator[ChatGenerationChunk]:
        call = self.meter.admit(self.role)
        started = time.perf_counter()
        whole: Any = None
        try:
            for chunk in self.inner._stream(messages, stop=stop, run_manager=run_manager, **kwargs):
                whole = chunk.message if whole is None else whole + chunk.message
                yield chunk
        except GeneratorExit:  # the caller stopped reading: a call made, not failed
            _settle(call, started, whole, None)
            raise
        except BaseException as exc:
            _settle(call, started, whole, exc)
            raise
        _settle(call, started, whole, None)

    def with_structured_output(self, schema: Any, **kwargs: Any) -> Runnable:
        """The inner model's structured output, with its model step made through this
        wrapper. Every provider's is ``model`` or ``model.bind(...)`` piped into a parser
        (tools/models/local_llm.py, langchain-openai, BaseChatModel's tool calling); a
        shape without that first step is refused rather than called uncounted."""
        structured = self.inner.with_structured_output(schema, **kwargs)
        first = structured.first if isinstance(structured, RunnableSequence) else None
        if first is self.inner:
            step: Runnable = self
        elif isinstance(first, RunnableBinding) and first.bound is self.inner:
            step = first.model_copy(update={"bound": self})
        else:
            raise TypeError(
                f"{type(self.inner).__name__}.with_structured_output returned a "
                f"{type(structured).__name__} this meter cannot count calls through"
            )
        assert isinstance(structured, RunnableSequence)
        return RunnableSequence(step, *structured.middle, structured.last)


@dataclass
class Tally:
    """Calls added up: what ``rag ask --verbose`` shows per step and bench/bench_calls.py
    per question. ``uncounted``: calls whose provider reported no token counts (or, for
    ``reused``/``computed``, no cache figure); their tokens are not in the sums."""

    calls: int = 0
    prompt: int = 0
    reused: int = 0
    computed: int = 0
    generated: int = 0
    seconds: float = 0.0
    uncounted: int = 0

    def add(self, call: ModelCall) -> None:
        self.calls += 1
        self.seconds += call["seconds"]
        if call["computed_tokens"] is None or call["generated_tokens"] is None:
            self.uncounted += 1
        self.prompt += call["prompt_tokens"] or 0
        self.reused += call["reused_tokens"] or 0
        self.computed += call["computed_tokens"] or 0
        self.generated += call["generated_tokens"] or 0


def tally(
    calls: Iterable[ModelCall], key: Callable[[ModelCall], str] = lambda c: c["step"]
) -> dict[str, Tally]:
    """``calls`` added up by ``key`` (the step by default), in order of first call."""
    tallies: dict[str, Tally] = {}
    for call in calls:
        tallies.setdefault(key(call), Tally()).add(call)
    return tallies


def metered(model: BaseChatModel, role: str, meter: CallMeter) -> MeteredChat:
    """``model`` for ``role``, its calls counted by ``meter``; named as ``model`` in traces."""
    name = str(getattr(model, "model_name", None) or getattr(model, "model", None) or "model")
    return MeteredChat(inner=model, role=role, meter=meter, model_name=name, name=model.get_name())
