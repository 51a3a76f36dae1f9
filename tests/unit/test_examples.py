"""Every fenced block of README.md and docs_corpus/ is accounted for, and the model-free
ones run here: settings snippets load, ``<!-- no models -->`` blocks run with every model
pointed at a dead address (so one that calls a model fails). The rest run in
tests/slow/test_examples_real.py. The convention is in tests/doc_examples.py."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.doc_examples import (
    REPO,
    RUN,
    SETTINGS,
    SHOWN,
    Block,
    all_blocks,
    env_assignments,
)
from tools.config import load_settings

BLOCKS = all_blocks()
FAST = [b for b in BLOCKS if b.fast]
# validating a snippet that names a hosted model needs its key set, as it would be
DUMMY_CREDENTIALS = {"OPENAI_API_KEY": "sk-example"}
DEAD = "openai:none@http://127.0.0.1:9/v1"  # port 9 (discard): nothing answers


def test_every_block_says_what_it_is_and_why_it_does_not_run():
    for block in BLOCKS:
        assert block.kind in RUN | SETTINGS | SHOWN, (
            f"{block.id}: give the block an info string: python, bash, console, toml or env "
            f"(run), text or json (shown); got {block.kind!r}"
        )
        if block.kind in RUN | SETTINGS and block.note.startswith("not run"):
            assert block.not_run, f"{block.id}: say why it does not run: <!-- not run: WHY -->"
        if block.note == "no models":
            assert block.kind in RUN, f"{block.id}: only a block that runs calls no model"
    # the harness finds the examples the issue names, so it cannot silently find none
    ids = {b.page for b in BLOCKS if b.runs}
    assert {"README.md", "docs_corpus/python-api.md", "docs_corpus/server.md"} <= ids


def test_the_readme_python_example_runs_and_is_not_skipped():
    readme = [b for b in BLOCKS if b.page == "README.md" and "from graph import graph" in b.text]
    assert readme and all(b.runs for b in readme)


def _settings_of(block: Block, tmp_path: Path):
    if block.kind == "toml":
        (tmp_path / "rag.toml").write_text(block.text)
        return load_settings(config_file=tmp_path / "rag.toml", environ=DUMMY_CREDENTIALS)
    variables = env_assignments(block)
    assert all(name.startswith("RAG_") for name in variables), variables
    return load_settings(environ={**DUMMY_CREDENTIALS, **variables})


@pytest.mark.parametrize("block", [b for b in FAST if b.kind in SETTINGS], ids=lambda b: b.id)
def test_settings_snippets_load(block, tmp_path):
    settings = _settings_of(block, tmp_path)
    values = settings.model_dump()
    if block.kind == "env":  # every variable reached its setting
        for name in env_assignments(block):
            assert name.removeprefix("RAG_").lower() in values, name


@pytest.mark.parametrize("block", [b for b in FAST if b.kind in RUN], ids=lambda b: b.id)
def test_model_free_examples_run(block, tmp_path):
    shutil.copytree(REPO / "docs_corpus", tmp_path / "docs_corpus")
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAG_")}
    env.update(
        PATH=f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}",
        PYTHONPATH=str(REPO),
        RAG_DATA_DIR=str(tmp_path / ".rag"),
        RAG_GENERATOR_MODEL=DEAD,
        RAG_QUERY_MODEL=DEAD,
        RAG_VERIFIER_MODEL=DEAD,
        RAG_EMBEDDING_MODEL=DEAD,
    )
    command = (
        [sys.executable, "-c", block.text]
        if block.kind == "python"
        else ["bash", "-e", "-o", "pipefail", "-c", block.script()]
    )
    out = subprocess.run(
        command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, f"{block.id} failed:\n{out.stdout[-2000:]}\n{out.stderr[-3000:]}"
    assert out.stdout.strip(), f"{block.id} printed nothing"
