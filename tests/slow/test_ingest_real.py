"""Ingestion with the real local embedder (all-MiniLM-L6-v2): the `rag` command end to end,
a run killed with SIGKILL and then finished, and search sanity on the frozen copy of the
docs (tests/corpus/)."""

from __future__ import annotations

import json
import math
import os
import random
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ingest import pipeline
from ingest.pipeline import IngestOptions, Ingestor
from tests.corpus import FROZEN_DOCS
from tools.config import load_settings
from tools.models.factory import embeddings
from tools.retrieval.hybrid import make_retriever
from tools.store.collection import Collection

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
RAG = Path(sys.executable).parent / "rag"


def rag_ingest(*args: str | Path, check: bool = True) -> dict:
    proc = subprocess.run(
        [RAG, "ingest", *map(str, args), "--json"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
        env=_env(),
    )
    if check:
        assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def _env() -> dict[str, str]:
    """The user's environment without RAG_* settings, so the defaults (local models) apply."""
    return {k: v for k, v in os.environ.items() if not k.startswith("RAG_")}


def open_collection(data_dir: Path, name: str = "docs") -> Collection:
    return Collection(load_settings({"data_dir": data_dir}), name)


def test_rag_ingest_docs_then_rerun_is_free(tmp_path):
    data = tmp_path / "data"
    pages = sorted(p.name for p in FROZEN_DOCS.glob("*.md"))
    first = rag_ingest(FROZEN_DOCS, "--data-dir", data)
    assert first["files_seen"] == first["files_indexed"] == len(pages)
    assert first["skipped"] == [] and first["warnings"] == []
    col = open_collection(data)
    stats = col.stats()
    assert first["chunks_added"] == stats["chunks"] == stats["vectors"] > len(pages)
    assert stats["embedding_model"] == "local" and stats["embedding_dimension"] == 384

    second = rag_ingest(FROZEN_DOCS, "--data-dir", data)
    assert second["files_unchanged"] == len(pages)
    assert (second["chunks_added"], second["chunks_deleted"], second["chunks_embedded"]) == (
        0,
        0,
        0,
    )
    # the acceptance criterion; the first run includes the model load, as it should
    assert second["seconds"] * 10 <= first["seconds"], (first["seconds"], second["seconds"])


# --- a run killed with SIGKILL, then finished --------------------------------------------------

WORDS = (
    "index vector chunk manifest query answer model embed search store commit file page "
    "section heading token retrieval ranking cosine distance batch group source citation "
    "collection settings server local remote verify generate rewrite window neighbour"
).split()
FILES = 60


def make_corpus(root: Path) -> int:
    """FILES markdown files of distinct ~60-character lines; one line becomes one chunk.

    Enough lines for three commit groups, so a kill can land between commits.
    Returns the number of chunks a complete run produces.
    """
    lines_per_file = math.ceil(2.5 * pipeline.Batching().group_chunks / FILES)
    rng = random.Random(7)
    root.mkdir()
    for n in range(FILES):
        lines = [f"# Page {n}"]
        lines += [f"{n}.{i} " + " ".join(rng.sample(WORDS, 7)) for i in range(lines_per_file)]
        (root / f"page{n:02d}.md").write_text("\n".join(lines) + "\n")
    return FILES * (lines_per_file + 1)


def committed_files(manifest: Path) -> int:
    if not manifest.exists():
        return 0
    try:
        with sqlite3.connect(f"file:{manifest}?mode=ro", uri=True, timeout=1) as db:
            return db.execute("SELECT COUNT(*) FROM files").fetchone()[0]
    except sqlite3.OperationalError:  # not created yet, or locked for a moment
        return 0


def test_killed_ingestion_finishes_like_a_clean_run(tmp_path):
    corpus = tmp_path / "corpus"
    expected_chunks = make_corpus(corpus)
    split = ["--splitter", "lines", "--chunk-size", "1", "--overlap", "0"]
    killed, clean = tmp_path / "killed", tmp_path / "clean"

    proc = subprocess.Popen(
        [RAG, "ingest", corpus, *split, "--data-dir", killed, "--json"],
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=_env(),
    )
    manifest = killed / "collections" / "docs.sqlite"
    try:
        deadline = time.monotonic() + 300
        while proc.poll() is None and committed_files(manifest) == 0:
            assert time.monotonic() < deadline, "no file committed within 300 s"
            time.sleep(0.02)
        assert proc.poll() is None, "the run finished before it could be killed"
        proc.kill()  # SIGKILL: no cleanup of any kind
    finally:
        proc.kill()
        proc.wait()
    assert proc.returncode == -9
    at_kill = committed_files(manifest)
    assert 0 < at_kill < FILES, at_kill

    finish = rag_ingest(corpus, *split, "--data-dir", killed)
    assert finish["files_unchanged"] == at_kill
    assert finish["files_indexed"] == FILES - at_kill
    first = rag_ingest(corpus, *split, "--data-dir", clean)
    assert first["files_indexed"] == FILES and first["chunks_added"] == expected_chunks

    done, reference = open_collection(killed), open_collection(clean)
    assert done.manifest.stats() == reference.manifest.stats()
    assert done.manifest.stats()["chunks"] == expected_chunks
    assert done.manifest.chunk_ids() == reference.manifest.chunk_ids()
    assert done.vectors.count() == done.manifest.stats()["chunks"]  # no duplicates, no orphans
    assert done.vectors.ids() == done.manifest.vector_owners()
    # and the vectors are the right ones: a line finds itself
    line = (corpus / "page42.md").read_text().splitlines()[3]
    [(hit, distance)] = done.dense_search(embeddings(load_settings()).embed_query(line), k=1)
    assert hit.text == line and distance < 1e-3


# --- search sanity on the frozen docs ------------------------------------------------------


@pytest.fixture(scope="module")
def docs(tmp_path_factory):
    settings = load_settings({"data_dir": tmp_path_factory.mktemp("docs") / "data"})
    embedder = embeddings(settings)
    collection = Collection(settings, "docs", create=True)
    report = Ingestor(settings, collection, embedder, IngestOptions(), progress=False).run(
        [FROZEN_DOCS]
    )
    assert report.chunks_added > 0 and report.skipped == []
    return collection, embedder


def test_retrieval_finds_the_check_models_pages(docs):
    collection, embedder = docs
    settings = load_settings()
    # what the generator is given: the configured (hybrid) retriever's top k. Dense search
    # alone lost the `rag doctor` chunks to pages about checking *answers* (0.67-0.72)
    # once those pages grew; the keyword half keeps them.
    passages, _ = make_retriever(collection, embedder, settings).retrieve(
        ["how do I check that the models work"]
    )
    top = passages[: settings.k]
    # the answer is `rag doctor`, documented on several pages (cli, getting started,
    # troubleshooting) that change as the docs grow: any passage describing it counts
    relevant = [p.distance for p in top if "rag doctor" in p.text]
    assert relevant and min(relevant) < settings.distance_threshold, [
        (p.source, p.distance) for p in top
    ]
    # and nothing in the docs is as close to an unrelated question (measured: 0.87 for
    # the nearest chunk to banana bread, 0.80 for the best `rag doctor` passage)
    unrelated = collection.dense_search(embedder.embed_query("recipe for banana bread"), k=1)
    assert unrelated[0][1] > min(relevant)


def test_keyword_search_finds_exact_terms(docs):
    collection, _ = docs
    hits = collection.keyword_search("sha256", k=3)
    assert hits and "sha256" in hits[0][0].text.lower()
    # models.md spells it SHA-256, which tokenizes as "sha" + "256"
    hits = collection.keyword_search("SHA-256", k=3)
    assert "docs_corpus/models.md" in {c.source for c, _ in hits}
