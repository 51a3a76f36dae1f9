"""Limits where threads and runs are made: the LangGraph auth handlers (server/auth.py)
refuse, whatever route raised the event, what the door refuses on the routes it knows.

The v2 ``commands`` route and the WebSocket ``run.start`` reach LangGraph's run
insertion with a ``threads.create_run`` event shaped as below (langgraph-api 0.16.7,
event_streaming/service.py: ``if_not_exists="create"``, the client's ``metadata`` and
``config``). The handlers run here on the in-memory runtime's own store, as in
`rag serve`; the slow test tests/slow/test_server_isolation.py drives a real server.
"""

from __future__ import annotations

import asyncio
import uuid
from types import SimpleNamespace

import pytest
from langgraph_sdk import Auth

from server import quotas
from server.auth import served_events_only
from server.memory_records import reserve
from server.quotas import RESERVATION_TTL_S, Place

CAP = 4


@pytest.fixture(autouse=True)
def store(monkeypatch):
    """The in-memory runtime's store, emptied before and after; a fresh reservation book."""
    from langgraph_runtime_inmem.database import connect

    monkeypatch.setenv("RAG_CLIENT_KEYS", "alice:key-a,bob:key-b")
    monkeypatch.setenv("RAG_CLIENT_MAX_THREADS", str(CAP))
    quotas._records.cache_clear()

    async def records():
        async with connect() as conn:
            return conn.store

    data = asyncio.run(records())
    saved = {name: list(data[name]) for name in ("threads", "runs")}
    for name in saved:
        data[name].clear()
    yield data
    for name, rows in saved.items():
        data[name][:] = rows
    quotas._records.cache_clear()


def ctx(action: str, who: str = "alice"):
    user = SimpleNamespace(identity=who, display_name=who)
    return SimpleNamespace(user=user, resource="threads", action=action, permissions=[])


def thread(owner: str) -> dict:
    return {"thread_id": uuid.uuid4(), "metadata": {"owner": owner}, "status": "idle"}


def run_start(**changes) -> dict:
    """The event the v2 routes raise for ``run.start`` on a thread not yet made."""
    value = {
        "thread_id": uuid.uuid4(),
        "run_id": uuid.uuid4(),
        "if_not_exists": "create",
        "metadata": {},
        "kwargs": {
            "input": {"question": "q"},
            "config": {"configurable": {"thread_id": "t"}},
            "command": None,
            "webhook": None,
        },
    }
    for key, val in changes.items():
        target = value["kwargs"] if key in ("input", "config", "command") else value
        target[key] = val
    return value


def refused(action: str, value: dict, who: str = "alice") -> Auth.exceptions.HTTPException:
    with pytest.raises(Auth.exceptions.HTTPException) as caught:
        asyncio.run(served_events_only(ctx(action, who), value))
    return caught.value


@pytest.mark.parametrize(
    ("changes", "status", "words"),
    [
        ({"metadata": {"note": "x" * 5000}}, 422, "client_max_metadata_bytes"),
        ({"input": {"question": "q", "messages": ["hi"] * 150}}, 422, "150 messages"),
        ({"input": {"question": "q", "messages": ["x" * 20_001]}}, 422, "20000 characters"),
        ({"config": {"configurable": {}, "metadata": {"a": 1}}}, 422, "'config' may hold"),
        ({"command": {"resume": 1}}, 422, "'command'"),
    ],
)
def test_a_run_from_any_route_meets_the_request_limits(store, changes, status, words):
    error = refused("create_run", run_start(**changes))
    assert error.status_code == status and words in error.detail


def test_a_run_that_makes_a_thread_needs_a_place_under_the_thread_cap(store):
    store["threads"].extend(thread("alice") for _ in range(CAP))
    error = refused("create_run", run_start())
    assert error.status_code == 429 and "client_max_threads" in error.detail
    mine = run_start(thread_id=store["threads"][0]["thread_id"])  # an existing one: no cap
    assert asyncio.run(served_events_only(ctx("create_run"), mine)) == {"owner": "alice"}
    stateless = run_start(thread_id=None)  # a stateless run makes a temporary thread
    assert refused("create_run", stateless).status_code == 429
    # bob's count is his own
    assert asyncio.run(served_events_only(ctx("create_run", "bob"), run_start())) is not None


def test_parallel_thread_creations_at_cap_minus_one_admit_exactly_one(store):
    store["threads"].extend(thread("alice") for _ in range(CAP - 1))

    async def burst():
        values = [{"thread_id": uuid.uuid4(), "metadata": {}} for _ in range(12)]
        calls = (served_events_only(ctx("create"), v) for v in values)
        return await asyncio.gather(*calls, return_exceptions=True)

    results = asyncio.run(burst())
    admitted = [r for r in results if r == {"owner": "alice"}]
    statuses = [r.status_code for r in results if isinstance(r, Auth.exceptions.HTTPException)]
    assert len(admitted) == 1 and statuses == [429] * 11, results


def test_events_no_served_route_raises_are_refused(store):
    for resource, action in (("store", "put"), ("crons", "create"), ("assistants", "create")):
        event = SimpleNamespace(**vars(ctx(action)))
        event.resource = resource
        with pytest.raises(Auth.exceptions.HTTPException) as caught:
            asyncio.run(served_events_only(event, {}))
        assert caught.value.status_code == 404
    assert refused("update", {"thread_id": "t", "values": {}}).status_code == 404  # state write


@pytest.mark.parametrize("place", list(Place))
def test_a_reservation_counts_until_its_record_exists_and_no_longer(place):
    """The handlers' reservation bridges the count and the insertion; once the record
    is there it counts as a record, and one never recorded stops after the TTL."""
    store: dict = {"threads": [], "runs": []}
    book: dict = {}
    assert reserve(store, book, "bob", place, "k1", 2, now=0.0) is None
    assert reserve(store, book, "bob", place, "k2", 2, now=0.0) is None
    assert reserve(store, book, "bob", place, "k3", 2, now=0.0) == 2  # two in flight: the cap
    assert reserve(store, book, "alice", place, "a1", 2, now=0.0) is None  # another's cap
    # k1's record appears (as a run; a thread reservation also ends with its thread)
    store["threads"].append({"thread_id": "t", "metadata": {"owner": "bob"}})
    store["runs"].append(
        {"run_id": "k1", "thread_id": "t", "status": "running", "metadata": {"owner": "bob"}}
    )
    assert reserve(store, book, "bob", place, "k3", 2, now=0.1) == 2  # counted once
    store["runs"].clear()
    store["threads"].clear()
    later = RESERVATION_TTL_S + 0.2
    assert reserve(store, book, "bob", place, "k4", 2, now=later) is None
    assert reserve(store, book, "bob", place, "k5", 2, now=later) is None


def test_a_client_over_its_stored_bytes_makes_no_run_or_thread_from_any_route(store, monkeypatch):
    """The stored-bytes quota is read where runs and threads are made, not only at the door."""
    monkeypatch.setenv("RAG_CLIENT_MAX_STORED_MB", "0.001")  # 1,000 bytes
    held = thread("alice")
    held["values"] = {"answer": "x" * 2000}
    store["threads"].append(held)
    on_its_thread = run_start(thread_id=held["thread_id"])
    for action, value in (("create_run", on_its_thread), ("create", {"thread_id": uuid.uuid4()})):
        error = refused(action, value)
        assert error.status_code == 429 and "client_max_stored_mb" in error.detail, error.detail
    assert asyncio.run(served_events_only(ctx("create_run", "bob"), run_start())) is not None
