"""Storage faults: damaged or foreign indexes are refused with a repair hint; a full disk,
a killed run or a failing embedding service lose nothing and duplicate nothing."""

from __future__ import annotations

import errno
import json
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from dataclasses import replace
from pathlib import Path

import pytest
from chromadb.api.client import SharedSystemClient

from graph.services import Services
from ingest.partition import PartitionOptions
from ingest.pipeline import Batching, IngestError, IngestOptions, Ingestor
from rag_cli.main import main
from tests.fakes import HashEmbeddings
from tests.files import write_tree
from tools.config import ConfigError, load_settings
from tools.errors import ModelError
from tools.store.chroma_vectors import ChromaChunkStore, chroma_client
from tools.store.collection import Collection, CollectionError, drop_collection, list_collections
from tools.store.manifest import Manifest

# the CLI's ingestion embeds with these, handed in as a test hands any model
HASHED = Services(embed_documents=lambda settings: HashEmbeddings())

REPO = Path(__file__).resolve().parents[2]
OPTIONS = IngestOptions(partition=PartitionOptions("structure", 200, 0))
PAGES = {f"page{i}.md": f"# Page {i}\n\nTopic number {i} is about subject{i}.\n" for i in range(6)}


@pytest.fixture
def settings(tmp_path):
    return load_settings({"data_dir": tmp_path / "data"})


@pytest.fixture(params=["embedded", "postgres"])
def store_settings(request, tmp_path):
    """Either backend: the kill tests hold for both (a real PostgreSQL for the second)."""
    values: dict = {"data_dir": str(tmp_path / "data")}
    if request.param == "postgres":
        values |= {"store": "postgres", "database_url": request.getfixturevalue("database_url")}
    return load_settings(values)


@pytest.fixture
def corpus(tmp_path):
    return write_tree(tmp_path / "corpus", PAGES)


def ingest(settings, paths, name="docs", embedder=None, **batching):
    """``batching``: Batching fields for this run (smaller groups, no backoff...)."""
    col = Collection(settings, name, create=True)
    options = replace(OPTIONS, batching=Batching(**batching))
    report = Ingestor(settings, col, embedder or HashEmbeddings(), options, progress=False).run(
        paths
    )
    return report, col


def state(col: Collection) -> tuple:
    """Everything a reader can see, to compare a repaired collection with a clean one."""
    return col.manifest.stats(), col.manifest.chunk_ids(), col.vectors.ids()


def assert_halves_agree(col: Collection) -> None:
    """Every committed chunk is in both the keyword and the dense half; neither finds
    anything uncommitted (the vectors an interrupted run left are never returned)."""
    if isinstance(col.manifest, Manifest):  # FTS5's check: its index holds the chunk rows
        col.manifest._db.execute(
            "INSERT INTO chunk_terms(chunk_terms, rank) VALUES ('integrity-check', 1)"
        )
    committed = col.manifest.chunk_ids()
    assert col.manifest.chunk_count() == len(committed)
    for cid, chunk in col.manifest.chunks(committed).items():
        assert cid in {c.id for c, _ in col.keyword_search(chunk.text, len(committed))}
    assert col.vectors.ids() >= committed
    orphans = col.vectors.vectors_for_ids(list(col.vectors.ids() - committed))
    for vector in orphans.values():
        assert {c.id for c, _ in col.dense_search(vector, 5)} <= committed


def assert_like_clean(settings, col, paths):
    _, clean = ingest(settings, paths, name="clean")
    assert state(col)[:2] == state(clean)[:2]
    assert col.vectors.ids() == col.manifest.vector_owners()  # no orphans, no duplicates


# --- detected at start-up, with the repair command ------------------------------------------
def test_damaged_manifest_is_refused_and_rebuild_repairs_it(settings, corpus, capsys):
    ingest(settings, [corpus])[1].close()
    manifest = settings.data_dir / "collections" / "docs.sqlite"
    manifest.write_bytes(b"this is not a database" * 100)
    with pytest.raises(CollectionError, match=r"docs.sqlite is damaged.*--rebuild"):
        Collection(settings, "docs")
    assert main(["ask", "anything", "--data-dir", str(settings.data_dir)]) == 2
    assert "--rebuild" in capsys.readouterr().err

    assert main(["ingest", str(corpus), "--data-dir", str(settings.data_dir)]) == 2  # refused
    drop_collection(settings, "docs")
    _, col = ingest(settings, [corpus])
    assert_like_clean(settings, col, [corpus])


