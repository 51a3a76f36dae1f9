"""Setup shared by slow tests (and bench/bench_soak.py) that start a real `rag` server
process on loopback."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

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


def ingest_docs_corpus(env: dict[str, str]) -> None:
    subprocess.run(
        [RAG, "ingest", str(REPO / "docs_corpus"), "--json"],
        env=env,
        check=True,
        capture_output=True,
    )
