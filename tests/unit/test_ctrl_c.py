"""A real SIGINT during an answer: the generation is cancelled, the graph's stream is
closed at an event boundary, and only then does KeyboardInterrupt reach the caller."""

from __future__ import annotations

import os
import signal
import threading
import time
from types import SimpleNamespace
from typing import Any

import pytest
from langchain_core.messages import HumanMessage

from rag_cli.ask_cmd import answer
from tests.unit.test_local_llm_cancel import _EndlessLlama, _Model


class _StreamingApp:
    """LangGraph's ``stream`` shape: a worker runs the (endless) local generation while
    the generator hands out custom events, as the real graph does for a draft."""

    def __init__(self) -> None:
        self.llama = _EndlessLlama()
        runtime = SimpleNamespace(llama=self.llama, lock=threading.Lock())
        self.model = _Model(
            model_path="unused.gguf", model_name="fake", timeout_s=3600, runtime=runtime
        )
        self.failure: BaseException | None = None
        self.closed = False
        self.worker: threading.Thread | None = None

    def _generate(self) -> None:
        try:
            self.model.invoke([HumanMessage("hi")])
        except BaseException as exc:
            self.failure = exc

    def stream(self, inputs: Any, config: Any, stream_mode: Any, context: Any):
        self.worker = threading.Thread(target=self._generate, daemon=True)
        self.worker.start()
        try:
            while self.worker.is_alive():
                yield "custom", {"kind": "step"}
                time.sleep(0.01)
            yield "values", {"answer": "finished"}
        finally:
            self.closed = True


def _press_ctrl_c_once_generating(app: _StreamingApp) -> None:
    assert app.llama.started.wait(30)
    os.kill(os.getpid(), signal.SIGINT)


def test_ctrl_c_cancels_the_generation_and_closes_the_stream_before_raising():
    app = _StreamingApp()
    before = signal.getsignal(signal.SIGINT)
    threading.Thread(target=_press_ctrl_c_once_generating, args=(app,), daemon=True).start()
    with pytest.raises(KeyboardInterrupt):
        answer(app, {"question": "q"}, {}, show=False)
    assert app.closed  # the stream was left between two events
    app.worker.join(30)
    assert not app.worker.is_alive()  # the generation stopped at its next token
    assert type(app.failure).__name__ == "GenerationCancelled"
    assert signal.getsignal(signal.SIGINT) is before  # the usual Ctrl-C is back


def test_without_ctrl_c_the_answer_is_returned_and_the_handler_restored():
    class Quick:
        def stream(self, *args: Any, **kwargs: Any):
            yield "values", {"answer": "done [1]", "abstained": False}

    before = signal.getsignal(signal.SIGINT)
    out = answer(Quick(), {"question": "q"}, {}, show=False)
    assert out["answer"] == "done [1]"
    assert signal.getsignal(signal.SIGINT) is before
