"""A database restart under a running `rag serve` (store = postgres, a real PostgreSQL of
its own, stopped and started by the test): run requests meanwhile get a 503 that says
so, with Retry-After, and once the database is back the next question is answered,
with no server restart."""

from __future__ import annotations

import httpx
import pytest

from bench.local_service import LocalPostgres, free_port, ingest, smollm2_env, start, wait_until_up

pytestmark = pytest.mark.slow
KEY = {"X-API-Key": "k" * 32}
RUN = {
    "assistant_id": "rag",
    "input": {"question": "What is the release codename?", "collection": "notes"},
}


def test_a_database_restart_is_503s_then_answers_without_a_server_restart(tmp_path):
    postgres = LocalPostgres(tmp_path / "postgres")
    url = postgres.new_database()
    env = smollm2_env(tmp_path / "data", store="postgres", database_url=url, api_key="k" * 32)
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "release.md").write_text("# Release\n\nThe release codename is Bluefin.\n")
    ingest(env, notes, "notes")
    port, log = free_port(), tmp_path / "server.log"
    server = start(["serve", "--port", str(port)], env, log)
    base = f"http://127.0.0.1:{port}"
    try:
        wait_until_up(server, f"{base}/healthz", log, headers=lambda: KEY)
        before = httpx.post(f"{base}/runs/wait", json=RUN, headers=KEY, timeout=300)
        assert before.status_code == 200 and before.json()["error"] is None, before.text

        postgres.pause()
        down = httpx.post(f"{base}/runs/wait", json=RUN, headers=KEY, timeout=120)
        assert down.status_code == 503, down.text
        assert down.headers["Retry-After"] == "5"
        assert "database cannot be reached" in down.json()["detail"]
        assert "RAG_DATABASE_URL" in down.json()["detail"]

        postgres.resume()
        after = httpx.post(f"{base}/runs/wait", json=RUN, headers=KEY, timeout=300)
        assert after.status_code == 200, after.text
        assert after.json()["error"] is None, after.json()
        assert after.json()["retrieval"]["kept"] >= 1  # the collection was read again
        assert server.poll() is None  # the same server process throughout
    finally:
        server.terminate()
        server.wait(timeout=30)
        postgres.stop()
