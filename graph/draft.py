"""What a reader may see of an answer before it is checked, and the events that carry it.

The generator's raw tokens reach no client (its call is tagged ``nostream``): they can
hold the NOT_FOUND marker, passage numbers the finished answer renumbers, and answers
the verifier then withdraws. Instead the graph writes events to LangGraph's ``custom``
stream, one definition for every client (``rag ask``, ``rag chat``, the chat page, a
server client with ``stream_mode="custom"``):

- ``{"kind": "step", "node": name}``: a node started (the page shows what is running);
- ``{"kind": "draft", "attempt": n, "text": piece}``: the unchecked answer, in the
  citation numbering the finished answer will have, never holding the marker;
- ``{"kind": "draft_reset", "attempt": n}``: forget the draft shown so far (the model
  wrote the marker, or the call is retried). A new ``attempt`` starts over as well.

A draft is only ever a draft: the final answer object says what the service stands
behind, and a client replaces the draft with it.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from graph.prompts import NOT_FOUND
from tools.text import MARKER

STEP, DRAFT, DRAFT_RESET = "step", "draft", "draft_reset"
Event = dict[str, Any]

_OPEN_MARKER = re.compile(r"\[\d{0,3}$")  # a marker whose "]" has not arrived yet


def _held_from(text: str) -> int:
    """Where the tail that may still become a marker or NOT_FOUND begins."""
    cut = len(text)
    if match := _OPEN_MARKER.search(text):
        cut = match.start()
    for size in range(min(len(NOT_FOUND) - 1, len(text)), 0, -1):
        if NOT_FOUND.startswith(text[-size:]):
            return min(cut, len(text) - size)
    return cut


class DraftStream:
    """Turns one generation's tokens into ``draft`` events.

    Passage numbers are renumbered in order of first citation, as ``finalize`` renumbers
    the finished answer, and numbers that point at no passage are dropped, so a draft
    that survives the check reads exactly as the answer does.
    """

    def __init__(self, passages: int, attempt: int, write: Callable[[Event], None]) -> None:
        self.valid = set(range(1, passages + 1))
        self.attempt = attempt
        self.write = write
        self._reset_state()

    def _reset_state(self) -> None:
        self.pending = ""
        self.new_of: dict[int, int] = {}
        self.shown = False
        self.stopped = False

    def start(self) -> None:
        """A (re)try of the call begins: a draft already shown is void."""
        if self.shown:
            self.write({"kind": DRAFT_RESET, "attempt": self.attempt})
        self._reset_state()

    def piece(self, text: str) -> None:
        if self.stopped:
            return
        self.pending += text
        if NOT_FOUND in self.pending:  # the model says the passages do not answer
            self.stopped = True
            if self.shown:
                self.write({"kind": DRAFT_RESET, "attempt": self.attempt})
            return
        cut = _held_from(self.pending)
        self._emit(self.pending[:cut])
        self.pending = self.pending[cut:]

    def withdraw(self) -> None:
        """The whole answer is void (it stated nothing): a draft already shown goes."""
        if self.shown:
            self.write({"kind": DRAFT_RESET, "attempt": self.attempt})
        self.stopped, self.shown, self.pending = True, False, ""

    def close(self) -> None:
        if not self.stopped:
            self._emit(self.pending)
        self.pending = ""

    def _emit(self, text: str) -> None:
        text = MARKER.sub(self._renumbered, text)
        if not text or (not self.shown and not text.strip()):
            return
        self.write({"kind": DRAFT, "attempt": self.attempt, "text": text})
        self.shown = True

    def _renumbered(self, match: re.Match[str]) -> str:
        n = int(match.group(1))
        if n not in self.valid:
            return ""
        return f"[{self.new_of.setdefault(n, len(self.new_of) + 1)}]"


class StepClock:
    """Each run's own time of a node, from the ``timings`` its updates carry: the state
    adds up a node's repeated runs (a regeneration), which would read as one long run."""

    def __init__(self) -> None:
        self.spent: dict[str, float] = {}

    def seconds(self, node: str, update: dict[str, Any] | None) -> float | None:
        total = ((update or {}).get("timings") or {}).get(node)
        if total is None:
            return None
        own, self.spent[node] = total - self.spent.get(node, 0.0), total
        return own
