"""`rag chat` in a pseudo-terminal, as a person uses it: the answer streams, and Ctrl-C
during an answer never ends the chat.

SmolLM2-135M plays every model (fast; this tests the terminal, not answer quality).
"""

from __future__ import annotations

import os
import pty
import re
import select
import signal
import time

import pytest

from bench.local_service import RAG, ingest, smollm2_env
from tests.corpus import FROZEN_DOCS

pytestmark = pytest.mark.slow
PROMPT = "you> "


class Terminal:
    """The parent side of a pty running a `rag` command as its controlling terminal."""

    def __init__(self, args: list[str], env: dict[str, str]) -> None:
        self.pid, self.fd = pty.fork()
        if self.pid == 0:  # the child: pty.fork made the pty its controlling terminal
            os.execve(RAG, [RAG, *args], env)
        self.seen = ""

    def read_until(self, pattern: str, timeout: float = 300) -> str:
        """Everything printed from the last match up to ``pattern`` (a regex)."""
        start = len(self.seen)
        deadline = time.monotonic() + timeout
        while not re.search(pattern, self.seen[start:]):
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"no {pattern!r} within {timeout}s:\n{self.seen[start:]}")
            ready, _, _ = select.select([self.fd], [], [], min(left, 1.0))
            if ready:
                try:
                    self.seen += os.read(self.fd, 4096).decode("utf-8", "replace")
                except OSError:  # the child exited and the pty closed
                    raise AssertionError(f"rag exited before {pattern!r}:\n{self.seen}") from None
        match = re.search(pattern, self.seen[start:])
        text = self.seen[start : start + match.end()]
        self.seen = self.seen[: start + match.end()]  # keep what follows for the next read
        return text

    def send(self, text: str) -> None:
        os.write(self.fd, text.encode())

    def exit_code(self, timeout: float = 60) -> int:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                return os.waitstatus_to_exitcode(status)
            try:  # drain, so the child never blocks on a full pty
                if select.select([self.fd], [], [], 0.2)[0]:
                    os.read(self.fd, 4096)
            except OSError:
                pass
        os.kill(self.pid, signal.SIGKILL)
        raise AssertionError("rag chat did not exit")


@pytest.fixture(scope="module")
def chat_env(tmp_path_factory):
    env = smollm2_env(tmp_path_factory.mktemp("chat-data"), llm_max_tokens="200")
    ingest(env, FROZEN_DOCS)
    return env


def test_answers_stream_and_ctrl_c_during_an_answer_keeps_the_chat(chat_env):
    term = Terminal(["chat", "--set", "max_regenerations=0"], chat_env)
    term.read_until(PROMPT, timeout=120)

    term.send("What does rag doctor do?\n")
    term.read_until(r"  retrieve: [^\n]*\n")
    during = term.read_until(r"  generate_answer: [^\n]*\n")
    tokens = during.split("  generate_answer:")[0]
    assert tokens.strip(), "no answer text was printed before generation ended"
    term.read_until(PROMPT)

    term.send("How do I ingest a folder of documents?\n")
    term.read_until(r"  retrieve: [^\n]*\n")
    term.read_until(r"\S")  # the first token of the answer is on the screen
    term.send("\x03")  # Ctrl-C, as the terminal sends it
    after = term.read_until(PROMPT)  # the chat is still there: Ctrl-C never ends it mid-answer
    # Whether the answer itself is cut short depends on where the signal lands: in one CI
    # run the generator finished the answer first (the main thread was waiting on the
    # graph's worker). Either way the conversation goes on.
    assert "(answer cancelled" in after or "finalize:" in after, after

    term.send("/passages\n")  # the chat goes on: the last turn is still there to show
    shown = term.read_until(PROMPT)
    assert "searched for:" in shown, shown
    term.send("/quit\n")
    assert term.exit_code() == 0
