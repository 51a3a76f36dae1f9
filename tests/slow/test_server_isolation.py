"""Two clients on one real `rag serve`, and requests bent every way a Host header can be.

Replays the table of issue 58: holding Alice's valid key, a run on Bob's collection, a
store write, a cron and a batch were refused with a plain Host and accepted with
``Host: 127.0.0.1:PORT?``. Every variant here must be refused, and no response may
carry Bob's passage. Requests go over a raw socket, so nothing normalises them.

And issue 68: routes the door never listed (``langgraph dev``'s ``/internal/*`` and
``/deploy``, the v2 ``commands`` route, the WebSocket ``stream/events``) are 404 for
every key, a WebSocket handshake meets the Host and Origin checks (with keys and in
``open_loopback`` mode), and parallel thread creations cannot pass the thread cap.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import socket

import httpx
import pytest

from bench.local_service import ingest, smollm2_env, start, wait_until_up
from tests.net import free_port

pytestmark = pytest.mark.slow
SECRET = "Heron"
THREAD_CAP = 4
QUESTION = "What is Bob's release called?"


@pytest.fixture(scope="module")
def two_clients(tmp_path_factory):
    root = tmp_path_factory.mktemp("isolation")
    env = smollm2_env(
        root / "data",
        client_keys="alice:key-a,bob:key-b",
        api_key="op-key",
        client_collections="alice:docs,bob:bobdocs",
        client_max_active_runs="2",
        client_max_threads=str(THREAD_CAP),
    )
    for name, text in (("docs", "# Install\n\nRun make demo.\n"), ("bobdocs", "")):
        folder = root / name
        folder.mkdir()
        body = text or f"# Plan\n\nBob's release is called {SECRET}.\n"
        (folder / "page.md").write_text(body)
        ingest(env, folder, name)
    port = free_port()
    log = root / "server.log"
    proc = start(["serve", "--port", str(port)], env, log)
    try:
        wait_until_up(
            proc, f"http://127.0.0.1:{port}/healthz", log, headers=lambda: {"X-API-Key": "key-a"}
        )
        yield port
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    # every request above sent a client key: none may appear in what the server logged
    logged = log.read_text()
    assert "key-a" not in logged and "key-b" not in logged and "op-key" not in logged


def raw(port: int, method: str, target: str, headers: list[tuple[str, str]], body: dict | None):
    """Send one HTTP/1.1 request byte for byte; return (status, response text)."""
    data = json.dumps(body).encode() if body is not None else b""
    lines = [f"{method} {target} HTTP/1.1", *(f"{k}: {v}" for k, v in headers)]
    lines += [
        f"Content-Length: {len(data)}",
        "Content-Type: application/json",
        "Connection: close",
        "",
        "",
    ]
    with socket.create_connection(("127.0.0.1", port), timeout=120) as sock:
        sock.sendall("\r\n".join(lines).encode("latin-1") + data)
        chunks = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    reply = b"".join(chunks).decode("latin-1")
    status = int(reply.split(" ", 2)[1]) if reply.startswith("HTTP/") else 0
    return status, reply


def variants(port: int) -> list[tuple[str, str, list[tuple[str, str]]]]:
    """(name, request target form, Host headers) for a path ``{p}``."""
    h = f"127.0.0.1:{port}"
    return [
        ("plain", "{p}", [("Host", h)]),
        ("port?", "{p}", [("Host", f"{h}?")]),
        ("port#", "{p}", [("Host", f"{h}#")]),
        ("port/..", "{p}", [("Host", f"{h}/..")]),
        ("trailing dot", "{p}", [("Host", f"localhost.:{port}")]),
        ("two hosts", "{p}", [("Host", h), ("Host", f"{h}?")]),
        ("absolute form", f"http://127.0.0.1:{port}?{{p}}", [("Host", h)]),
        ("absolute, other host", "http://evil.example{p}", [("Host", h)]),
    ]


ATTEMPTS = [
    (
        "POST",
        "/runs/wait",
        {"assistant_id": "rag", "input": {"question": QUESTION, "collection": "bobdocs"}},
    ),
    (
        "POST",
        "/runs/wait",
        {
            "assistant_id": "rag",
            "input": {"question": QUESTION},
            "config": {"configurable": {"collection": "bobdocs"}},
        },
    ),
    ("PUT", "/store/items", {"namespace": ["x"], "key": "k", "value": {"v": 1}}),
    (
        "POST",
        "/runs/crons",
        {"assistant_id": "rag", "schedule": "* * * * *", "input": {"question": QUESTION}},
    ),
    (
        "POST",
        "/runs/batch",
        [{"assistant_id": "rag", "input": {"question": QUESTION, "collection": "bobdocs"}}],
    ),
    (
        "POST",
        "/threads",
        {
            "supersteps": [
                {"updates": [{"values": {"collection": "bobdocs"}, "as_node": "start_question"}]}
            ]
        },
    ),
]


def test_no_host_variant_lets_alice_read_or_write_what_she_may_not(two_clients):
    port = two_clients
    seen = []
    for name, target, hosts in variants(port):
        for method, path, body in ATTEMPTS:
            status, reply = raw(
                port, method, target.format(p=path), [*hosts, ("X-API-Key", "key-a")], body
            )
            seen.append((name, method, path, status))
            assert status >= 400, (name, path, reply)
            assert SECRET not in reply, (name, path, reply)
    # the owner still reads it, so the refusals above are not a broken server
    status, reply = raw(
        port,
        "POST",
        "/runs/wait",
        [("Host", f"127.0.0.1:{port}"), ("X-API-Key", "key-b")],
        ATTEMPTS[0][2],
    )
    assert status == 200 and SECRET in reply, reply
    print("\n".join(map(str, seen)))


def handshake(port: int, path: str, headers: list[tuple[str, str]]) -> int:
    """Open a WebSocket over a raw socket; return the HTTP status of the answer (101:
    accepted)."""
    key = base64.b64encode(os.urandom(16)).decode()
    lines = [f"GET {path} HTTP/1.1", *(f"{k}: {v}" for k, v in headers)]
    lines += ["Upgrade: websocket", "Connection: Upgrade", f"Sec-WebSocket-Key: {key}"]
    lines += ["Sec-WebSocket-Version: 13", "", ""]
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall("\r\n".join(lines).encode("latin-1"))
        first = sock.recv(65536).decode("latin-1")
    return int(first.split(" ", 2)[1]) if first.startswith("HTTP/") else 0


def foreign_sockets(port: int, key: dict[str, str]) -> dict[str, int]:
    """The answers to handshakes from a foreign Origin, a rebinding Host, and (the
    control) the server's own origin; ``key``: the X-API-Key header, if any."""
    own = f"127.0.0.1:{port}"
    sent = list(key.items())
    return {
        name: handshake(port, "/threads/t1/stream/events", [*hosts, *sent])
        for name, hosts in (
            ("foreign origin", [("Host", own), ("Origin", "http://evil.example")]),
            ("rebinding host", [("Host", f"evil.example:{port}")]),
            ("own origin", [("Host", own), ("Origin", f"http://{own}")]),
        )
    }


