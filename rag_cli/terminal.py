"""Everything ``rag`` prints goes through ``printable``: documents and file names are
written by others, and an ESC sequence in either could clear or retitle the user's
terminal, hide lines or forge output. One wrapper around stdout and stderr covers every
command, including lines a command forgets to escape itself.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, TextIO

from tools.sanitize import printable


class SafeStream:
    """A text stream whose writes have control characters shown as escapes.

    ``keep_cr``: carriage returns pass (stderr: progress bars redraw their line with
    one); everything else that drives a terminal, ESC first of all, is escaped."""

    def __init__(self, stream: TextIO, *, keep_cr: bool = False) -> None:
        self.stream = stream
        self.keep_cr = keep_cr

    def write(self, text: str) -> int:
        parts = text.split("\r") if self.keep_cr else [text]
        self.stream.write("\r".join(printable(part) for part in parts))
        return len(text)

    def writelines(self, lines: list[str]) -> None:
        for line in lines:
            self.write(line)

    def __getattr__(self, name: str) -> Any:  # flush, fileno, isatty, encoding...
        return getattr(self.stream, name)


def unescaped(stream: TextIO) -> TextIO:
    """The stream under a ``SafeStream``: for a caller writing its own control sequences
    (rag_cli/live.py), never text from a document or a model."""
    return stream.stream if isinstance(stream, SafeStream) else stream


@contextmanager
def safe_terminal() -> Iterator[None]:
    """stdout and stderr (and the log handlers writing to them) escape control characters
    for the duration, then are put back."""
    saved = sys.stdout, sys.stderr
    sys.stdout = SafeStream(saved[0])  # type: ignore[assignment]
    sys.stderr = SafeStream(saved[1], keep_cr=True)  # type: ignore[assignment]
    handlers = [
        h
        for h in logging.getLogger().handlers
        if isinstance(h, logging.StreamHandler) and h.stream in saved
    ]
    streams = [h.setStream(SafeStream(h.stream)) for h in handlers]
    try:
        yield
    finally:
        sys.stdout, sys.stderr = saved
        for handler, stream in zip(handlers, streams, strict=True):
            handler.setStream(stream)
