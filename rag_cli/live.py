"""An answer on a terminal while it is written and checked.

The draft streams dimmed under "(draft, checking...)" and is erased when the answer
object arrives: what then prints is what the service stands behind (the checked
answer, a regeneration, or an abstention), once. Output that is not a terminal (a
pipe, a file, ``--json``) never holds a draft, only the final answer.
"""

from __future__ import annotations

import re
import shutil
from typing import Any, TextIO

from graph.builder import GENERATOR_NODE
from graph.draft import DRAFT, DRAFT_RESET, Event, StepClock
from rag_cli.terminal import unescaped

DIM, PLAIN = "\x1b[2m", "\x1b[0m"
ERASE_BELOW = "\x1b[J"
DRAFT_HEADER = "(draft, checking...)"
WITHDRAWN = "(the draft above was withdrawn)"
_ESCAPE = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


def _rows(text: str, width: int) -> int:
    """Terminal rows ``text`` takes, wrapped at ``width``, minus one: the rows the
    cursor climbs to reach its start."""
    lines = _ESCAPE.sub("", text).expandtabs().split("\n")
    return sum(max(1, -(-len(line) // width)) for line in lines) - 1


class LiveAnswer:
    """The screen of one question: progress lines (stderr) and the draft (stdout).

    Text goes through ``out`` and ``err`` (which escape control characters in what
    documents and models wrote); this class's own sequences go to the terminal as is.
    """

    def __init__(self, out: TextIO, err: TextIO) -> None:
        self.out, self.err = out, err
        self.control = unescaped(out)
        self.live = out.isatty()
        self.one_screen = self.live and err.isatty()  # progress lines share the draft's rows
        self.block = ""  # everything on screen since the draft began
        self.steps: list[str] = []  # the progress lines inside the block
        self.draft = ""
        self.attempt: int | None = None
        self.clock = StepClock()
        self.runs: dict[str, int] = {}

    # --- events -----------------------------------------------------------------------
    def event(self, event: Event) -> None:
        """A ``custom`` stream event of the graph (graph/draft.py)."""
        if not self.live or event.get("kind") not in (DRAFT, DRAFT_RESET):
            return
        if event["kind"] == DRAFT_RESET or event["attempt"] != self.attempt:
            self._erase()
        if event["kind"] == DRAFT:
            if not self.block:
                self._control(DIM)
                self._screen(self.out, f"\n{DRAFT_HEADER}\n")
            text = event["text"] if self.draft else event["text"].lstrip()
            self.attempt = event["attempt"]
            self.draft += text
            self._screen(self.out, text)

    def step(self, node: str, update: dict[str, Any]) -> None:
        """A node finished: one progress line, its own time (not the sum of its runs)."""
        seconds = self.clock.seconds(node, update)
        self.runs[node] = self.runs.get(node, 0) + 1
        name = f"{node} (attempt {self.runs[node]})" if self.runs[node] > 1 else node
        line = f"  {name}"
        if seconds is not None:
            line += f": {seconds:.2f}s"
        if node == "retrieve":
            info = update.get("retrieval") or {}
            line += f" ({info.get('kept', 0)} passages of {info.get('candidates', 0)} candidates)"
        elif node == "verify":
            verdict = update.get("verdict") or {}
            line += " (verified)" if verdict.get("grounded") else " (not verified)"
        lines = [line]
        if node == GENERATOR_NODE and not update.get("abstain_reason"):
            lines.append("  verify: checking the answer against its passages...")
        for text in lines:
            if self.block and self.one_screen:
                self.steps.append(text)
                fresh_line = "" if self.block.endswith("\n") else "\n"
                self._control(PLAIN)
                self._screen(self.err, f"{fresh_line}{text}\n")
            else:
                print(text, file=self.err, flush=True)

    def finish(self, answer: str) -> bool:
        """Clear the draft before the final answer prints. True when the answer is already
        on screen: a draft too tall to erase that says exactly the final answer."""
        if not self.block:
            return False
        same = " ".join(self.draft.split()) == " ".join(answer.split())
        return not self._erase(withdrawn=not same) and same

    # --- the screen -------------------------------------------------------------------
    def _control(self, sequence: str) -> None:
        self.out.flush()
        self.control.write(sequence)
        self.control.flush()

    def _screen(self, stream: TextIO, text: str) -> None:
        stream.write(text)
        stream.flush()
        self.block += text

    def _erase(self, withdrawn: bool = True) -> bool:
        """Remove the draft block from the screen. When it has scrolled out of reach,
        say that it was ``withdrawn`` instead. True if it was erased."""
        if not self.block:
            return True
        size = shutil.get_terminal_size()
        rows = _rows(self.block, size.columns)
        erased = rows < size.lines
        if erased:
            self._control(PLAIN + "\r" + (f"\x1b[{rows}A" if rows else "") + ERASE_BELOW)
        else:
            self._control(PLAIN)
            self.out.write(f"\n{WITHDRAWN}\n" if withdrawn else "\n")
            self.out.flush()
        steps, self.steps, self.block, self.draft = self.steps, [], "", ""
        self.attempt = None
        for text in steps if erased else []:  # the progress lines erased with the draft
            print(text, file=self.err, flush=True)
        return erased
