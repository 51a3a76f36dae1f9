"""A team of servers: two `rag serve` replicas on the shared runtime (server_runtime =
shared: PostgreSQL plus Valkey, both real, started here) behind a round-robin proxy
with no sticky sessions.

- a conversation alternates replicas, and its second turn is rephrased with the first;
- two client keys stay isolated whichever replica they reach;
- `kill -9` of the replica serving a streamed run leaves the thread readable from the
  other, and the run finished (retried there) or marked failed, never left running.

The tiny local model (SmolLM2-135M) stands in for the generator: this is about where
state lives, not answer quality.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from pathlib import Path

import httpx
import pytest

from bench.local_service import RAG, LocalValkey, free_port, ingest, smollm2_env, wait_until_up
from tests.net import RoundRobinProxy

pytestmark = pytest.mark.slow
KEYS = {"alice": "a" * 32, "bob": "b" * 32}
QUESTION = "What is the release codename?"
FOLLOW_UP = "When does it ship?"
DONE = ("success", "error", "interrupted", "timeout")


def _headers(client: str) -> dict[str, str]:
    return {"X-API-Key": KEYS[client]}


def _start(env: dict[str, str], log: Path) -> subprocess.Popen:
    """`rag serve` in its own process group: killing the group kills the server it runs."""
    port = env["PORT"]
    with log.open("w") as out:
        return subprocess.Popen(
            [RAG, "serve", "--port", port],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


@pytest.fixture
def replicas(database_url, tmp_path):
    valkey = LocalValkey(tmp_path / "valkey")
    settings = {
        "store": "postgres",
        "database_url": database_url,
        "server_runtime": "shared",
        "redis_url": valkey.url,
        "client_keys": ",".join(f"{name}:{key}" for name, key in KEYS.items()),
        "client_max_active_runs": "1",
    }
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "release.md").write_text(
        "# Release notes\n\nThe release codename is Bluefin. It ships in May.\n"
    )
    ingest(smollm2_env(tmp_path / "ingest-data", **settings), notes, "notes")
    servers = []
    try:
        for n in (0, 1):
            env = smollm2_env(tmp_path / f"data{n}", **settings)
            # a replica's runs heartbeat every 3 s: a dead replica's run is taken up
            # (or failed) within seconds, not the default minutes
            env |= {"PORT": str(free_port()), "LG_BG_JOB_HEARTBEAT": "3"}
            log = tmp_path / f"replica{n}.log"
            proc = _start(env, log)
            url = f"http://127.0.0.1:{env['PORT']}"
            wait_until_up(proc, f"{url}/healthz", log, headers=lambda: _headers("alice"))
            servers.append((proc, url, log))
        yield servers
    finally:
        for proc, _, _ in servers:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
                proc.wait(timeout=30)
        valkey.stop()


def _call(method: str, url: str, client: str, body: dict | None = None) -> httpx.Response:
    """One request on a connection of its own (the proxy picks a replica per connection)."""
    return httpx.request(method, url, json=body, headers=_headers(client), timeout=300)


def _run(question: str) -> dict:
    return {"assistant_id": "rag", "input": {"question": question, "collection": "notes"}}


def test_a_conversation_alternates_replicas_and_clients_stay_apart(replicas):
    (_, url_a, _), (_, url_b, _) = replicas
    ports = [int(u.rsplit(":", 1)[1]) for u in (url_a, url_b)]
    with RoundRobinProxy([("127.0.0.1", p) for p in ports]) as proxy:
        made = _call("POST", f"{proxy.url}/threads", "alice", {})
        assert made.status_code == 200, made.text
        tid = made.json()["thread_id"]
        first = _call("POST", f"{proxy.url}/threads/{tid}/runs/wait", "alice", _run(QUESTION))
        assert first.status_code == 200, first.text
        assert first.json()["error"] is None, first.json()
        second = _call("POST", f"{proxy.url}/threads/{tid}/runs/wait", "alice", _run(FOLLOW_UP))
        assert second.status_code == 200, second.text
        assert second.json()["error"] is None, second.json()
        assert second.json()["queries"][0] != FOLLOW_UP  # rephrased with the first turn
        state = _call("GET", f"{proxy.url}/threads/{tid}/state", "alice")
        assert state.status_code == 200, state.text
        assert len(state.json()["values"]["messages"]) == 4  # two questions, two answers
        assert proxy.log == [0, 1, 0, 1]  # every request reached the other replica

    for url in (url_a, url_b):
        # bob reaches alice's thread through neither replica, by id or by search
        assert _call("GET", f"{url}/threads/{tid}", "bob").status_code == 404
        found = _call("POST", f"{url}/threads/search", "bob", {"limit": 100})
        assert found.status_code == 200 and tid not in {t["thread_id"] for t in found.json()}
        stolen = _call("POST", f"{url}/threads/{tid}/runs/wait", "bob", _run(QUESTION))
        assert stolen.status_code == 404, stolen.text
        mine = _call("POST", f"{url}/threads/search", "alice", {"limit": 100})
        assert tid in {t["thread_id"] for t in mine.json()}

    # bob's cap of one active run holds across replicas: a run queued through one
    # replica counts on the other
    bobs = _call("POST", f"{url_a}/threads", "bob", {}).json()["thread_id"]
    queued = _call("POST", f"{url_a}/threads/{bobs}/runs", "bob", _run(QUESTION))
    assert queued.status_code == 200, queued.text
    other = _call("POST", f"{url_b}/threads", "bob", {}).json()["thread_id"]
    refused = _call("POST", f"{url_b}/threads/{other}/runs", "bob", _run(QUESTION))
    assert refused.status_code == 429, refused.text
    assert "client_max_active_runs" in refused.json()["detail"]


def test_killing_a_replica_during_a_streamed_run_loses_no_thread(replicas):
    (proc_a, url_a, log_a), (_, url_b, _) = replicas
    tid = _call("POST", f"{url_a}/threads", "alice", {}).json()["thread_id"]
    started = threading.Event()
    events: list[str] = []

    def stream() -> None:
        body = _run(QUESTION) | {"stream_mode": ["updates"]}
        try:
            with httpx.stream(
                "POST",
                f"{url_a}/threads/{tid}/runs/stream",
                json=body,
                headers=_headers("alice"),
                timeout=300,
            ) as response:
                for line in response.iter_lines():
                    if line.startswith("event:"):
                        events.append(line)
                        started.set()
        except httpx.HTTPError:  # the replica dies under the stream
            pass
        started.set()

    reader = threading.Thread(target=stream, daemon=True)
    reader.start()
    assert started.wait(120), log_a.read_text()[-3000:]
    os.killpg(proc_a.pid, signal.SIGKILL)  # the replica and the server it runs, at once
    proc_a.wait(timeout=30)
    reader.join(timeout=30)

    # the thread is readable from the other replica, and its run ends there: finished
    # (the queue took it up again) or marked failed, never left pending or running
    thread = _call("GET", f"{url_b}/threads/{tid}", "alice")
    assert thread.status_code == 200, thread.text
    deadline = time.monotonic() + 240
    while True:
        runs = _call("GET", f"{url_b}/threads/{tid}/runs", "alice").json()
        assert len(runs) == 1, runs
        if runs[0]["status"] in DONE or time.monotonic() > deadline:
            break
        time.sleep(2)
    assert runs[0]["status"] in DONE, runs
    assert _call("GET", f"{url_b}/threads/{tid}", "bob").status_code == 404
