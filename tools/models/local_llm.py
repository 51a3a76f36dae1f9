"""An in-process llama.cpp chat model that behaves like any other LangChain chat model.

Why our own wrapper: we need one loaded model per process shared by every role
(generator, query writer, verifier), safe under concurrent callers (llama.cpp is
not re-entrant, so calls are serialised by a per-model lock), a deadline that
actually stops generation, token usage on every call (Langfuse shows it, and the
answer's account of its calls: tools/models/metered.py), with the prompt tokens the KV
cache served, the recent calls' states kept so that a prompt starting like any of them
computes only what is new (tools/models/kv_states.py), and grammar-constrained JSON so
structured outputs always parse.
"""

from __future__ import annotations

import atexit
import json
import os
import re
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage
from langchain_core.messages.ai import UsageMetadata
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from langchain_core.runnables import Runnable
from pydantic import BaseModel, Field

from tools.errors import GenerationCancelled, LLMTimeoutError, ModelOutputError
from tools.models.kv_states import KVStates, common_prefix
from tools.sanitize import strip_template_tokens

_REGISTRY_LOCK = threading.Lock()
_LOADED: dict[tuple[str, int, int], _Loaded] = {}

# One event per generation in progress: Ctrl-C reaches only the main thread, while
# LangGraph runs nodes in worker threads, so a cancelled answer would otherwise keep
# generating (and hold the model) until it ends on its own.
_RUNNING: set[threading.Event] = set()

_ROLES = {"system": "system", "human": "user", "ai": "assistant", "tool": "user"}


class _Loaded:
    """A llama.cpp model plus the lock that serialises calls into it."""

    def __init__(self, path: str, n_ctx: int, n_threads: int) -> None:
        from llama_cpp import Llama  # heavy import, deferred to first use

        started = time.perf_counter()
        self.llama = Llama(
            model_path=path,
            n_ctx=n_ctx,
            # llama-cpp-python defaults to half the cores; prefill and decode both scale
            n_threads=n_threads or os.cpu_count(),
            n_threads_batch=n_threads or os.cpu_count(),
            verbose=False,
        )
        self.load_seconds = time.perf_counter() - started
        self.lock = threading.Lock()
        self.states = KVStates()


def shared_model(path: str, n_ctx: int, n_threads: int) -> _Loaded:
    """Load a GGUF once per process; later callers with the same settings share it."""
    key = (str(Path(path).resolve()), n_ctx, n_threads)
    with _REGISTRY_LOCK:
        if key not in _LOADED:
            _LOADED[key] = _Loaded(*key)
        return _LOADED[key]


def release_all(timeout: float = -1) -> None:
    """Free every loaded model. Registered for interpreter exit, where llama-cpp-python's
    own finaliser fails noisily; with a ``timeout``, a model still busy is left alone, so
    exit never hangs."""
    with _REGISTRY_LOCK:
        for loaded in _LOADED.values():
            if loaded.lock.acquire(timeout=timeout):
                try:
                    loaded.llama.close()
                finally:
                    loaded.lock.release()
        _LOADED.clear()


atexit.register(release_all, 1.0)


def cancel_running() -> int:
    """Stop every local generation in progress at its next token; how many there were.

    Takes no lock, so a SIGINT handler may call it whatever the main thread was doing
    (CPython copies the set in one step; setting an event never waits on this module).
    """
    running = list(_RUNNING)
    for event in running:
        event.set()
    return len(running)


def _to_llama_messages(messages: Sequence[BaseMessage]) -> list[dict[str, str]]:
    """Role dicts for llama.cpp. Template tokens are stripped from every content: llama.cpp
    tokenises them as real control tokens, so one in a question or a document would
    open a new turn (a prompt injection) rather than be read as text."""
    return [
        {
            "role": _ROLES.get(m.type, "user"),
            "content": strip_template_tokens(m.text if hasattr(m, "text") else ""),
        }
        for m in messages
    ]


def _usage(prompt_tokens: int, completion_tokens: int, reused: int | None) -> UsageMetadata:
    """Usage in LangChain's shape; ``cache_read`` is the prompt tokens the KV cache kept
    (None: unknown), as OpenAI's cached tokens are reported."""
    usage = UsageMetadata(
        input_tokens=prompt_tokens,
        output_tokens=completion_tokens,
        total_tokens=prompt_tokens + completion_tokens,
    )
    if reused is not None:
        usage["input_token_details"] = {"cache_read": reused}
    return usage


