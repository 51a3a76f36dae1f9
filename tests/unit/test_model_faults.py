"""Model faults end as a typed ``error`` in the answer object after bounded retries."""

from __future__ import annotations

import pytest

from graph import build_graph, config_for, prompts
from graph.services import Services
from tests.unit.conftest import EMB
from tools.errors import LLMTimeoutError, ModelError
from tools.resilient import ResilientEmbeddings, with_retries


class APITimeoutError(Exception):
    """Named like openai's: recognised as a timeout by its name, as the SDK's is."""


def ask(models, question="How do I install the service?", **config):
    return build_graph().invoke(
        {"question": question}, config_for(**config), context=models.services
    )


def raising(exc):
    def respond(_messages):
        raise exc

    return respond


@pytest.mark.parametrize(
    ("respond", "kind", "calls"),
    [
        (raising(LLMTimeoutError("no complete answer within llm_timeout_s=1s")), "timeout", 1),
        (raising(APITimeoutError("Request timed out.")), "timeout", 1),  # never retried
        (raising(RuntimeError("llama_decode returned -3")), "model_error", 3),
        (raising(ConnectionError("connection refused")), "model_error", 3),
        # llama.cpp's words; an overflow would overflow again, so it is not retried
        (
            raising(ValueError("Requested tokens (4710) exceed context window of 4096")),
            "context_overflow",
            1,
        ),
        (lambda m: "", "empty_answer", 3),
        (lambda m: "  \n ", "empty_answer", 3),
    ],
)
def test_generator_fault_is_a_typed_error_after_bounded_retries(
    corpus_env, models, respond, kind, calls
):
    models.chats["generator"].respond = respond
    out = ask(models, llm_max_retries=2)
    assert out["error"]["type"] == kind and out["error"]["stage"] == "generate_answer"
    assert out["abstained"] is True and out["answer"].startswith("No answer: the generate_answer")
    assert out["citations"] == [] and out["verdict"] == {}
    assert len(models.chats["generator"].calls) == calls
    assert models.chats["verifier"].calls == []


def test_a_reply_after_a_failure_is_used(corpus_env, models):
    replies = iter(["", "Run make demo to install the service [1]."])
    models.chats["generator"].respond = lambda m: next(replies)
    out = ask(models, llm_max_retries=1)
    assert out["error"] is None and out["abstained"] is False
    assert out["answer"] == "Run make demo to install the service [1]."


@pytest.mark.parametrize(
    ("first_token", "kind"),
    [
        (None, "malformed_output"),  # no log-probabilities, and sampled replies say "Maybe"
        (lambda m: {"maybe": 0.9, "x": 0.1}, "malformed_output"),  # neither yes nor no
        (raising(ValueError("provider exploded")), "model_error"),
        (raising(LLMTimeoutError("verifier timed out")), "timeout"),
    ],
)
def test_verifier_fault_keeps_the_answer_marked_unchecked(corpus_env, models, first_token, kind):
    models.chats["verifier"].first_token = first_token
    models.chats["verifier"].respond = lambda _: "Maybe."
    out = ask(models, llm_max_retries=1)
    assert out["error"]["type"] == kind and out["error"]["stage"] == "verify"
    assert out["answer"].startswith("Run make demo") and out["abstained"] is False
    assert out["verdict"]["grounded"] is False and out["verdict"]["confidence"] is None
    assert out["outcome"] == "not_verified"
    assert len(models.chats["generator"].calls) == 1  # an unchecked answer is not regenerated


def test_failed_rephrasing_falls_back_to_the_question(corpus_env, models):
    from langchain_core.messages import AIMessage, HumanMessage

    models.chats["query"].respond = raising(RuntimeError("down"))
    history = [HumanMessage("How do I enable tracing?"), AIMessage("Set the keys [1].")]
    out = build_graph().invoke(
        {"question": "How do I install the service?", "messages": history},
        config_for(llm_max_retries=1, multi_query=3),
        context=models.services,
    )
    assert out["queries"] == ["How do I install the service?"] and out["error"] is None
    assert out["abstained"] is False


def test_failed_llm_rerank_falls_back_to_retrieval_order(corpus_env, models):
    models.chats["query"].respond = lambda m: "garbage"
    out = ask(models, rerank="llm", k=2, llm_max_retries=0, distance_threshold=2.0)
    assert out["retrieval"]["rerank_error"]["type"] == "malformed_output"
    assert out["abstained"] is False and out["error"] is None


class DeadEmbeddings:
    def __init__(self, exc: Exception) -> None:
        self.exc, self.calls = exc, 0

    def embed_documents(self, texts):
        self.calls += 1
        raise self.exc

    embed_query = embed_documents


@pytest.mark.parametrize(
    ("exc", "kind", "calls"),
    [(ConnectionError("refused"), "model_error", 2), (APITimeoutError("slow"), "timeout", 2)],
)
def test_embedding_failure_at_question_time_is_typed(
    corpus_env, models, monkeypatch, exc, kind, calls
):
    dead = DeadEmbeddings(exc)
    models.services = Services(
        chat=lambda s, role: models.chats[role],
        embed=lambda s: ResilientEmbeddings(dead, 1, backoff_s=0),
    )
    out = ask(models)
    assert out["error"]["type"] == kind and out["error"]["stage"] == "retrieve"
    assert out["abstained"] is True and dead.calls == calls
    assert models.chats["generator"].calls == []