def test_cli_rebuild_replaces_a_damaged_collection(settings, corpus, capsys):
    ingest(settings, [corpus])[1].close()
    (settings.data_dir / "collections" / "docs.sqlite").write_bytes(b"\0garbage" * 512)
    args = ["ingest", str(corpus), "--rebuild", "--json", "--data-dir", str(settings.data_dir)]
    assert main(args, services=HASHED) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["files_indexed"] == len(PAGES) and report["files_unchanged"] == 0
    assert Collection(settings, "docs").manifest.stats()["files"] == len(PAGES)


@pytest.mark.parametrize("key", ["schema_version", "tokenizer_version"])
def test_index_from_another_version_is_refused(settings, corpus, key):
    _, col = ingest(settings, [corpus])
    col.manifest.set_meta({key: 99})
    with pytest.raises(CollectionError, match=rf"{key} 99, this version of rag reads 1.*--rebuild"):
        Collection(settings, "docs")


def test_lost_vectors_are_refused_not_answered_from_bm25_alone(settings, corpus):
    ingest(settings, [corpus])
    client = chroma_client(settings)
    client.delete_collection("docs")
    with pytest.raises(CollectionError, match=r"6 committed chunks have no vector.*--rebuild"):
        Collection(settings, "docs")


def test_damaged_chroma_store_is_refused_with_a_hint(settings, corpus):
    ingest(settings, [corpus])[1].close()
    SharedSystemClient.clear_system_cache()  # a new process would open the files afresh
    store = settings.data_dir / "chroma" / "chroma.sqlite3"
    store.write_bytes(b"garbage" * 4096)
    # a full disk fails the same way, so the hint puts freeing space before rebuilding
    with pytest.raises(ConfigError, match=r"cannot be opened.*MB free now.*--rebuild"):
        Collection(settings, "docs")
    SharedSystemClient.clear_system_cache()


def test_collections_made_before_versions_were_recorded_still_open(settings, corpus):
    _, col = ingest(settings, [corpus])
    col.manifest._db.execute("DELETE FROM meta WHERE key LIKE '%_version'")
    assert Collection(settings, "docs").manifest.stats()["files"] == len(PAGES)
    ingest(settings, [corpus])  # the next ingestion records them
    assert Collection(settings, "docs").manifest.meta()["tokenizer_version"] == 1


# --- full disk -----------------------------------------------------------------------------
def test_disk_full_during_vector_writes_loses_nothing(settings, corpus, monkeypatch, capsys):
    _, col = ingest(settings, [corpus])
    before = state(col)
    for i in range(6):
        (corpus / f"page{i}.md").write_text(f"# Page {i}\n\nRewritten topic {i} text.\n")
    real = ChromaChunkStore.upsert
    calls = []

    def full(self, chunks, vectors):
        calls.append(len(chunks))
        if len(calls) == 2:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(self, chunks, vectors)

    monkeypatch.setattr(ChromaChunkStore, "upsert", full)
    args = ["ingest", str(corpus), "--data-dir", str(settings.data_dir), "--commit-chunks", "2"]
    assert main(args, services=HASHED) == 1
    err = capsys.readouterr().err
    assert "No space left on device" in err and "re-run" in err
    col = Collection(settings, "docs")
    stats, committed, _ = state(col)
    assert stats == before[0] and 0 < len(committed - before[1]) < len(committed)
    monkeypatch.setattr(ChromaChunkStore, "upsert", real)
    assert main(args, services=HASHED) == 0
    assert_like_clean(settings, Collection(settings, "docs"), [corpus])


@pytest.fixture
def small_disk(tmp_path):
    """A real 3 MB tmpfs (needs permission to mount; skipped otherwise)."""
    mount_point = tmp_path / "small"
    mount_point.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=3m", "tmpfs", str(mount_point)],
        capture_output=True,
    )
    if done.returncode:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip()}")
    yield mount_point
    SharedSystemClient.clear_system_cache()
    subprocess.run(["umount", "-l", str(mount_point)], check=False)