def test_routes_nobody_listed_are_404_and_bobs_thread_survives(two_clients):
    url = f"http://127.0.0.1:{two_clients}"
    bob = {"X-API-Key": "key-b"}
    made = httpx.post(f"{url}/threads", json={"metadata": {"plan": SECRET}}, headers=bob)
    bobs = made.json()["thread_id"]
    run = {"assistant_id": "rag", "input": {"question": QUESTION}}
    attempts = [
        ("GET", f"/internal/debug/thread/{bobs}", None),
        ("POST", "/internal/truncate", {}),
        ("GET", "/deploy", None),
        ("POST", "/deploy", {}),
        ("POST", f"/threads/{bobs}/commands", {"type": "run.start", "params": run}),
        ("GET", f"/threads/{bobs}/history", None),
        ("POST", "/runs/batch", [run]),
    ]
    for key in ("key-a", "op-key"):  # a client's key and the operator's
        for method, path, body in attempts:
            reply = httpx.request(method, url + path, json=body, headers={"X-API-Key": key})
            assert reply.status_code == 404, (key, path, reply.text)
            assert SECRET not in reply.text
        sockets = foreign_sockets(two_clients, {"X-API-Key": key})
        assert sockets == {"foreign origin": 403, "rebinding host": 403, "own origin": 404}
        kept = httpx.get(f"{url}/threads/{bobs}", headers=bob)  # intact after every attempt
        assert kept.status_code == 200 and kept.json()["metadata"]["plan"] == SECRET