def _prompt_tokens(llama: Any, messages: list[BaseMessage]) -> list[int] | None:
    """The tokens of ``messages`` in the model's chat template, as llama-cpp-python's
    default chat handler makes them (``chat_formatter_to_chat_completion_handler``);
    None for a model without a template."""
    from llama_cpp.llama_chat_format import Jinja2ChatFormatter

    template = llama.metadata.get("tokenizer.chat_template")
    if not template:
        return None
    prompt = Jinja2ChatFormatter(
        template=template,
        eos_token=llama._model.token_get_text(llama.token_eos()),
        bos_token=llama._model.token_get_text(llama.token_bos()),
    )(messages=_to_llama_messages(messages))
    return llama.tokenize(
        prompt.prompt.encode("utf-8"), add_bos=not prompt.added_special, special=True
    )


def reused_tokens(llama: Any, prompt: Sequence[int]) -> int:
    """How many of ``prompt``'s tokens the next generation takes from the KV cache
    instead of computing them, read from the cache before the call. As
    ``Llama.generate`` (llama-cpp-python 0.3.36) decides: the longest prefix the prompt
    shares with the tokens in the cache (``_input_ids[:n_tokens]``, those of the previous
    call on this model), less one when the whole prompt matches (its last token is
    computed again for fresh logits), unless the cache holds exactly the prompt and its
    logits are live (nothing to compute)."""
    same = common_prefix(llama._input_ids[: llama.n_tokens], prompt)
    if same < len(prompt) or same == 0:
        return same
    exact = llama.n_tokens == len(prompt) and not getattr(llama, "_requires_eval", True)
    return same if exact else same - 1


