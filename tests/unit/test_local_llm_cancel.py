"""Ctrl-C in `rag chat` stops the local model's generation, which runs in LangGraph's
worker thread, not only the main thread's wait for it."""

from __future__ import annotations

import itertools
import threading
from types import SimpleNamespace
from typing import Any

from langchain_core.messages import HumanMessage

from tools.errors import GenerationCancelled
from tools.models.local_llm import ChatLocalLlama, cancel_running
from tools.resilient import with_retries


class _EndlessLlama:
    """llama.cpp's streaming shape, one token per chunk, never finishing on its own."""

    n_tokens = 0

    def __init__(self) -> None:
        self.metadata: dict[str, str] = {}  # no chat template: its prompt goes uncounted
        self.started = threading.Event()
        self.calls = 0

    def create_chat_completion(self, **_: object):
        self.calls += 1
        self.started.set()
        return (
            {"choices": [{"delta": {"content": "word "}, "finish_reason": None}]}
            for _ in itertools.count()
        )


class _Model(ChatLocalLlama):
    runtime: Any = None  # stands in for the loaded GGUF and its lock

    def _loaded(self) -> Any:
        return self.runtime


def test_cancel_running_stops_a_generation_in_another_thread_and_it_is_not_retried():
    llama = _EndlessLlama()
    runtime = SimpleNamespace(llama=llama, lock=threading.Lock())
    model = _Model(model_path="unused.gguf", model_name="fake", timeout_s=3600, runtime=runtime)
    failures: list[BaseException] = []

    def answer() -> None:
        try:
            with_retries(lambda: model.invoke([HumanMessage("hi")]), retries=2, what="generator")
        except BaseException as exc:
            failures.append(exc)

    worker = threading.Thread(target=answer, daemon=True)
    worker.start()
    assert llama.started.wait(60)
    assert cancel_running() == 1
    worker.join(60)
    assert not worker.is_alive()
    assert isinstance(failures[0], GenerationCancelled) and failures[0].kind == "cancelled"
    assert llama.calls == 1  # a cancelled answer is not tried again
    assert runtime.lock.acquire(blocking=False)  # and the model is free
    assert cancel_running() == 0
