"""Run a call in a child process, so a native crash or a hang fails the call, not the caller.

A segfault inside llama.cpp (e.g. its AMX path on recent Xeons) kills the whole Python
process with no Python exception to catch. Checks that must *report* such a crash (the
doctor, the set-up smoke test) therefore make their first model call here: a child that
dies by a signal or outlives its timeout becomes an ``Isolated`` with the reason named.
"""

from __future__ import annotations

import multiprocessing
import signal
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Isolated:
    """What became of the child: its return value, or why it has none."""

    value: Any = None
    error: str | None = None  # a Python exception raised in the child, "Type: message"
    signal: str | None = None  # e.g. "SIGSEGV": the child was killed by a signal
    timed_out: bool = False

    @property
    def ok(self) -> bool:
        return self.error is None and self.signal is None and not self.timed_out

    def reason(self, timeout_s: float) -> str:
        if self.signal:
            return f"the process died of {self.signal} (a crash in native code)"
        if self.timed_out:
            return f"no answer after {timeout_s:g}s: the process was stopped"
        return self.error or ""


def _child(conn: Any, fn: Callable[..., Any], args: tuple[Any, ...]) -> None:
    try:
        conn.send(("value", fn(*args)))
    except BaseException as exc:  # everything is reported to the parent
        last = traceback.extract_tb(exc.__traceback__)[-1:]
        where = f" (at {last[0].filename}:{last[0].lineno})" if last else ""
        conn.send(("error", f"{type(exc).__name__}: {exc}{where}"))
    finally:
        conn.close()


def run_isolated(fn: Callable[..., Any], *args: Any, timeout_s: float) -> Isolated:
    """``fn(*args)`` in a fresh (spawned) child; ``fn`` and its result must pickle.

    Spawn, not fork: a forked child would inherit this process's threads and loaded
    native libraries, which is the state the check is meant to keep apart.
    """
    ctx = multiprocessing.get_context("spawn")
    receive, send = ctx.Pipe(duplex=False)
    child = ctx.Process(target=_child, args=(send, fn, args), daemon=True)
    child.start()
    send.close()
    message = None
    try:
        ready = receive.poll(timeout_s)
        if ready:
            message = receive.recv()
    except EOFError:  # the child died before it could send anything
        ready = True
    finally:
        receive.close()
    if not ready:
        child.kill()
        child.join()
        return Isolated(timed_out=True)
    child.join()
    if message is None:
        code = child.exitcode or 0
        if code < 0:
            return Isolated(signal=signal.Signals(-code).name)
        return Isolated(error=f"the process exited with status {code} and no result")
    kind, payload = message
    return Isolated(value=payload) if kind == "value" else Isolated(error=payload)