class ChatLocalLlama(BaseChatModel):
    """Chat model backed by a verified local GGUF file run with llama-cpp-python."""

    model_path: str
    model_name: str = Field(description="Shown in traces as the generation's model.")
    n_ctx: int = 4096
    n_threads: int = 0
    max_tokens: int = 512
    temperature: float = 0.0
    timeout_s: float = 180.0
    stop: list[str] | None = None

    @property
    def _llm_type(self) -> str:
        return "llama-cpp-local"

    @property
    def _identifying_params(self) -> dict[str, Any]:
        return {"model_name": self.model_name, "n_ctx": self.n_ctx}

    def _loaded(self) -> _Loaded:
        return shared_model(self.model_path, self.n_ctx, self.n_threads)

    def _call_kwargs(self, stop: list[str] | None, kwargs: dict[str, Any]) -> dict[str, Any]:
        call = {
            "max_tokens": kwargs.get("max_tokens", self.max_tokens),
            "temperature": kwargs.get("temperature", self.temperature),
            "stop": stop or self.stop or [],
        }
        if kwargs.get("response_format"):
            call["response_format"] = kwargs["response_format"]
        if "seed" in kwargs:  # else llama-cpp-python samples with the same seed every call
            call["seed"] = kwargs["seed"]
        return call

    def _acquire(self, loaded: _Loaded, deadline: float) -> None:
        if not loaded.lock.acquire(timeout=max(0.0, deadline - time.monotonic())):
            raise LLMTimeoutError(
                f"{self.model_name}: waited {self.timeout_s:.0f}s for the model to be free "
                "(another call holds it); raise llm_timeout_s or reduce concurrency"
            )

    @contextmanager
    def _generating(self, loaded: _Loaded, deadline: float) -> Iterator[threading.Event]:
        """Hold the model for one generation, registered so that ``cancel_running``
        (Ctrl-C) reaches it; yields the event that says it was cancelled."""
        self._acquire(loaded, deadline)
        cancelled = threading.Event()
        with _REGISTRY_LOCK:
            _RUNNING.add(cancelled)
        try:
            yield cancelled
        finally:
            with _REGISTRY_LOCK:
                _RUNNING.discard(cancelled)
            loaded.lock.release()

    def _keep_going(self, cancelled: threading.Event, deadline: float) -> None:
        """Stop a generation between two tokens: cancelled (Ctrl-C) or past its deadline."""
        if cancelled.is_set():
            raise GenerationCancelled(f"{self.model_name}: answer cancelled")
        if time.monotonic() > deadline:
            raise LLMTimeoutError(
                f"{self.model_name}: no complete answer within llm_timeout_s={self.timeout_s:g}s"
            )

    def _run(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None,
        kwargs: dict[str, Any],
        outcome: dict[str, Any],
    ) -> Iterator[str]:
        """Yield text deltas from llama.cpp, holding the model lock throughout.

        Always streams internally: between tokens is the only place an over-long
        generation can be stopped (llama.cpp's callbacks swallow exceptions), and
        closing the stream ends generation cleanly. Fills ``outcome`` with the
        finish reason and token counts when done.
        """
        loaded = self._loaded()
        deadline = time.monotonic() + self.timeout_s
        produced = 0
        with self._generating(loaded, deadline) as cancelled:
            prompt = _prompt_tokens(loaded.llama, messages)
            if prompt is not None:
                loaded.states.restore_for(loaded.llama, prompt)
            reused = None if prompt is None else reused_tokens(loaded.llama, prompt)
            stream = loaded.llama.create_chat_completion(
                messages=_to_llama_messages(messages),
                stream=True,
                **self._call_kwargs(stop, kwargs),
            )
            try:
                for part in stream:
                    self._keep_going(cancelled, deadline)
                    choice = part["choices"][0]
                    outcome["finish_reason"] = choice.get("finish_reason") or outcome.get(
                        "finish_reason"
                    )
                    text = choice.get("delta", {}).get("content") or ""
                    if text:
                        produced += 1  # llama-cpp-python streams one token per chunk
                        yield text
            finally:
                stream.close()
            loaded.states.save(loaded.llama)
            # the cache now holds the prompt the chat handler made, then what was
            # generated: if that prompt is not the one tokenised here, the reuse is unknown
            n_prompt = max(loaded.llama.n_tokens - produced, 0)
            if prompt is not None and list(loaded.llama._input_ids[: len(prompt)]) == prompt:
                n_prompt = len(prompt)
            else:
                reused = None
            outcome["usage"] = _usage(n_prompt, produced, reused)

    def _with_logprobs(
        self, messages: list[BaseMessage], top: int, max_tokens: int, stop: list[str]
    ) -> ChatResult:
        """The greedy reply with every token's log-probability and its ``top``
        alternatives, in OpenAI's ``logprobs`` shape, so callers read every provider the
        same way (the verifier binds ``max_tokens=1`` and reads its yes/no). Asking for
        log-probabilities does not cut a reply short, as it does not from OpenAI.

        Read from the logits of the last evaluated position as each token is sampled,
        which llama.cpp keeps without ``logits_all`` (that option slows every prefill),
        so the reply costs what plain generation costs. The shared prompt prefix is
        reused from the KV cache like any other call.
        """
        import numpy as np
        from llama_cpp import llama_cpp

        loaded = self._loaded()
        llama = loaded.llama
        deadline = time.monotonic() + self.timeout_s
        content: list[dict[str, Any]] = []
        produced: list[int] = []
        text = ""
        with self._generating(loaded, deadline) as cancelled:
            tokens = _prompt_tokens(llama, messages)
            if tokens is None:
                raise ModelOutputError(
                    f"{self.model_name}: no chat template, no token probabilities"
                )
            loaded.states.restore_for(llama, tokens)
            reused = reused_tokens(llama, tokens)
            steps = llama.generate(tokens, temp=0.0)
            try:
                # each token is sampled before it is evaluated: the logits at hand are
                # those of the position it was sampled from
                for token in steps:
                    self._keep_going(cancelled, deadline)
                    logits = np.ctypeslib.as_array(
                        llama_cpp.llama_get_logits_ith(llama._ctx.ctx, -1),
                        shape=(llama.n_vocab(),),
                    ).astype(np.float64)
                    logprobs = logits - logits.max()
                    logprobs -= np.log(np.exp(logprobs).sum())
                    best = np.argpartition(-logprobs, top)[:top]
                    best = best[np.argsort(-logprobs[best])]
                    content.append(
                        {
                            "token": llama.detokenize([token]).decode("utf-8", "replace"),
                            "logprob": float(logprobs[token]),
                            "top_logprobs": [
                                {
                                    "token": llama.detokenize([int(i)]).decode("utf-8", "replace"),
                                    "logprob": float(logprobs[i]),
                                }
                                for i in best
                            ],
                        }
                    )
                    if llama_cpp.llama_vocab_is_eog(llama._model.vocab, token):
                        content[-1]["token"] = ""
                        break
                    produced.append(token)
                    text = llama.detokenize(produced, prev_tokens=tokens).decode("utf-8", "replace")
                    hit = [s for s in stop if s in text]
                    if hit:
                        text = text[: text.index(hit[0])]
                        break
                    if len(produced) >= max_tokens:
                        break
            finally:
                steps.close()
            loaded.states.save(llama)
        message = AIMessage(
            content=text,
            usage_metadata=_usage(len(tokens), len(content), reused),
            response_metadata={"logprobs": {"content": content}, "model_name": self.model_name},
        )
        return ChatResult(generations=[ChatGeneration(message=message)])

    def _metadata(self, outcome: dict[str, Any]) -> dict[str, Any]:
        return {"finish_reason": outcome.get("finish_reason"), "model_name": self.model_name}

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        if kwargs.get("logprobs"):
            call = self._call_kwargs(stop, kwargs)
            top = int(kwargs.get("top_logprobs") or 1)
            return self._with_logprobs(messages, top, call["max_tokens"], call["stop"])
        outcome: dict[str, Any] = {}
        text = "".join(self._run(messages, stop, kwargs, outcome))
        message = AIMessage(
            content=text,
            usage_metadata=outcome["usage"],
            response_metadata=self._metadata(outcome),
        )
        return ChatResult(generations=[ChatGeneration(message=message)])

    def _stream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> Iterator[ChatGenerationChunk]:
        outcome: dict[str, Any] = {}
        for text in self._run(messages, stop, kwargs, outcome):
            chunk = ChatGenerationChunk(message=AIMessageChunk(content=text))
            if run_manager:
                run_manager.on_llm_new_token(text, chunk=chunk)
            yield chunk
        yield ChatGenerationChunk(
            message=AIMessageChunk(
                content="",
                usage_metadata=outcome["usage"],
                response_metadata=self._metadata(outcome),
            )
        )

    def with_structured_output(
        self, schema: dict[str, Any] | type[BaseModel], *, include_raw: bool = False, **_: Any
    ) -> Runnable:
        """Constrain decoding with llama.cpp's JSON-schema grammar, then parse.

        The grammar guarantees syntax; a reply cut off by max_tokens still fails to
        parse and surfaces as ``ModelOutputError`` (see tools.structured for retries).
        """
        from tools.structured import parser_for

        json_schema = schema if isinstance(schema, dict) else schema.model_json_schema()
        if include_raw:
            raise ValueError("include_raw=True is not supported by the local model")
        bound = self.bind(
            response_format={"type": "json_object", "schema": json.loads(json.dumps(json_schema))}
        )
        return bound | parser_for(schema)


