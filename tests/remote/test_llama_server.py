"""The OpenAI-compatible path against a real server: ``llama_cpp.server`` serving the 135M
test model, started and stopped here (tests/llama_server.py). What is under test is the
remote path itself (streaming, log-probabilities, the sampled confidence, faults), not
the tiny model's answers, so the embeddings are the unit tests' deterministic ones.
"""

from __future__ import annotations

import json
import threading
import urllib.request
from dataclasses import asdict
from typing import get_args

import pytest
from langchain_core.messages import HumanMessage

from graph import build_graph, config_for
from graph.checks.pipeline import verify_answer
from graph.draft import DRAFT
from graph.results import Outcome
from graph.services import Services
from ingest.partition import PartitionOptions
from ingest.pipeline import IngestOptions, Ingestor
from tests.fakes import HashEmbeddings
from tests.llama_server import LlamaServer, WithoutLogprobs
from tools.answer_check import SETTLE_PROBE
from tools.config import Settings, load_settings
from tools.models.local_assets import SMOLLM2_135M, resolve_gguf
from tools.retrieval.hybrid import Passage
from tools.store.collection import Collection

EMB = HashEmbeddings()
PAGE = "# Install\n\nRun make demo to install the service. It takes 4 minutes the first time.\n"
QUESTION = "How do I install the service?"
RIGHT = "Run make demo to install the service [1]."
PASSAGES = [asdict(Passage(PAGE, "install.md", ["i"], 0.0, 0.0))]
ROLES = ("generator", "query", "verifier")


def tiny_model():
    return resolve_gguf(SMOLLM2_135M.name, Settings().resolved_cache_dir())


@pytest.fixture(scope="module")
def server():
    with LlamaServer(tiny_model(), "tiny", threads=1) as running:
        yield running


@pytest.fixture
def docs(tmp_path, monkeypatch):
    """A collection of one page, ingested with the deterministic embeddings."""
    root = tmp_path / "docs"
    root.mkdir()
    (root / "install.md").write_text(PAGE)
    monkeypatch.setenv("RAG_DISTANCE_THRESHOLD", "2.0")
    settings = load_settings()
    options = IngestOptions(partition=PartitionOptions("structure", 100, 0))
    Ingestor(settings, Collection(settings, "docs", create=True), EMB, options, progress=False).run(
        [root]
    )
    return settings


def remote(spec: str, **more) -> dict:
    return {f"{role}_model": spec for role in ROLES} | {"llm_max_retries": 0, **more}


SERVICES = Services(embed=lambda _: EMB, embed_documents=lambda _: EMB)


def streamed(config) -> tuple[list[str], dict]:
    pieces, final = [], {}
    for mode, chunk in build_graph().stream(
        {"question": QUESTION}, config, stream_mode=["custom", "values"], context=SERVICES
    ):
        if mode == "custom" and chunk.get("kind") == DRAFT:
            pieces.append(chunk["text"])
        elif mode == "values":
            final = chunk
    return pieces, final


OUTCOMES = get_args(Outcome)  # any label: the 135M model's drafts fail the checks


def test_an_answer_streams_from_a_real_server_and_is_checked(server, docs):
    pieces, out = streamed(config_for(**remote(server.spec())))
    assert len(pieces) > 1  # token by token, as the server streamed it
    assert out["error"] is None and out["outcome"] in OUTCOMES
    # the 135M model's drafts fail the citation checks, so its verifier is tested below
    assert out["verdict"]["checked_by"] == server.spec() and out["verdict"].get("error") is None


def test_the_remote_verifier_reads_its_confidence_from_logprobs(server):
    settings = load_settings(remote(server.spec()))
    verdict = verify_answer(
        SERVICES.judge(settings), QUESTION, RIGHT, PASSAGES, threshold=0.6, phrase_threshold=0.6
    )
    assert verdict["confidence_method"] == "logprobs"
    assert 0.0 <= verdict["confidence"] <= 1.0 and verdict["confidence"] not in (0.0, 1.0)


def test_a_provider_without_logprobs_is_read_by_sampling_the_same_model(server):
    with WithoutLogprobs(server.base_url) as proxy:
        spec = f"openai:tiny@{proxy.base_url}"
        settings = load_settings(remote(spec, verifier_samples=6))
        verdict = verify_answer(
            Services().judge(settings),
            QUESTION,
            RIGHT,
            PASSAGES,
            threshold=0.6,
            phrase_threshold=0.6,
        )
        held = load_settings(remote(spec, verifier_confidence="logprobs"))
        with pytest.raises(Exception, match="RAG_VERIFIER_CONFIDENCE=sampled") as refused:
            Services().judge(held).yes([HumanMessage(SETTLE_PROBE)])
    assert verdict["confidence_method"] == "sampled"
    assert verdict["confidence"] * 6 == pytest.approx(round(verdict["confidence"] * 6), abs=0.01)
    assert refused.value.kind == "malformed_output"
    seeds = [r["seed"] for r in proxy.requests if "seed" in r]
    assert seeds == list(range(6))  # one request per sample, each its own seed


def test_the_litellm_path_reaches_the_same_server(server):
    spec = f"litellm:openai/tiny@{server.base_url}"
    settings = load_settings(remote(spec))
    reply = Services().llm(settings, "generator").invoke("Say hello.")
    assert reply.text.strip()
    reading = Services().judge(settings).yes([HumanMessage(SETTLE_PROBE)])
    assert reading.method == "logprobs" and 0.0 <= reading.shares["yes"] <= 1.0


def test_a_server_killed_mid_answer_is_a_typed_error(docs):
    with LlamaServer(tiny_model(), "tiny", threads=1) as dying:
        config = config_for(**remote(dying.spec(), llm_max_tokens=2000))
        final: dict = {}
        for mode, chunk in build_graph().stream(
            {"question": "Write a long essay on installing software."},
            config,
            stream_mode=["custom", "values"],
            context=SERVICES,
        ):
            if mode == "custom" and chunk.get("kind") == DRAFT and dying.process.poll() is None:
                dying.kill()
            elif mode == "values":
                final = chunk
    assert final["error"]["stage"] == "generate_answer"
    assert final["error"]["type"] == "model_error" and final["abstained"] is True


def test_a_server_busy_past_the_deadline_is_a_timeout(docs):
    with LlamaServer(tiny_model(), "tiny", threads=1) as busy:
        long = {
            "model": "tiny",
            "messages": [{"role": "user", "content": "Count from 1 to 5000, one per line."}],
            "max_tokens": 4000,
        }
        request = urllib.request.Request(
            f"{busy.base_url}/chat/completions",
            json.dumps(long).encode(),
            {"Content-Type": "application/json"},
        )
        hog = threading.Thread(target=lambda: urllib.request.urlopen(request, timeout=120).read())
        hog.start()
        config = config_for(**remote(busy.spec(), llm_timeout_s=1.0))
        out = build_graph().invoke({"question": QUESTION}, config, context=SERVICES)
        busy.kill()
        hog.join(timeout=10)
    assert out["error"]["type"] == "timeout" and out["abstained"] is True
