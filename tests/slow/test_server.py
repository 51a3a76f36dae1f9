"""A real LangGraph server (`rag serve`) on 127.0.0.1, driven with the official langgraph-sdk.

Runs are kept few: each costs ~1 s of queue polling in the in-memory runtime. The tiny
local model (SmolLM2-135M) stands in for the generator here because these tests are
about the endpoint (threads, streaming, schemas, validation), not answer quality.
"""

from __future__ import annotations

import asyncio
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from langgraph_sdk import get_client

from bench.local_service import (
    RAG,
    REPO,
    ingest,
    smollm2_env,
    start,
    wait_until_up,
)
from graph.builder import DIRECT_PATH
from tests.corpus import FROZEN_DOCS
from tests.graph_runs import model_faults
from tests.net import free_port

pytestmark = pytest.mark.slow
NODES = set(DIRECT_PATH)


@pytest.fixture(scope="module")
def server_env(tmp_path_factory):
    env = smollm2_env(tmp_path_factory.mktemp("server-data"), max_question_chars="500")
    ingest(env, FROZEN_DOCS)
    return env


@dataclass
class Server:
    url: str
    key: str
    http: httpx.Client  # sends the key, as every legitimate client does


@pytest.fixture(scope="module")
def server(server_env, tmp_path_factory):
    """A default `rag serve`: loopback, no key configured, so it generates one."""
    env = server_env
    existed = (REPO / ".langgraph_api").exists()
    port = free_port()
    log = tmp_path_factory.mktemp("server-log") / "server.log"
    proc = start(["serve", "--port", str(port)], env, log)
    url = f"http://127.0.0.1:{port}"
    key_file = Path(env["RAG_DATA_DIR"]) / "server" / "api_key"
    key = lambda: key_file.read_text().strip()  # noqa: E731  (written at start-up)
    wait_until_up(proc, f"{url}/healthz", log, headers=lambda: {"X-API-Key": key()})
    headers = {"X-API-Key": key()}
    with httpx.Client(base_url=url, headers=headers, timeout=30) as http:
        yield Server(url, headers["X-API-Key"], http)
    proc.terminate()
    proc.wait(timeout=30)
    assert existed or not (REPO / ".langgraph_api").exists(), "server wrote into the repo"


def run(coro):
    return asyncio.run(coro)


def test_thread_wait_stream_and_follow_up(server):
    async def scenario():
        client = get_client(url=server.url, api_key=server.key)
        thread = await client.threads.create()
        tid = thread["thread_id"]
        updates, tokens = set(), []
        async for part in client.runs.stream(
            tid,
            "rag",
            input={"question": "What does rag doctor do?"},
            stream_mode=["updates", "custom"],
        ):
            if part.event == "updates":
                updates |= set(part.data)
            elif part.event == "custom" and part.data.get("kind") == "draft":
                tokens.append(part.data["text"])
        assert updates >= NODES
        assert len(tokens) >= 3  # the draft streams piece by piece, from the local model
        assert "NOT_IN_DOCUMENTS" not in "".join(tokens)

        follow = "And how do I get its report as JSON?"
        second = await client.runs.wait(tid, "rag", input={"question": follow})
        assert set(second) >= {
            "answer",
            "citations",
            "verdict",
            "abstained",
            "queries",
            "timings",
            "references",
            "trace_id",
        }
        assert not model_faults(second), second
        # output schema only: what the generator read, not the graph's working fields
        assert second["passages"] and "draft" not in second and "feedback" not in second
        assert second["queries"][0] != follow  # rephrased with the thread's history
        state = await client.threads.get_state(tid)
        assert len(state["values"]["messages"]) == 4  # two questions, two answers

        fresh = await client.threads.create()
        other = await client.runs.wait(
            fresh["thread_id"], "rag", input={"question": "What does rag doctor do?"}
        )
        assert other["queries"] == ["What does rag doctor do?"]  # a new thread starts clean
        # answered, or "the documents do not say" (the checks may withhold a draft no cited
        # sentence states): never a failed step or a refusal
        assert not model_faults(other) and other["outcome"] != "abstained", other

    run(scenario())


LINES = ("--splitter", "lines", "--chunk-size", "1", "--overlap", "0")