def test_really_full_disk_is_a_clear_error_and_nothing_is_half_written(
    small_disk, corpus, tmp_path, capsys, monkeypatch
):
    data = ["--data-dir", str(small_disk / "data")]
    assert main(["ingest", str(corpus), *data], services=HASHED) == 0
    ballast = small_disk / "ballast"  # what the user deletes to free space afterwards
    ballast.write_bytes(b"\0" * 1_000_000)
    big = write_tree(
        tmp_path / "big",
        {f"big{i}.md": f"# Big {i}\n\n" + f"word{i} filler text " * 4000 for i in range(20)},
    )
    code = main(["ingest", str(big), "--collection", "big", *data], services=HASHED)
    err = capsys.readouterr().err
    assert code == 1 and "rag ingest: error:" in err and "re-run" in err
    ballast.unlink()
    # Freeing 1 MB is not enough: opening the collections lets Chroma compact the log the
    # failed run wrote, which needs more room ("Failed to apply logs to the metadata
    # segment"; in this process it retried forever, a hang seen twice). The user frees
    # space, as a bigger disk does here, and runs the next command: a new process.
    subprocess.run(["mount", "-o", "remount,size=64m", str(small_disk)], check=True)
    script = REOPEN.format(repo=str(REPO), data=str(small_disk / "data"))
    try:
        done = subprocess.run(
            [sys.executable, "-c", script], capture_output=True, cwd=REPO, timeout=300
        )
    except subprocess.TimeoutExpired:
        pytest.fail("reopening the collections after a full disk hung for 300 s")
    assert done.returncode == 0, done.stderr.decode()
    found = json.loads(done.stdout.decode().strip().splitlines()[-1])
    assert found == {"big_whole_files_only": True, "docs_files": len(PAGES), "docs_intact": True}


REOPEN = textwrap.dedent(
    """
    import json, sys
    sys.path.insert(0, {repo!r})
    from tools.store.collection import Collection
    from tools.config import load_settings
    settings = load_settings({{"data_dir": {data!r}}})
    big, docs = Collection(settings, "big"), Collection(settings, "docs")
    print(json.dumps({{
        "big_whole_files_only": big.vectors.ids() >= big.manifest.chunk_ids(),
        "docs_files": docs.manifest.stats()["files"],
        "docs_intact": docs.vectors.ids() == docs.manifest.vector_owners(),
    }}))
    """
)


# --- killed ingestion --------------------------------------------------------------------
KILLER = textwrap.dedent(
    """
    import os, signal, sys
    from dataclasses import replace
    sys.path.insert(0, {repo!r})
    from ingest import pipeline
    from tests.fakes import HashEmbeddings
    from tests.unit.test_storage_faults import OPTIONS
    from tools.store.collection import Collection
    from tools.config import load_settings
    from tools.store.manifest import Manifest
    from tools.store.pg_manifest import PgManifest

    settings = load_settings({values!r})
    Manifest = PgManifest if settings.store == "postgres" else Manifest
    real = Manifest.replace_file
    commits = []
    def replace_then_die(self, record, documents, version=None):
        real(self, record, documents, version)
        commits.append(record.file)
        if len(commits) == 3:  # killed between a commit and its vector clean-up
            os.kill(os.getpid(), signal.SIGKILL)
    Manifest.replace_file = replace_then_die
    col = Collection(settings, "docs", create=True)
    options = replace(OPTIONS, batching=pipeline.Batching(group_chunks=1))
    pipeline.Ingestor(settings, col, HashEmbeddings(), options, progress=False).run([{corpus!r}])
    """
)


def _killer(settings, corpus) -> str:
    values = {"data_dir": str(settings.data_dir), "store": settings.store}
    values["database_url"] = settings.database_url
    return KILLER.format(repo=str(REPO), values=values, corpus=str(corpus))


def test_killed_ingestion_then_rerun_matches_a_clean_run(store_settings, corpus, tmp_path):
    settings = store_settings
    script = _killer(settings, corpus)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, cwd=REPO)
    assert done.returncode == -signal.SIGKILL, done.stderr.decode()
    col = Collection(settings, "docs")
    assert len(col.manifest.files()) == 3  # whole files only
    assert_halves_agree(col)
    report, col = ingest(settings, [corpus])
    assert report.files_unchanged == 3 and report.files_indexed == 3
    assert_like_clean(settings, col, [corpus])


