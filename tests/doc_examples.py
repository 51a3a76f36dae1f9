"""The fenced blocks of README.md and docs_corpus/*.md, and how each one is run.

The convention (written for authors at the end of docs_corpus/architecture.md):

- A block's info string says what it holds. ``python``, ``bash`` and ``console`` (a
  terminal transcript: the lines that start with ``$ `` are commands, the others their
  output) are run; ``toml`` (a ``rag.toml``) and ``env`` (``RAG_*`` variables) are loaded
  by ``Settings``; ``text``, ``json`` and any other kind are shown, never run. A block
  without an info string is an error: nobody could tell whether it runs.
- ``<!-- not run: REASON -->`` on the line before a block keeps a runnable block from
  running, visibly, with its reason.
- ``<!-- no models -->`` on the line before a python, bash or console block runs it in
  the fast suite, with every model pointed at a dead address, so it must not call one.
  Every other runnable block loads the models: the slow suite runs it.
- A block that names ``127.0.0.1:8123`` talks to a ``rag serve`` the slow suite starts.

Runs check that an example works and gives a well-formed answer, never what it says.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
RUN = frozenset({"python", "bash", "console"})
SETTINGS = frozenset({"toml", "env"})
SHOWN = frozenset({"text", "json"})
SERVER = "127.0.0.1:8123"
_FENCE = re.compile(r"^\s*```(\S*)\s*$")
_NOTE = re.compile(r"^<!--\s*(.*?)\s*-->$")


@dataclass(frozen=True)
class Block:
    page: str  # README.md or docs_corpus/<page>.md
    line: int  # of the opening fence
    kind: str  # the info string
    text: str
    note: str  # the HTML comment on the line before, without its markers

    @property
    def id(self) -> str:
        return f"{self.page}:{self.line}"

    @property
    def not_run(self) -> str | None:
        """The reason given for not running a runnable block, or None."""
        return (
            self.note.removeprefix("not run:").strip() if self.note.startswith("not run") else None
        )

    @property
    def runs(self) -> bool:
        return self.kind in RUN | SETTINGS and self.not_run is None

    @property
    def fast(self) -> bool:
        """Run in the fast suite: settings, and blocks marked as calling no model."""
        return self.runs and (self.kind in SETTINGS or self.note == "no models")

    @property
    def needs_server(self) -> bool:
        return SERVER in self.text

    def script(self) -> str:
        """What bash runs: the block, or a transcript's commands (``$ `` lines and the
        lines that continue them after a trailing backslash)."""
        if self.kind != "console":
            return self.text
        commands, continuing = [], False
        for line in self.text.splitlines():
            if line.startswith("$ ") or continuing:
                commands.append(line.removeprefix("$ "))
                continuing = line.endswith("\\")
        return "\n".join(commands) + "\n"


def pages() -> list[Path]:
    return [REPO / "README.md", *sorted((REPO / "docs_corpus").glob("*.md"))]


def blocks_of(path: Path) -> list[Block]:
    lines = path.read_text().splitlines()
    found, i = [], 0
    while i < len(lines):
        opening = _FENCE.match(lines[i])
        if not opening:
            i += 1
            continue
        end = next(j for j in range(i + 1, len(lines)) if lines[j].strip() == "```")
        before = next((lines[j].strip() for j in range(i - 1, -1, -1) if lines[j].strip()), "")
        note = _NOTE.match(before)
        found.append(
            Block(
                page=path.relative_to(REPO).as_posix(),
                line=i + 1,
                kind=opening.group(1),
                text="\n".join(lines[i + 1 : end]) + "\n",
                note=note.group(1) if note else "",
            )
        )
        i = end + 1
    return found


def all_blocks() -> list[Block]:
    return [block for page in pages() for block in blocks_of(page)]


def env_assignments(block: Block) -> dict[str, str]:
    """An ``env`` block's variables: ``[export ]NAME=value`` lines, comments dropped."""
    found = {}
    for line in block.text.splitlines():
        line = line.split(" #", 1)[0].strip().removeprefix("export ").strip()
        if line and not line.startswith("#"):
            name, _, value = line.partition("=")
            found[name] = value
    return found