# ggml's AMX path segfaulted at the first completion on Xeons (llama.cpp issue 20824)
_AMX_IN_USE = re.compile(r"\bAMX(?:_INT8)?\s*=\s*1")
# What to do when a llama.cpp build crashes or cannot run here (scripts/build_llama.sh)
REBUILD_ADVICE = (
    "run `make clean-native setup` to rebuild llama-cpp-python for this CPU, or set "
    "LLAMA_CMAKE_ARGS for your hardware (docs_corpus/troubleshooting.md, 'The first model "
    "call crashes')"
)


def uses_amx() -> bool:
    """Whether the llama_cpp this process imports was built with ggml's AMX path."""
    import llama_cpp

    return bool(_AMX_IN_USE.search(llama_cpp.llama_print_system_info().decode()))


def smoke_generate(path: str, max_tokens: int = 8) -> dict[str, Any]:
    """Load a GGUF and generate a few tokens, and say whether the build uses AMX.

    Run in a child process (``tools.isolated``) after every build or reuse of the
    llama-cpp-python wheel: a build that crashes on this CPU is caught at set-up.
    """
    loaded = _Loaded(path, 512, 0)
    started = time.perf_counter()
    out = loaded.llama.create_completion("The capital of France is", max_tokens=max_tokens)
    return {
        "text": out["choices"][0]["text"],
        "tokens": out["usage"]["completion_tokens"],
        "load_s": loaded.load_seconds,
        "generate_s": time.perf_counter() - started,
        "amx": uses_amx(),
    }