def test_a_killed_run_leaves_the_last_version_to_go_back_to(store_settings, corpus):
    """v1 complete; v2 changes every page and is killed after 3 commits. The pages it did
    not reach still answer as v1, and a rollback makes the whole collection v1 again."""
    settings = store_settings
    ingest(settings, [corpus])
    for page in corpus.iterdir():
        page.write_text(page.read_text().replace("Topic number", "Renamed number"))
    script = _killer(settings, corpus)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, cwd=REPO)
    assert done.returncode == -signal.SIGKILL, done.stderr.decode()
    col = Collection(settings, "docs")
    history = col.manifest.versions()
    assert [(v["version"], v["changed"], bool(v["finished_at"])) for v in history] == [
        (1, 0, True),
        (2, 3, False),
    ]
    assert len(col.keyword_search("renamed", 10)) == 3
    assert len(col.keyword_search("topic", 10)) == len(PAGES) - 3
    new, restored = col.rollback(1)
    assert (new, restored) == (3, 3) and col.keyword_search("renamed", 10) == []
    assert len(col.keyword_search("topic", 10)) == len(PAGES)
    assert_halves_agree(col)


RUNNER = textwrap.dedent(
    """
    import sys
    from dataclasses import replace
    sys.path.insert(0, {repo!r})
    from ingest import pipeline
    from tests.fakes import HashEmbeddings
    from tests.unit.test_storage_faults import OPTIONS
    from tools.store.collection import Collection
    from tools.config import load_settings

    settings = load_settings({{"data_dir": {data!r}}})
    col = Collection(settings, "docs", create=True)
    options = replace(OPTIONS, batching=pipeline.Batching(group_chunks=1))
    pipeline.Ingestor(settings, col, HashEmbeddings(), options, progress=False).run([{corpus!r}])
    """
)


@pytest.mark.parametrize("commits", [1, 4, 9])
def test_kill_9_at_any_point_leaves_both_halves_consistent(settings, tmp_path, commits):
    """SIGKILL from outside, after a given number of file commits, wherever the run then is
    (embedding, writing vectors, inside a manifest transaction, deleting old vectors)."""
    pages = {f"p{i:02d}.md": f"# Page {i}\n\nWord{i} and subject{i % 5}.\n" for i in range(30)}
    corpus = write_tree(tmp_path / "many", pages)
    script = RUNNER.format(repo=str(REPO), data=str(settings.data_dir), corpus=str(corpus))
    proc = subprocess.Popen([sys.executable, "-c", script], cwd=REPO, stderr=subprocess.PIPE)
    manifest = settings.data_dir / "collections" / "docs.sqlite"
    try:
        while proc.poll() is None and _committed_files(manifest) < commits:
            time.sleep(0.005)
    finally:
        proc.kill()
        proc.wait()
    assert proc.returncode == -signal.SIGKILL, proc.stderr.read().decode()
    SharedSystemClient.clear_system_cache()  # as a new process would open the files
    col = Collection(settings, "docs")
    assert 0 < len(col.manifest.files()) < len(pages)
    assert_halves_agree(col)
    report, col = ingest(settings, [corpus])
    assert report.files_unchanged + report.files_indexed == len(pages)
    assert_halves_agree(col)


def _committed_files(manifest: Path) -> int:
    try:
        with sqlite3.connect(f"file:{manifest}?mode=ro", uri=True, timeout=1) as db:
            return db.execute("SELECT COUNT(*) FROM files").fetchone()[0]
    except sqlite3.OperationalError:  # not created yet, or locked for a moment
        return 0


# --- remote embedding failures -----------------------------------------------------------
class FlakyEmbeddings(HashEmbeddings):
    def __init__(self, failures: int) -> None:
        super().__init__()
        self.failures = failures

    def embed_documents(self, texts):
        if self.failures:
            self.failures -= 1
            raise ConnectionError("embedding service unavailable")
        return super().embed_documents(texts)


def test_transient_embedding_failures_are_retried(settings, corpus):
    flaky = FlakyEmbeddings(failures=2)
    report, col = ingest(settings, [corpus], embedder=flaky, embed_backoff_s=0)
    assert report.files_indexed == len(PAGES)
    assert_like_clean(settings, col, [corpus])


