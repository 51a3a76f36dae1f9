"""The default 1.5B model behind a real ``llama_cpp.server``: the remote verifier must
give the in-process verifier's confidence on the same items, within a measured
tolerance, and the install question must come back verified through the remote path as
it does in process."""

from __future__ import annotations

from dataclasses import asdict

import pytest

from evaluation.verifier import docs_items
from graph.checks.pipeline import verify_answer
from graph.services import Services
from tests.llama_server import LlamaServer
from tools.config import Settings, load_settings
from tools.models.local_assets import resolve_gguf
from tools.retrieval.hybrid import Passage

pytestmark = pytest.mark.slow

# Measured on these 8 items: the same confidences to 4 decimals on 2026-11-26; on
# 2026-12-06 (CI) one item read 0.7236 in process and 0.7366 remote, the rest equal.
# Both reuse a cached prompt prefix, and where it ends changes how llama.cpp batches
# the rest of the prompt, which moves the last digits of a probability. The margin is
# that, with room.
TOLERANCE = 0.03
ITEMS = 8


@pytest.fixture(scope="module")
def server():
    model = resolve_gguf("", Settings().resolved_cache_dir())  # the default local model
    with LlamaServer(model, "qwen", n_ctx=4096) as running:
        yield running


def confidences(settings, items) -> list[float]:
    judge = Services().judge(settings)
    found = []
    for item in items:
        passages = [
            asdict(Passage(p["text"], p["source"], [p["source"]], 0.0, 0.0)) for p in item.passages
        ]
        verdict = verify_answer(
            judge, item.question, item.answer, passages, threshold=0.0, phrase_threshold=0.0
        )
        found.append(verdict["confidence"])
    return found


def test_the_remote_verifier_gives_the_in_process_confidence(server):
    items = [i for i in docs_items() if i.category in ("default", "command")][:ITEMS]
    local = confidences(load_settings({"llm_max_retries": 0}), items)
    remote = confidences(
        load_settings({"verifier_model": server.spec(), "llm_max_retries": 0}), items
    )
    gaps = [abs(a - b) for a, b in zip(local, remote, strict=True)]
    assert max(gaps) <= TOLERANCE, list(zip(local, remote, strict=True))
    assert any(c > 0.5 for c in remote) and any(c < 0.5 for c in remote)  # not one answer