def test_rag_ingest_from_a_shell_reaches_the_running_server(server, server_env, tmp_path):
    """`rag ingest` is another process: the server must see its commits (a new collection,
    then a changed file) without a restart."""

    def ingest(text: str, *options: str) -> None:
        (tmp_path / "notes.md").write_text(f"# Release notes\n\n{text}\n")
        subprocess.run(
            [RAG, "ingest", str(tmp_path), "--collection", "notes", *options],
            env=server_env,
            check=True,
            capture_output=True,
        )

    def ask(question: str = "What is the release codename?") -> dict:
        body = {"assistant_id": "rag", "input": {"question": question, "collection": "notes"}}
        response = server.http.post("/runs/wait", json=body, timeout=180)
        assert response.status_code == 200, response.text
        return response.json()

    ingest("The release codename is Bluefin.")
    first = ask()
    assert first["error"] is None and first["retrieval"]["kept"] == 1
    ingest("The release codename is Marlin. It ships in May.")
    second = ask()
    assert second["error"] is None and second["retrieval"]["kept"] == 1
    # the passage changed with the file (before, this question failed: Chroma's
    # "Error finding id" for the replaced chunk's vector)
    assert second["retrieval"]["closest_distance"] != first["retrieval"]["closest_distance"]

    # 10,000 new chunks (one per line) from the shell, one of them the answer: the next
    # question finds it. Nothing is rebuilt in the server: the keyword index is on disk
    # in the manifest, which the ingestion committed to.
    bulk = tmp_path / "bulk"
    bulk.mkdir()
    for n in range(10):
        lines = [
            f"Line {n}-{i} of the archive holds record number {n * 1000 + i}." for i in range(1000)
        ]
        if n == 7:
            lines[500] = "The release mascot is a grey heron called Quillfeather."
        (bulk / f"archive{n}.txt").write_text("\n".join(lines) + "\n")
    ingest("The release codename is Marlin. It ships in May.", *LINES)
    thread = server.http.post("/threads", json={}).json()["thread_id"]
    question = {"question": "What is the release mascot called?", "collection": "notes"}
    third = server.http.post(
        f"/threads/{thread}/runs/wait",
        json={"assistant_id": "rag", "input": question},
        timeout=180,
    ).json()
    assert third["error"] is None, third["error"]
    passages = server.http.get(f"/threads/{thread}/state").json()["values"]["passages"]
    assert any(p["source"].endswith("archive7.txt") for p in passages), passages


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"assistant_id": "rag", "input": {}}, "input.question"),
        ({"assistant_id": "rag", "input": {"question": "   "}}, "input.question"),
        ({"assistant_id": "rag", "input": {"question": "x" * 501}}, "max_question_chars=500"),
        ({"assistant_id": "rag", "input": {"question": 42}}, "input.question"),
        ({"assistant_id": "rag", "input": {"question": "hi", "k": "many"}}, "k"),
        (
            {"assistant_id": "rag", "input": {"question": "hi", "collection": "nope"}},
            "unknown collection 'nope'",
        ),
        ({"assistant_id": "rag", "input": {"question": "hi", "colour": 1}}, "unknown input"),
        (
            {
                "assistant_id": "rag",
                "input": {"question": "hi"},
                "config": {"configurable": {"rerank": "magic"}},
            },
            "rerank",
        ),
    ],
)
def test_bad_requests_get_4xx_with_a_reason(server, body, message):
    response = server.http.post("/runs/wait", json=body, timeout=30)
    assert 400 <= response.status_code < 500
    assert message in response.json()["detail"]


def test_junk_body_and_server_stays_up(server):
    response = server.http.post(
        "/runs/wait",
        content=b"\xff{not json",
        headers={"Content-Type": "application/json"},
        timeout=30,
    )
    assert response.status_code == 422
    assert server.http.get("/healthz", timeout=5).json()["ok"] is True


def test_schemas_show_question_in_and_answer_out(server):
    assistants = server.http.post("/assistants/search", json={}, timeout=30).json()
    aid = next(a["assistant_id"] for a in assistants if a["graph_id"] == "rag")
    schemas = server.http.get(f"/assistants/{aid}/schemas", timeout=30).json()
    assert "question" in schemas["input_schema"]["properties"]
    assert "question" in schemas["input_schema"]["required"]
    assert {"answer", "citations", "verdict"} <= set(schemas["output_schema"]["properties"])


EVIL = "openai:evil@http://127.0.0.1:{port}/v1"


@pytest.fixture
def listener():
    """A loopback port that records every connection made to it."""
    import socket
    import threading

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen()
    sock.settimeout(0.2)
    seen: list[str] = []
    stop = threading.Event()

    def accept() -> None:
        while not stop.is_set():
            try:
                conn, _ = sock.accept()
            except OSError:
                continue
            seen.append(conn.recv(4096).decode("latin-1"))
            conn.close()

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield sock.getsockname()[1], seen
    stop.set()
    thread.join(timeout=2)
    sock.close()