def test_persistent_embedding_failure_keeps_committed_files(settings, corpus):
    emb = FlakyEmbeddings(failures=0)
    real = emb.embed_documents
    calls = []

    def fail_after_first(texts):
        calls.append(len(texts))
        if len(calls) > 1:
            raise ConnectionError("embedding service unavailable")
        return real(texts)

    emb.embed_documents = fail_after_first
    with pytest.raises(ModelError, match=r"after 3 attempts.*re-run to finish"):
        ingest(settings, [corpus], embedder=emb, embed_backoff_s=0, group_chunks=2)
    col = Collection(settings, "docs")
    assert len(col.manifest.files()) == 2  # the first group, whole
    assert col.vectors.ids() == col.manifest.vector_owners()
    report, col = ingest(settings, [corpus])
    assert report.files_unchanged == 2
    assert_like_clean(settings, col, [corpus])


# --- limits ----------------------------------------------------------------------------
def test_too_many_files_stops_before_changing_anything(tmp_path, corpus):
    settings = load_settings({"data_dir": tmp_path / "data", "max_ingest_documents": 5})
    with pytest.raises(IngestError, match="6 files to ingest, over max_ingest_documents=5"):
        ingest(settings, [corpus])
    assert Collection(settings, "docs").manifest.stats()["files"] == 0


def test_too_many_records_in_one_file_stops_before_changing_anything(tmp_path, capsys):
    records = "\n".join(json.dumps({"id": i, "text": f"record {i}"}) for i in range(30))
    folder = write_tree(tmp_path / "jsonl", {"a.md": "# A\n\nfirst file\n", "r.jsonl": records})
    args = ["ingest", str(folder), "--data-dir", str(tmp_path / "data")]
    assert main([*args, "--set", "max_ingest_documents=10"]) == 1
    assert "31 documents to ingest, over max_ingest_documents=10" in capsys.readouterr().err
    settings = load_settings({"data_dir": tmp_path / "data"})
    assert list_collections(settings) == []  # nothing changed, and no empty collection left


def test_path_traversal_in_collection_names_is_refused(settings):
    for name in ("../etc", "a/../../b", "..", "a/b", "/abs"):
        with pytest.raises(ConfigError, match="invalid collection name"):
            Collection(settings, name, create=True)
        with pytest.raises(ConfigError, match="invalid collection name"):
            drop_collection(settings, name)
    assert not list(settings.data_dir.parent.rglob("*.sqlite"))


def test_rag_serve_refuses_to_start_on_a_damaged_collection(settings, corpus, capsys):
    ingest(settings, [corpus])[1].close()
    (settings.data_dir / "collections" / "docs.sqlite").write_bytes(b"garbage" * 100)
    assert main(["serve", "--data-dir", str(settings.data_dir)]) == 2
    assert "--rebuild" in capsys.readouterr().err


def test_an_interrupted_big_file_keeps_its_embedded_parts_and_a_rerun_resumes(tmp_path, caplog):
    small_calls = {"embed_backoff_s": 0, "embed_call_texts": 4}
    settings = load_settings({"data_dir": tmp_path / "data", "embedding_batch_size": 1})
    big = "\n\n".join(
        f"## Part {i}\n\nSection {i} explains topic{i} " + "in many more words " * 8
        for i in range(20)
    )
    corpus = write_tree(tmp_path / "big", {"big.md": big})
    emb = HashEmbeddings()
    real = emb.embed_documents

    def fail_on_third_call(texts):
        if len(emb.calls) == 2:
            raise ConnectionError("embedding service unavailable")
        return real(texts)

    emb.embed_documents = fail_on_third_call
    with pytest.raises(ModelError):
        ingest(settings, [corpus], embedder=emb, **small_calls)
    col = Collection(settings, "docs")
    assert col.manifest.files() == [] and col.manifest.chunk_ids() == set()  # not committed
    embedded_before = sum(emb.calls)
    assert embedded_before == 8  # two calls of 4 texts were kept
    again = HashEmbeddings()
    with caplog.at_level("INFO", logger="ingest.pipeline"):  # announce even this small file
        report, col = ingest(settings, [corpus], embedder=again, announce_after_s=0, **small_calls)
    assert "big.md: " in caplog.text and "a re-run resumes" in caplog.text
    assert report.files_indexed == 1 and report.vectors_reused == embedded_before
    assert sum(again.calls) == report.chunks_embedded == len(col.manifest.chunk_ids()) - 8
    assert col.manifest.pending_vectors(settings.embedding_model, ["x"]) == {}
    assert col.manifest._db.execute("SELECT COUNT(*) FROM pending_vectors").fetchone()[0] == 0
    assert_like_clean(settings, col, [corpus])