def test_thread_cap_holds_for_parallel_creations_and_the_commands_route(two_clients):
    url = f"http://127.0.0.1:{two_clients}"
    alice = {"X-API-Key": "key-a"}

    def count() -> int:
        found = httpx.post(f"{url}/threads/search", json={"limit": 100}, headers=alice)
        return len(found.json())

    for _ in range(THREAD_CAP - 1 - count()):
        assert httpx.post(f"{url}/threads", json={}, headers=alice).status_code == 200

    async def burst():
        async with httpx.AsyncClient(base_url=url, headers=alice, timeout=60) as client:
            return await asyncio.gather(*(client.post("/threads", json={}) for _ in range(12)))

    codes = sorted(r.status_code for r in asyncio.run(burst()))
    assert codes == [200] + [429] * 11, codes
    assert count() == THREAD_CAP
    run_start = {"assistant_id": "rag", "input": {"question": "q"}}
    for params in (
        run_start,  # one thread more
        {**run_start, "metadata": {"note": "x" * 100_000}},
        {**run_start, "input": {"question": "q", "messages": ["hi"] * 150}},
        {**run_start, "config": {"configurable": {}, "stray": 1}},
    ):
        command = {"id": 1, "method": "run.start", "params": params}
        reply = httpx.post(
            f"{url}/threads/{os.urandom(8).hex()}/commands", json=command, headers=alice
        )
        assert reply.status_code == 404, reply.text
    assert count() == THREAD_CAP
    for thread in httpx.post(f"{url}/threads/search", json={}, headers=alice).json():
        httpx.delete(f"{url}/threads/{thread['thread_id']}", headers=alice)  # for the next test


def test_open_loopback_refuses_foreign_websockets_too(tmp_path):
    env = smollm2_env(tmp_path / "data", open_loopback="true")
    port = free_port()
    log = tmp_path / "open.log"
    proc = start(["serve", "--port", str(port)], env, log)
    try:
        wait_until_up(proc, f"http://127.0.0.1:{port}/healthz", log)
        assert foreign_sockets(port, {}) == {
            "foreign origin": 403,
            "rebinding host": 403,
            "own origin": 404,
        }
        reply = httpx.post(f"http://127.0.0.1:{port}/internal/truncate", json={})
        assert reply.status_code == 404
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_twenty_parallel_background_runs_accept_at_most_the_cap(two_clients):
    port = two_clients
    url = f"http://127.0.0.1:{port}"
    body = {"assistant_id": "rag", "input": {"question": "How do I install it?"}}

    async def burst():
        async with httpx.AsyncClient(
            base_url=url, headers={"X-API-Key": "key-a"}, timeout=120
        ) as client:
            replies = await asyncio.gather(*(client.post("/runs", json=body) for _ in range(20)))
            accepted = [r for r in replies if r.status_code == 200]
            for r in accepted:  # let them finish, so the cap is free for the next test
                run = r.json()
                await client.get(f"/threads/{run['thread_id']}/runs/{run['run_id']}/join")
            return replies

    replies = asyncio.run(burst())
    codes = sorted(r.status_code for r in replies)
    assert 1 <= codes.count(200) <= 2, codes
    assert set(codes) <= {200, 429}, codes
    assert all(r.headers.get("retry-after") for r in replies if r.status_code == 429)


def test_schemathesis_finds_no_server_error_and_no_foreign_passage(two_clients):
    """A bounded schemathesis run over the server's own OpenAPI schema, as Alice: every
    operation, a few generated requests each; no 5xx, and no response names Bob's
    passage. Closed routes answer 404, so their cases are quick."""
    import schemathesis
    from hypothesis import HealthCheck, Phase, given, settings

    url = f"http://127.0.0.1:{two_clients}"
    alice = {"X-API-Key": "key-a"}
    spec = httpx.get(f"{url}/openapi.json", headers=alice, timeout=30).json()
    schema = schemathesis.openapi.from_dict(spec)
    failures, calls = [], []

    def fuzz_one(operation) -> None:
        @settings(
            max_examples=4,
            deadline=None,
            phases=[Phase.explicit, Phase.generate],
            suppress_health_check=list(HealthCheck),
            database=None,
        )
        @given(case=operation.as_strategy())
        def fuzz(case):
            response = case.call(base_url=url, headers=alice, timeout=120)
            calls.append(response.status_code)
            if response.status_code >= 500 or SECRET in response.text:
                failures.append((operation.label, response.status_code, response.text[:300]))

        fuzz()

    for result in schema.get_all_operations():
        fuzz_one(result.ok())
    assert len(calls) > 50, calls  # it really ran
    assert failures == [], failures