def test_no_route_lets_a_request_aim_a_model_at_another_host(server, listener):
    port, seen = listener
    evil = {"generator_model": EVIL.format(port=port)}
    run_body = {"assistant_id": "rag", "input": {"question": "How do I run the server?"}}
    thread = server.http.post("/threads", json={}, timeout=30).json()["thread_id"]
    attempts = []
    for where in ("config", "context", "checkpoint"):
        body = {
            **run_body,
            **({"config": {"configurable": evil}} if where == "config" else {where: evil}),
        }
        for path in (
            "/runs",
            "/runs/wait",
            "/runs/stream",
            f"/threads/{thread}/runs",
            f"/threads/{thread}/runs/wait",
            f"/threads/{thread}/runs/stream",
        ):
            attempts.append(("POST", path, body))
        attempts += [
            ("POST", "/runs/batch", [body]),
            ("POST", "/runs/crons", {**body, "schedule": "* * * * *"}),
            ("POST", f"/threads/{thread}/runs/crons", {**body, "schedule": "* * * * *"}),
        ]
    attempts += [
        ("POST", "/assistants", {"graph_id": "rag", "config": {"configurable": evil}}),
        ("PATCH", "/assistants/anything", {"config": {"configurable": evil}}),
    ]
    for method, path, body in attempts:
        response = server.http.request(method, path, json=body, timeout=30)
        assert 400 <= response.status_code < 500, (method, path, response.text)
    time.sleep(2)  # a run that slipped through would have called the listener by now
    assert seen == []


def test_other_origins_and_foreign_host_names_are_refused(server):
    other = {"Origin": "http://127.0.0.1:9"}
    assert server.http.post("/threads/search", json={}, headers=other).status_code == 403
    rebound = {"Host": "evil.example"}
    assert server.http.get("/healthz", headers=rebound).status_code == 403
    same = {"Origin": server.url}
    assert server.http.post("/threads/search", json={}, headers=same).status_code == 200


def test_a_default_server_answers_only_clients_with_its_generated_key(server):
    """Loopback is shared by every user and process of the machine: no key, no answer."""
    for method, path in (
        ("POST", "/threads/search"),
        ("POST", "/runs/wait"),
        ("GET", "/threads/x"),
    ):
        response = httpx.request(method, f"{server.url}{path}", json={}, timeout=30)
        assert response.status_code == 401, (path, response.text)
    wrong = {"X-API-Key": server.key[:-1]}
    assert server.http.post("/threads/search", json={}, headers=wrong).status_code == 401


@contextmanager
def alice_and_bob(
    env: dict[str, str], tmp_path: Path, alice_timeout: float = 60
) -> Iterator[tuple[str, httpx.Client, httpx.Client]]:
    """A `rag serve` with two client keys, and a client for each: (url, alice, bob)."""
    env = {**env, "RAG_CLIENT_KEYS": "alice:key-a,bob:key-b"}
    port = free_port()
    log = tmp_path / "clients.log"
    proc = start(["serve", "--port", str(port)], env, log)
    url = f"http://127.0.0.1:{port}"
    alice = httpx.Client(base_url=url, headers={"X-API-Key": "key-a"}, timeout=alice_timeout)
    bob = httpx.Client(base_url=url, headers={"X-API-Key": "key-b"}, timeout=60)
    try:
        wait_until_up(proc, f"{url}/healthz", log, headers=lambda: {"X-API-Key": "key-a"})
        yield url, alice, bob
    finally:
        alice.close()
        bob.close()
        proc.terminate()
        proc.wait(timeout=30)


def test_each_client_sees_only_its_own_threads(server_env, tmp_path):
    """Several keys: LangGraph's own auth (server/auth.py) keeps clients apart."""
    with alice_and_bob(server_env, tmp_path) as (url, alice, bob):
        mine = alice.post("/threads", json={"metadata": {"topic": "x"}}).json()["thread_id"]
        assert [t["thread_id"] for t in alice.post("/threads/search", json={}).json()] == [mine]
        assert bob.post("/threads/search", json={}).json() == []
        assert bob.get(f"/threads/{mine}").status_code == 404
        run = {"assistant_id": "rag", "input": {"question": "What does rag doctor do?"}}
        assert bob.post(f"/threads/{mine}/runs/wait", json=run).status_code == 404
        assert bob.delete(f"/threads/{mine}").status_code == 404
        assert alice.get(f"/threads/{mine}").status_code == 200  # still there, still hers
        nobody = httpx.post(f"{url}/threads/search", json={}, headers={"X-API-Key": "key-c"})
        assert nobody.status_code == 401


