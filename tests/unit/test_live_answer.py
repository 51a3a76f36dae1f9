"""What a reader sees while an answer is written and checked: the draft stream's events
(graph/draft.py) and `rag ask` on a pseudo-terminal (rag_cli/live.py)."""

from __future__ import annotations

import io
import os
import pty
import re
import sys
import threading

import pytest

from graph import prompts
from graph.draft import DRAFT, DRAFT_RESET, DraftStream
from rag_cli.live import DRAFT_HEADER, WITHDRAWN
from rag_cli.main import main

COLUMNS, LINES = 60, 40


def drafts(pieces: list[str], passages: int = 5) -> list[dict]:
    events: list[dict] = []
    stream = DraftStream(passages, 1, events.append)
    stream.start()
    for piece in pieces:
        stream.piece(piece)
    stream.close()
    return events


def shown(events: list[dict]) -> str:
    text = ""
    for event in events:
        text = text + event["text"] if event["kind"] == DRAFT else ""
    return text


def test_the_draft_is_renumbered_as_the_answer_will_be_and_split_markers_wait():
    events = drafts(["Run it [", "3", "]. Then [1", "][9] again [3].\n"])
    assert shown(events) == "Run it [1]. Then [2] again [1].\n"  # [9] points at nothing


def test_the_not_found_marker_never_streams_even_split_across_pieces():
    events = drafts(["Canberra [2]. NOT_", "IN_DOCU", "MENTS"])
    assert all(prompts.NOT_FOUND not in e.get("text", "") for e in events)
    assert "NOT_" not in shown(events[:-1])
    assert events[-1]["kind"] == DRAFT_RESET  # the draft shown so far is withdrawn
    assert shown(events) == ""


def test_a_retried_call_resets_the_draft_it_streamed():
    events: list[dict] = []
    stream = DraftStream(2, 1, events.append)
    stream.start()
    stream.piece("half an ans")
    stream.start()  # invoke_text retries the call
    stream.piece("The answer [2].")
    stream.close()
    assert [e["kind"] for e in events] == [DRAFT, DRAFT_RESET, DRAFT]
    assert shown(events) == "The answer [1]."


def test_a_withdrawn_answer_resets_the_draft_it_streamed():
    events: list[dict] = []
    stream = DraftStream(2, 1, events.append)
    stream.start()
    stream.piece("[2]")
    stream.close()
    stream.withdraw()
    assert [e["kind"] for e in events] == [DRAFT, DRAFT_RESET] and shown(events) == ""


# --- a terminal ------------------------------------------------------------------------
def screen(raw: str, width: int = COLUMNS) -> str:
    """The rows a terminal shows after ``raw``: enough of VT100 for what rag_cli/live.py
    writes (wrapping, CR, LF, cursor up, erase below, colours)."""
    rows, row, col = [[]], 0, 0
    for token in re.findall(r"\x1b\[[0-9;]*[A-Za-z]|\r|\n|.", raw, flags=re.S):
        if token == "\n":
            row, col = row + 1, 0
        elif token == "\r":
            col = 0
        elif token.startswith("\x1b["):
            if token[-1] == "A":
                row = max(0, row - int(token[2:-1] or 1))
            elif token[-1] == "J":
                rows = rows[: row + 1]
                rows[row] = rows[row][:col]
            continue
        else:
            if col == width:
                row, col = row + 1, 0
            while len(rows) <= row:
                rows.append([])
            line = rows[row]
            line.extend(" " * (col - len(line)))
            line[col : col + 1] = [token]
            col += 1
        while len(rows) <= row:
            rows.append([])
    return "\n".join("".join(r).rstrip() for r in rows)


def on_terminal(argv: list[str], services) -> str:
    """Run ``rag`` with stdout and stderr on one pseudo-terminal; what it received.

    (Patched inside the test's call: pytest puts its own capture back between phases.)
    """
    master, slave = pty.openpty()
    received: list[bytes] = []

    def read() -> None:
        while True:
            try:
                data = os.read(master, 4096)
            except OSError:
                return
            if not data:
                return
            received.append(data)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    tty = io.TextIOWrapper(os.fdopen(slave, "wb", buffering=0), encoding="utf-8")
    saved = sys.stdout, sys.stderr
    sys.stdout = sys.stderr = tty
    try:
        assert main(argv, services=services) == 0
    finally:
        sys.stdout, sys.stderr = saved
        tty.flush()
        tty.close()
    reader.join(timeout=5)
    os.close(master)
    return b"".join(received).decode().replace("\r\n", "\n")


@pytest.fixture(autouse=True)
def terminal_size(monkeypatch):
    monkeypatch.setenv("COLUMNS", str(COLUMNS))
    monkeypatch.setenv("LINES", str(LINES))


ASK = ["ask", "How do I install the service?"]


def test_on_a_terminal_an_abstention_withdraws_the_draft_it_showed(corpus_env, models):
    models.answer = f"Run make demo to install the service [1]. {prompts.NOT_FOUND}"
    raw = on_terminal(ASK, models.services)
    assert DRAFT_HEADER in raw and "Run make demo" in raw  # the draft streamed, marked
    assert prompts.NOT_FOUND not in raw
    final = screen(raw)
    # the draft is gone; the page's own sentence may be quoted among the closest passages
    assert "Run make demo to install the service [1]" not in final and DRAFT_HEADER not in final
    assert "The documents do not say" in final and "Closest passages" in final


def test_on_a_terminal_a_regenerated_answer_shows_once(corpus_env, models):
    models.answer = ["Install with `pip` [1].", "Run make demo to install the service [1]."]
    models.confidence = [0.9, 0.9]
    raw = on_terminal(ASK, models.services)
    assert "Install with `pip`" in raw  # the first draft was shown while it was checked
    final = screen(raw)
    assert "Install with `pip`" not in final and DRAFT_HEADER not in final
    assert final.count("Run make demo to install the service [1].") == 1
    assert "Verified" in final
    assert final.index("verify (attempt 2)") < final.index("Run make demo")  # steps kept


def test_a_draft_taller_than_the_terminal_is_marked_withdrawn(corpus_env, models, monkeypatch):
    monkeypatch.setenv("LINES", "3")
    models.answer = f"Run make demo to install the service [1]. {'More words. ' * 20}"
    models.answer += prompts.NOT_FOUND
    final = screen(on_terminal(ASK, models.services))
    assert final.index(WITHDRAWN) < final.index("The documents do not say")
