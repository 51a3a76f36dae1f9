"""Beyond one machine: two `rag serve` processes with their own data directories share one
PostgreSQL (store = postgres); an ingestion from a third process reaches both, and a
conversation started in one process continues in another.

The tiny local model (SmolLM2-135M) stands in for the generator: this is about where
state lives, not answer quality.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import httpx
import pytest

from bench.local_service import RAG, ingest, smollm2_env, start, wait_until_up
from tests.net import free_port

pytestmark = pytest.mark.slow
QUESTION = "What is the release codename?"


def _env(folder: Path, database_url: str) -> dict[str, str]:
    # a fixed key: each server would otherwise write its own into its data directory
    return smollm2_env(folder, store="postgres", database_url=database_url, api_key="k" * 32)


def _answer(url: str) -> dict:
    body = {"assistant_id": "rag", "input": {"question": QUESTION, "collection": "notes"}}
    response = httpx.post(
        f"{url}/runs/wait", json=body, headers={"X-API-Key": "k" * 32}, timeout=300
    )
    assert response.status_code == 200, response.text
    return response.json()


def _ask(env: dict[str, str], question: str, thread: str) -> dict:
    done = subprocess.run(
        [RAG, "ask", question, "--collection", "notes", "--thread", thread, "--json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_two_servers_one_database(database_url, tmp_path):
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "release.md").write_text(
        "# Release notes\n\nThe release codename is Bluefin. It ships in May.\n"
    )
    envs = [_env(tmp_path / f"data{n}", database_url) for n in range(3)]
    servers = []
    try:
        for n in (0, 1):
            port = free_port()
            log = tmp_path / f"server{n}.log"
            proc = start(["serve", "--port", str(port)], envs[n], log)
            servers.append((proc, f"http://127.0.0.1:{port}", log))
        for proc, url, log in servers:
            wait_until_up(proc, f"{url}/healthz", log, headers=lambda: {"X-API-Key": "k" * 32})

        # the servers run; a third process ingests, with its own data directory
        ingest(envs[2], notes, "notes")
        first, second = (_answer(url) for _, url, _ in servers)
        for out in (first, second):
            assert out["error"] is None, out["error"]
            assert out["retrieval"]["kept"] >= 1
            assert {Path(p["source"]).name for p in out["passages"]} == {"release.md"}, out
        # the same passages, cited the same way, from either server
        assert [p["text"] for p in first["passages"]] == [p["text"] for p in second["passages"]]
        assert (first["citations"], first["references"]) == (
            second["citations"],
            second["references"],
        )
    finally:
        for proc, _, _ in servers:
            proc.terminate()
            proc.wait(timeout=30)

    # a conversation begun by one process goes on in another: the thread is in the database
    begun = _ask(envs[0], QUESTION, "release-chat")
    assert begun["error"] is None, begun["error"]
    follow = "And when does it ship?"
    went_on = _ask(envs[1], follow, "release-chat")
    assert went_on["error"] is None, went_on["error"]
    assert went_on["queries"][0] != follow  # rephrased with the first process's turn
    from langgraph.checkpoint.postgres import PostgresSaver

    with PostgresSaver.from_conn_string(database_url) as saver:
        state = saver.get_tuple({"configurable": {"thread_id": "release-chat"}})
    assert len(state.checkpoint["channel_values"]["messages"]) == 4  # two turns, two answers
    assert not any((tmp_path / f"data{n}" / "threads").exists() for n in range(3))
