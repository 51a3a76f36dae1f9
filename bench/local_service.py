"""Start a real `rag` server process on loopback: the soak benchmark and the slow server
tests share it (it lives with the benchmarks because nothing may import the tests)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parents[1]
RAG = str(Path(sys.executable).parent / "rag")


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