def test_error_is_reset_by_the_next_question_on_a_thread(corpus_env, models):
    from langgraph.checkpoint.memory import InMemorySaver

    app = build_graph(checkpointer=InMemorySaver())
    config = config_for(thread_id="t", llm_max_retries=0)
    models.chats["generator"].respond = raising(RuntimeError("down"))
    question = {"question": "How do I install the service?"}
    assert app.invoke(question, config, context=models.services)["error"]
    models.chats["generator"].respond = lambda m: "Run make demo to install the service [1]."
    models.rephrased = "How do I install the service?"
    second = app.invoke(question, config, context=models.services)
    assert second["error"] is None and second["abstained"] is False


def test_with_retries_message_and_type():
    attempts = []

    def call():
        attempts.append(1)
        raise OSError("boom")

    with pytest.raises(ModelError, match=r"thing: OSError: boom \(after 3 attempts\)"):
        with_retries(call, retries=2, what="thing")
    assert len(attempts) == 3


def test_abstention_text_names_the_stage_and_type():
    text = prompts.ABSTAIN_ERROR.format(type="timeout", stage="verify", message="slow")
    assert "verify" in text and "timeout" in text


def test_rag_ask_prints_the_typed_error_and_exits_1(corpus_env, models, capsys):
    from rag_cli.main import main

    models.chats["generator"].respond = raising(LLMTimeoutError("no complete answer"))
    assert main(["ask", "How do I install the service?"], services=models.services) == 1
    out = capsys.readouterr().out
    assert "error (timeout in generate_answer): no complete answer" in out
    assert main(["ask", "How do I install the service?", "--json"], services=models.services) == 1
    assert '"type": "timeout"' in capsys.readouterr().out


def test_an_overflow_says_which_setting_helps():
    with pytest.raises(ModelError, match=r"lower k .* raise llm_context_tokens"):
        overflow = ValueError("Requested tokens (4710) exceed context window of 4096")
        with_retries(lambda: raising(overflow)([]), retries=2, what="generate_answer")


def test_a_dead_endpoint_is_one_line_before_any_retrieval(corpus_env, models, capsys):
    from rag_cli.main import main
    from tests.net import free_port

    url = f"http://127.0.0.1:{free_port()}/v1"  # nothing listens there
    embedded = len(EMB.calls)
    code = main(
        ["ask", "How do I install?", "--generator-model", f"openai:foo@{url}"],
        services=models.services,
    )
    assert code == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert "generator" in err and url in err and "RAG_GENERATOR_MODEL" in err
    assert "3 attempts" in err  # llm_max_retries + 1
    assert len(EMB.calls) == embedded  # the question was never embedded: no retrieval ran


def test_a_failing_endpoint_is_tried_exactly_llm_max_retries_plus_one_times(corpus_env):
    """Through the shipped path: the real model factory (ChatOpenAI, its own retries off)
    and the one retry layer. The server accepts each connection and drops it."""
    import socket
    import threading

    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    accepted: list[int] = []

    def drop() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            accepted.append(1)
            conn.close()

    threading.Thread(target=drop, daemon=True).start()
    spec = f"openai:m@http://127.0.0.1:{server.getsockname()[1]}/v1"
    try:
        out = build_graph().invoke(
            {"question": "How do I install the service?"},
            config_for(generator_model=spec, llm_max_retries=3, max_regenerations=0),
            context=Services(embed=lambda settings: EMB),  # the product's chat factory
        )
    finally:
        server.close()
    assert out["error"]["type"] == "model_error" and out["error"]["stage"] == "generate_answer"
    assert "after 4 attempts" in out["error"]["message"]
    assert len(accepted) == 4  # llm_max_retries + 1: no hidden retries in the SDK


def test_an_embedding_outage_at_question_time_is_a_typed_retrieve_error(
    tmp_path, monkeypatch, models
):
    """Through the shipped path: the product's question-time embedder (the remote
    provider wrapped in the one retry layer) against an endpoint that refuses."""
    from ingest.partition import PartitionOptions
    from ingest.pipeline import IngestOptions, Ingestor
    from tests.net import free_port
    from tests.unit.conftest import PAGES
    from tools.config import load_settings
    from tools.store.collection import Collection

    spec = f"openai:emb@http://127.0.0.1:{free_port()}/v1"  # nothing listens there
    monkeypatch.setenv("RAG_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("RAG_EMBEDDING_MODEL", spec)
    root = tmp_path / "docs"
    root.mkdir()
    for name, text in PAGES.items():
        (root / name).write_text(text)
    settings = load_settings()
    options = IngestOptions(partition=PartitionOptions("structure", 100, 0))
    Ingestor(settings, Collection(settings, "docs", create=True), EMB, options).run([root])
    out = build_graph().invoke(
        {"question": "How do I install the service?"},
        config_for(llm_max_retries=1),
        context=Services(chat=lambda s, role: models.chats[role]),  # the real embedder
    )
    assert out["error"]["type"] == "model_error" and out["error"]["stage"] == "retrieve"
    assert "after 2 attempts" in out["error"]["message"]
    assert out["abstained"] is True and models.chats["generator"].calls == []
