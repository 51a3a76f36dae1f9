"""Each client's limits hold inside the graph, with no middleware in front of it.

The server's middleware refuses a foreign collection early (server/app.py), but a
request that slipped past it, a value saved in a thread's state, or a setting from an
earlier turn must not widen what a client reads or spends: the graph resolves every
node's settings through graph/configuration.py, which checks the run's authenticated
client (``langgraph_auth_user_id``, set by the LangGraph server) each time.
"""

from __future__ import annotations

import pytest
from langgraph.checkpoint.memory import InMemorySaver

from graph import build_graph
from graph.configuration import AccessRefused
from ingest.partition import PartitionOptions
from ingest.pipeline import IngestOptions, Ingestor
from tests.unit.conftest import EMB
from tools.config import load_settings
from tools.store.collection import Collection

BOB_SECRET = "Bob's release is called Heron."


@pytest.fixture
def two_clients(corpus_env, monkeypatch, tmp_path):
    monkeypatch.setenv("RAG_CLIENT_KEYS", "alice:key-a,bob:key-b")
    monkeypatch.setenv("RAG_CLIENT_COLLECTIONS", "alice:docs,bob:bobdocs")
    folder = tmp_path / "bob"
    folder.mkdir()
    (folder / "plan.md").write_text(f"# Plan\n\n{BOB_SECRET}\n")
    settings = load_settings()
    Ingestor(
        settings,
        Collection(settings, "bobdocs", create=True),
        EMB,
        IngestOptions(partition=PartitionOptions("structure", 100, 0)),
        progress=False,
    ).run([folder])


def as_client(client: str, thread: str = "t1", **configurable) -> dict:
    """A run's config as the LangGraph server hands it to the graph after auth."""
    return {
        "configurable": {
            "langgraph_auth_user_id": client,
            "langgraph_request_id": "r",
            "thread_id": thread,
            **configurable,
        }
    }


QUESTION = {"question": "How do I install the service?"}
HERON = {"question": "What is Bob's release called?"}  # what bobdocs answers


def test_a_foreign_collection_in_the_config_is_refused(two_clients, models):
    app = build_graph(InMemorySaver())
    with pytest.raises(AccessRefused, match="unknown collection 'bobdocs'"):
        app.invoke(HERON, as_client("alice", collection="bobdocs"), context=models.services)
    out = app.invoke(HERON, as_client("bob", "t2", collection="bobdocs"), context=models.services)
    assert BOB_SECRET in str(out["passages"])  # the owner reads it


def test_a_foreign_collection_in_the_input_is_refused(two_clients, models):
    app = build_graph(InMemorySaver())
    with pytest.raises(AccessRefused):
        app.invoke(
            {**QUESTION, "collection": "bobdocs"}, as_client("alice"), context=models.services
        )


def test_a_foreign_collection_in_saved_state_is_refused(two_clients, models):
    app = build_graph(InMemorySaver())
    config = as_client("alice")
    first = app.invoke(QUESTION, config, context=models.services)
    assert BOB_SECRET not in str(first)
    app.update_state(config, {"collection": "bobdocs"})  # a state write, however it came
    with pytest.raises(AccessRefused):
        app.invoke(HERON, config, context=models.services)


def test_an_earlier_turns_settings_do_not_carry_into_the_next(two_clients, models):
    """Turn 1 asks for the LLM reranker (within budget at k=2); turn 2 only sets k=50.
    Before, turn 2 reran the reranker of turn 1: about 100 grading calls."""
    app = build_graph(InMemorySaver())
    config = as_client("alice")
    first = app.invoke({**QUESTION, "k": 2, "rerank": "llm"}, config, context=models.services)
    graded = len(models.chats["query"].calls)
    assert "rerank" in first["timings"] and graded >= 3  # one grading call per passage
    second = app.invoke({**QUESTION, "k": 50}, config, context=models.services)
    assert "rerank" not in second["timings"]  # no reranker ran
    assert len(models.chats["query"].calls) - graded <= 1  # the follow-up's rephrasing
    state = app.get_state(config).values
    assert state.get("rerank") is None and state.get("k") is None


def test_settings_over_the_budget_are_refused_in_the_graph(two_clients, models):
    app = build_graph(InMemorySaver())
    with pytest.raises(AccessRefused, match="max_model_calls"):
        app.invoke(
            {**QUESTION, "k": 50, "rerank": "llm"}, as_client("alice"), context=models.services
        )


def test_an_unauthenticated_server_run_reads_as_anyone(two_clients, models):
    """A server run with no authenticated identity (a route that skipped auth) is held
    to the limits of 'anyone', whom client_collections lists nowhere: it reads nothing."""
    app = build_graph(InMemorySaver())
    config = {"configurable": {"langgraph_request_id": "r", "thread_id": "t"}}
    with pytest.raises(AccessRefused):
        app.invoke(QUESTION, config, context=models.services)


def test_in_process_callers_are_the_operator(two_clients, models):
    from graph import config_for

    out = build_graph().invoke(HERON, config_for(collection="bobdocs"), context=models.services)
    assert BOB_SECRET in str(out["passages"])


def test_a_foreign_collection_from_an_earlier_turn_is_never_read(two_clients, models):
    """Bob's turn on a thread named his collection; Alice's next turn on that thread
    names none. It runs on her own settings: his collection is not inherited (and a
    value left in the state by a turn that never finished is refused, above)."""
    app = build_graph(InMemorySaver())
    bobs = app.invoke(
        {**HERON, "collection": "bobdocs"}, as_client("bob", "shared"), context=models.services
    )
    assert BOB_SECRET in str(bobs["passages"])
    alices = app.invoke(HERON, as_client("alice", "shared"), context=models.services)
    assert BOB_SECRET not in str(alices["passages"]) and BOB_SECRET not in alices["answer"]
