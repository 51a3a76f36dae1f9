"""Fixtures for graph-level unit tests: a real (tmp) collection and rule-based fake models."""

from __future__ import annotations

import json

import pytest

from graph import prompts
from graph.services import Services
from ingest.partition import PartitionOptions
from ingest.pipeline import IngestOptions, Ingestor
from tests.fakes import HashEmbeddings, RuleChat
from tools.config import load_settings
from tools.store.collection import Collection

PAGES = {
    "install.md": "# Install\n\nRun make demo to install the service. It takes 4 minutes "
    "the first time.\n",
    "verify.md": "# Verification\n\nThe verifier is a second LLM that checks every statement "
    "of the answer against the cited passages.\n",
    "tracing.md": "# Tracing\n\nSet LANGFUSE_PUBLIC_KEY to send traces to Langfuse.\n\n"
    "## Turning it off\n\nUnset the keys or set LANGFUSE_TRACING_ENABLED=false.\n",
}
EMB = HashEmbeddings()


@pytest.fixture
def corpus_env(tmp_path, monkeypatch):
    root = tmp_path / "docs"
    root.mkdir()
    for name, text in PAGES.items():
        (root / name).write_text(text)
    monkeypatch.setenv("RAG_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("RAG_DISTANCE_THRESHOLD", "0.95")
    settings = load_settings()
    col = Collection(settings, "docs", create=True)
    Ingestor(
        settings,
        col,
        EMB,
        IngestOptions(partition=PartitionOptions("structure", 100, 0)),
        progress=False,
    ).run([root])
    return settings


class Models:
    """Routes each role to a RuleChat; tests set the behaviour per role. ``services`` is
    what a test hands the graph (``context=``) or an entry point (``services=``)."""

    def __init__(self) -> None:
        self.answer = "Run make demo to install the service [1]."
        # the verifier's P(yes): one value, or one per call (popped in order)
        self.confidence: float | list[float] = 0.9
        self.grades: dict[str, int] = {}
        self.rephrased = "How do I turn off tracing in Langfuse?"
        self.guard_verdict = {"verdict": "allowed", "reason": "about the service"}
        self.chats = {
            role: RuleChat(respond=getattr(self, f"_{role}"))
            for role in ("generator", "query", "verifier", "judge")
        }
        self.chats["verifier"].first_token = self._verifier_yes
        self.services = Services(
            chat=lambda settings, role: self.chats[role],
            embed=lambda _: EMB,
            embed_documents=lambda _: EMB,
        )

    def _generator(self, messages) -> str:
        return self.answer if isinstance(self.answer, str) else self.answer.pop(0)

    def _query(self, messages) -> str:
        last = messages[-1].text
        if messages[0].text == prompts.REPHRASE.text:
            return self.rephrased
        if last.startswith(prompts.GUARD.text.split("\n", 1)[0]):
            return json.dumps(self.guard_verdict)
        if "different search queries" in last:
            return json.dumps({"queries": ["install steps", "setup guide", "extra"]})
        passage = last.split("Passage:\n", 1)[1]
        return json.dumps({"grade": next((g for k, g in self.grades.items() if k in passage), 0)})

    def _judge(self, messages) -> str:
        return json.dumps({"completeness": 4, "contextual_accuracy": 5})

    def _verifier(self, messages) -> str:
        return "yes"  # only read when a test takes the log-probabilities away

    def _verifier_yes(self, messages) -> dict[str, float]:
        p = self.confidence if isinstance(self.confidence, float) else self.confidence.pop(0)
        return {" yes": p, "no": 1 - p}

    def no_logprobs(self) -> None:
        """The verifier returns no log-probabilities, as some providers do: its
        confidence is then sampled (verifier_confidence auto or sampled), or it fails
        (logprobs)."""
        self.chats["verifier"].first_token = None


@pytest.fixture
def models():
    return Models()
