"""Ctrl-C while an answer runs: cancel the model, then leave the graph's stream between
two of its events.

Python raises KeyboardInterrupt wherever the main thread happens to be, and while an
answer runs that is inside LangGraph's stream machinery (its waiter futures and
semaphore). Interrupted there, the run can wait for ever on its own bookkeeping: once,
in CI, the chat never came back after a Ctrl-C. So the handler only sets flags: the
local generation stops at its next token (``cancel_running``), and the loop reading the
stream closes it at an event boundary and raises KeyboardInterrupt itself.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

from tools.models.local_llm import cancel_running


@contextmanager
def ctrl_c_cancels() -> Iterator[threading.Event]:
    """While inside, the first SIGINT sets the yielded event and cancels every local
    generation; a second raises KeyboardInterrupt at once (the usual way out). Outside
    the main thread, where no signal handler can be set, the event is never set."""
    pressed = threading.Event()
    if threading.current_thread() is not threading.main_thread():
        yield pressed
        return

    def on_sigint(signum: int, frame: FrameType | None) -> None:
        if pressed.is_set():
            raise KeyboardInterrupt
        pressed.set()
        cancel_running()

    previous = signal.signal(signal.SIGINT, on_sigint)
    try:
        yield pressed
    finally:
        signal.signal(signal.SIGINT, previous)
