"""Several clients on one server: collections per client, settings checked before anything
is written, a cost budget per request, metadata and quota limits.

The LangGraph routes are absent from this app (a request the guard lets through gets
LangGraph's 404); a slow test runs the same refusals against a real server with two keys.
"""

from __future__ import annotations

import pytest
from starlette.testclient import TestClient

from server.app import app
from server.quotas import Usage, quota_problem
from tools.config import load_settings
from tools.store.collection import Collection

KEYS = "alice:KEY-A,bob:KEY-B"
ALICE, BOB = {"X-API-Key": "KEY-A"}, {"X-API-Key": "KEY-B"}


@pytest.fixture(autouse=True, params=["embedded", "postgres"])
def store(request, monkeypatch):
    """Every test on both stores: collections per client hold on PostgreSQL too."""
    if request.param == "postgres":
        monkeypatch.setenv("RAG_STORE", "postgres")
        monkeypatch.setenv("RAG_DATABASE_URL", request.getfixturevalue("database_url"))
    return request.param


@pytest.fixture
def client(corpus_env, monkeypatch):
    monkeypatch.setenv("RAG_CLIENT_KEYS", KEYS)
    monkeypatch.setenv("RAG_CLIENT_COLLECTIONS", "alice:docs+shared,bob:bobdocs")
    for name in ("bobdocs", "shared"):  # empty collections are enough to be listed
        Collection(load_settings(), name, create=True).close()
    return TestClient(app, base_url="http://127.0.0.1:8123")


def ask(client, headers, collection=None, **configurable):
    body = {"assistant_id": "rag", "input": {"question": "How do I install it?"}}
    if collection:
        body["input"]["collection"] = collection
    if configurable:
        body["config"] = {"configurable": configurable}
    return client.post("/runs/wait", json=body, headers=headers)


def test_each_client_reads_only_its_collections_and_sees_no_others(client):
    assert ask(client, ALICE, "docs").status_code == 404  # passed the guard
    assert ask(client, BOB, "bobdocs").status_code == 404
    refused = ask(client, BOB, "docs")  # Alice's: refused as a missing one is
    missing = ask(client, BOB, "nosuchdocs")
    assert refused.status_code == missing.status_code == 422
    assert refused.json()["detail"].replace("'docs'", "'X'") == missing.json()["detail"].replace(
        "'nosuchdocs'", "'X'"
    )
    assert "known: bobdocs " in refused.json()["detail"]  # nothing of Alice's named
    assert client.get("/healthz", headers=BOB).json() == {"ok": True}


def test_an_unlisted_client_reads_nothing(client, monkeypatch):
    monkeypatch.setenv("RAG_CLIENT_KEYS", KEYS + ",carol:KEY-C")
    response = ask(client, {"X-API-Key": "KEY-C"}, "docs")
    assert response.status_code == 422 and "known: none" in response.json()["detail"]


def test_an_as_of_that_names_no_version_is_422_before_any_snapshot(client, corpus_env):
    for _ in range(3):
        response = ask(client, ALICE, "docs", as_of=7)
        assert response.status_code == 422
        assert "as_of=7: no version 7 (versions: [1])" in response.json()["detail"]
    assert not (corpus_env.data_dir / "snapshots").exists()
    with pytest.raises(ValueError, match="no version 7"):
        Collection(load_settings({"as_of": 7}), "docs")
    assert list((corpus_env.data_dir / "snapshots").glob("*")) == []  # nothing left behind


def test_a_request_over_the_model_call_budget_is_422_naming_the_steps(client):
    assert ask(client, ALICE, "docs", k=2, rerank="llm").status_code == 404  # 15 calls
    response = ask(client, ALICE, "docs", k=20, rerank="llm", max_regenerations=5)
    detail = response.json()["detail"]
    assert response.status_code == 422
    assert "make 66 model calls" in detail and "rerank 40" in detail
    assert "max_model_calls=16" in detail


def test_big_metadata_is_refused_on_threads_and_runs(client):
    big = {"note": "x" * 5000}
    assert client.post("/threads", json={"metadata": big}, headers=ALICE).status_code == 422
    patched = client.patch("/threads/t1", json={"metadata": big}, headers=ALICE)
    assert patched.status_code == 422 and "client_max_metadata_bytes=4096" in patched.text
    body = {"assistant_id": "rag", "input": {"question": "q"}, "metadata": big}
    assert client.post("/runs", json=body, headers=ALICE).status_code == 422
    assert client.post("/threads", json={"metadata": {"a": 1}}, headers=ALICE).status_code == 404


@pytest.mark.parametrize(
    ("usage", "new_thread", "run", "expected"),
    [
        (Usage(3, 1, 1000), True, True, None),
        (Usage(100, 0, 1000), True, False, "you keep 100 threads"),
        (Usage(100, 0, 1000), False, True, None),  # a run on a thread it has
        (Usage(3, 2, 1000), False, True, "2 runs pending or running"),
        (Usage(3, 0, 60_000_000), False, True, "60.0 MB, over client_max_stored_mb=50"),
    ],
)
def test_quotas_refuse_with_429_and_retry_after(usage, new_thread, run, expected):
    refusal = quota_problem(usage, load_settings(), new_thread=new_thread, run=run)
    if expected is None:
        assert refusal is None
    else:
        assert refusal.status == 429 and refusal.retry_after_s and expected in refusal.detail
