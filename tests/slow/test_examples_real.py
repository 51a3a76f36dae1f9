"""Every example of README.md and docs_corpus/ that loads a model runs here, as a reader
would run it: from a working directory holding a copy of docs_corpus/ with the default
data directory `.rag/` beside it, docs_corpus already ingested into the collection
`docs`, `rag` on the PATH, and a real `rag serve` on a free port for the blocks that name
127.0.0.1:8123 (the port is put in their place, and `RAG_API_KEY` is the server's key, as
the server page says to export it).

Blocks run in document order on one data directory, so a page's examples may build on
each other (versions.md makes a second version, then reads it). Each must exit 0 and
give a well-formed answer; what the answer says is never checked here (the docs are free
to change). SmolLM2-135M stands in for every chat model: these tests are about the
examples running, not answer quality. The convention is in tests/doc_examples.py.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from bench.local_service import ingest, smollm2_env, start, wait_until_up
from tests.doc_examples import REPO, SERVER, Block, all_blocks
from tests.graph_runs import model_faults
from tests.net import free_port

pytestmark = pytest.mark.slow
SLOW = [b for b in all_blocks() if b.runs and not b.fast]
OUTCOMES = {"verified", "not_verified", "not_in_documents", "abstained"}


@pytest.fixture(scope="module")
def workspace(tmp_path_factory):
    """The reader's working directory, with docs_corpus ingested and a server running."""
    root = tmp_path_factory.mktemp("reader")
    shutil.copytree(REPO / "docs_corpus", root / "docs_corpus")
    for name in (".venv", "scripts"):  # `.venv/bin/python scripts/...` as from the repo
        (root / name).symlink_to(REPO / name)
    # one attempt per answer: an example's run is checked for working, not for its words;
    # a generous model deadline (a loaded 2-core machine took SmolLM2 past the default 180 s)
    env = smollm2_env(
        root / ".rag", max_regenerations="0", second_look="false", llm_timeout_s="900"
    )
    env.update(
        PATH=f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}",
        PYTHONPATH=str(REPO),
    )
    ingest(env, root / "docs_corpus")
    port = str(free_port())
    log = root / "server.log"
    proc = start(["serve", "--port", port], env, log)
    key_file = root / ".rag" / "server" / "api_key"
    key = lambda: key_file.read_text().strip()  # noqa: E731  (written at start-up)
    wait_until_up(
        proc, f"http://127.0.0.1:{port}/healthz", log, headers=lambda: {"X-API-Key": key()}
    )
    yield root, {**env, "RAG_API_KEY": key()}, port
    proc.terminate()
    proc.wait(timeout=30)


def _command(block: Block, port: str) -> list[str]:
    text = block.text if block.kind == "python" else block.script()
    text = text.replace(SERVER, f"127.0.0.1:{port}")
    if block.kind == "python":
        return [sys.executable, "-c", text]
    return ["bash", "-e", "-o", "pipefail", "-c", text]


def _well_formed(block: Block, stdout: str) -> None:
    """A run's answer, when the block prints one as JSON (curl), has an outcome and no
    model fault; a shell block must have printed something (a python block may only
    build and call, as architecture.md's does: exiting 0 is its proof)."""
    if block.kind != "python":
        assert stdout.strip(), f"{block.id} printed nothing"
    if block.kind == "bash" and stdout.lstrip().startswith("{"):
        answer = json.loads(stdout)
        if "answer" in answer:
            assert answer["outcome"] in OUTCOMES and not model_faults(answer), answer


@pytest.mark.parametrize("block", SLOW, ids=lambda b: b.id)
def test_example_runs(block, workspace):
    root, env, port = workspace
    out = subprocess.run(
        _command(block, port), cwd=root, env=env, capture_output=True, text=True, timeout=900
    )
    assert out.returncode == 0, f"{block.id} failed:\n{out.stdout[-2000:]}\n{out.stderr[-3000:]}"
    assert "Traceback" not in out.stderr, out.stderr[-3000:]
    _well_formed(block, out.stdout)