def test_one_client_cannot_read_cancel_starve_or_poison_another(server_env, tmp_path):
    """Two keys on one real server (issue 36): each of Bob's attempts on Alice's work is
    refused, and Alice's answer comes while Bob holds as many runs as he may."""
    bob_docs = tmp_path / "bob"
    bob_docs.mkdir()
    (bob_docs / "plan.md").write_text("# Plan\n\nBob's release is called Heron.\n")
    ingest(server_env, bob_docs, "bobdocs")
    env = {
        **server_env,
        "RAG_CLIENT_COLLECTIONS": "alice:docs,bob:bobdocs",
        "RAG_CLIENT_MAX_THREADS": "4",
        "RAG_CLIENT_MAX_ACTIVE_RUNS": "2",
    }
    question = {"assistant_id": "rag", "input": {"question": "What does rag doctor do?"}}
    with alice_and_bob(env, tmp_path, alice_timeout=600) as (_, alice, bob):
        assert bob.get("/healthz").json() == {"ok": True}  # lists no collection

        # 1. Alice's collection is, to Bob, a collection that does not exist
        hers = bob.post(
            "/runs/wait", json={**question, "input": {**question["input"], "collection": "docs"}}
        )
        assert hers.status_code == 422 and "unknown collection 'docs'" in hers.text
        assert "known: bobdocs " in hers.text

        # 2. cancelling by status would reach Alice's runs: refused
        thread = alice.post("/threads", json={}).json()["thread_id"]
        started = alice.post(f"/threads/{thread}/runs", json=question)
        assert started.status_code == 200, started.text
        assert bob.post("/runs/cancel", json={"status": "all"}).status_code == 403
        run_id = started.json()["run_id"]
        assert bob.post(f"/threads/{thread}/runs/{run_id}/cancel").status_code == 404
        assert alice.get(f"/threads/{thread}/runs/{run_id}/join").status_code == 200
        assert alice.get(f"/threads/{thread}/runs/{run_id}").json()["status"] == "success"

        # 3. an as_of naming no version: 422, and no snapshot copy left behind
        for _ in range(3):
            past = bob.post(
                "/runs/wait",
                json={
                    **question,
                    "input": {**question["input"], "collection": "bobdocs"},
                    "config": {"configurable": {"as_of": 99}},
                },
            )
            assert past.status_code == 422 and "no version 99" in past.text
        snapshots = Path(env["RAG_DATA_DIR"]) / "snapshots"
        assert not list(snapshots.glob("*.tmp")) if snapshots.exists() else True

        # 4. memory, queue and cost: metadata, threads, active runs, model calls
        big = {"metadata": {"note": "x" * 10_000}}
        assert bob.post("/threads", json=big).status_code == 422
        threads = [bob.post("/threads", json={}) for _ in range(5)]
        assert [t.status_code for t in threads] == [200] * 4 + [429]
        assert threads[-1].headers["retry-after"]
        for t in threads[:4]:
            assert bob.delete(f"/threads/{t.json()['thread_id']}").status_code == 204
        mine = {**question, "input": {**question["input"], "collection": "bobdocs"}}
        backlog = [bob.post("/runs", json=mine) for _ in range(4)]
        assert [r.status_code for r in backlog[:2]] == [200, 200], backlog[0].text
        assert all(r.status_code == 429 for r in backlog[2:])
        assert int(backlog[2].headers["retry-after"]) > 0
        costly = {**mine, "config": {"configurable": {"k": 20, "rerank": "llm"}}}
        assert bob.post("/runs/wait", json=costly).status_code == 422
        answered = alice.post("/runs/wait", json=question)  # behind at most Bob's two
        assert answered.status_code == 200 and not model_faults(answered.json())

        # 5. a setting beside config.configurable: 422, and the thread stays readable
        poisoned = bob.post("/threads", json={}).json()["thread_id"]
        stray = {**mine, "config": {"generator_model": "openai:x@http://127.0.0.1:9/v1"}}
        assert bob.post(f"/threads/{poisoned}/runs/wait", json=stray).status_code == 422
        assert bob.get(f"/threads/{poisoned}/state").status_code == 200
