"""Issue 70's docs figure: the demo question and bench_ttft's eight questions, asked of
the frozen copy of the docs (tests/corpus/) with the real local models. Every VERIFIED
answer's quotes must each state their statement (the text rule, graph/checks/support.py,
read again here from the answer object), and most of the nine must be VERIFIED: a label
that never says yes fails its users too."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from graph.checks.support import quote_states
from tests.graph_runs import ask

pytestmark = pytest.mark.slow

ROOT = Path(__file__).parents[2]
sys.path.insert(0, str(ROOT / "bench"))  # bench's scripts import each other so
from bench_ttft import QUESTIONS  # noqa: E402

# The demo question is the Makefile's (`make demo`), read from there: one definition.
DEMO = re.search(r"DEMO_QUESTION \?= (.+)", (ROOT / "Makefile").read_text())
NINE = [DEMO[1].strip(), *QUESTIONS]


def test_most_docs_questions_are_verified_each_by_quotes_stating_them(data_dir):
    verified = []
    for question in NINE:
        out = ask(data_dir, question)
        assert not out.get("error"), (question, out["error"])  # a model error is a failure
        if out["outcome"] != "verified":
            continue
        verified.append(question)
        judgement = out["judgement"]
        for statement in judgement["statements"]:
            if not statement.get("facts", True):
                continue
            quotes = statement["quotes"]
            assert quotes, (question, statement)
            # one quote per clause: together they state the statement
            said = " ".join(q["quote"] for q in quotes)
            assert quote_states(statement["statement"], said, question), (question, statement)
    print(f"VERIFIED {len(verified)} of {len(NINE)}: {verified}")
    assert len(verified) > len(NINE) // 2, verified
