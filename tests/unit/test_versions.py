"""Versioned collections: rollback and ``as_of`` answer from a past version without
re-embedding, gc reclaims it (fake embedder and models, real Chroma + SQLite)."""

from __future__ import annotations

import json

import pytest

from graph import build_graph, config_for
from ingest.partition import PartitionOptions
from ingest.pipeline import IngestOptions, Ingestor
from rag_cli.main import main
from tests.files import write_tree
from tests.unit.conftest import EMB
from tools.config import ConfigError, load_settings
from tools.store.collection import Collection

OPTIONS = IngestOptions(partition=PartitionOptions("structure", 200, 0), prune=True)
V1 = {
    "install.md": "# Install\n\nThe service listens on port 8080 by default.\n",
    "tracing.md": "# Tracing\n\nSet LANGFUSE_PUBLIC_KEY to send traces to Langfuse.\n\n"
    + "".join(f"## Part {n}\n\nTrace part {n} goes to the backend.\n\n" for n in range(300)),
}
QUESTION = "Which port does the service listen on by default?"


@pytest.fixture
def versioned(tmp_path, monkeypatch):
    """A collection at v2: v1 ingested, then install.md changed and tracing.md deleted."""
    monkeypatch.setenv("RAG_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("RAG_DISTANCE_THRESHOLD", "0.95")
    root = write_tree(tmp_path / "docs", V1)
    settings = load_settings()
    ingest(settings, root)
    (root / "install.md").write_text("# Install\n\nThe service listens on port 9090 now.\n")
    (root / "tracing.md").unlink()
    ingest(settings, root)
    return settings


def ingest(settings, root) -> None:
    collection = Collection(settings, "docs", create=True)
    try:
        Ingestor(settings, collection, EMB, OPTIONS, progress=False).run([root])
    finally:
        collection.close()


def cited(models, **settings) -> str:
    out = build_graph().invoke(
        {"question": QUESTION}, config_for(max_regenerations=0, **settings), context=models.services
    )
    return " ".join(c["snippet"] for c in out["citations"])


def rag(capsys, *argv: str) -> tuple[int, dict, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, (json.loads(out) if code == 0 and out.startswith("{") else {}), err


def test_rollback_and_as_of_answer_from_a_past_version(versioned, models, capsys):
    # an answer each version's page states in part (its Install section): cited either way
    models.answer = "The service listens on port 8080 [1]. The Install section says so [1]."
    assert "9090" in cited(models)
    code, diff, err = rag(capsys, "collections", "diff", "docs", "1", "2", "--json")
    assert code == 0, err
    assert list(diff["changed"]) == ["docs/install.md"] and list(diff["removed"]) == [
        "docs/tracing.md"
    ]
    code, rolled, err = rag(capsys, "collections", "rollback", "docs", "1", "--json")
    assert code == 0, err
    assert rolled["version"] == 3 and rolled["rolled_back_to"] == 1 and rolled["chunks"] > 50
    assert "8080" in cited(models)  # the same process's cached collection sees it
    assert "9090" in cited(models, as_of=2)  # and a past version is one setting away
    col = Collection(versioned, "docs")
    assert col.keyword_search("langfuse traces", 3)  # the deleted page is back
    assert [v["note"] for v in col.manifest.versions()] == [None, None, "rollback to v1"]
    assert col.manifest.files_at(3) == col.manifest.files_at(1)
    code, _, err = rag(capsys, "collections", "rollback", "docs", "7")
    assert code == 2 and "no version 7" in err


def test_as_of_reads_a_snapshot_and_never_writes(versioned):
    past = Collection(load_settings({"as_of": 1}), "docs")
    assert past.version == 1 and past.keyword_search("langfuse", 3)
    assert Collection(versioned, "docs").keyword_search("langfuse", 3) == []
    with pytest.raises(ConfigError, match="as_of=1 reads a past version"):
        Collection(load_settings({"as_of": 1}), "docs", create=True)
    with pytest.raises(ConfigError, match="no version 5"):
        Collection(load_settings({"as_of": 5}), "docs")


def test_gc_reclaims_old_versions(versioned, capsys):
    col = Collection(versioned, "docs")
    kept = col.vectors.ids()
    assert kept == col.manifest.chunk_ids() | col.manifest.retired_ids()
    assert len(kept) > col.manifest.chunk_count()  # v1's chunks are still there
    assert col.remove_orphans() == 0  # kept for rollback is not orphaned
    code, freed, err = rag(capsys, "collections", "gc", "docs", "--keep", "1", "--json")
    assert code == 0, err
    assert freed["retired_chunks_deleted"] == freed["vectors_deleted"] > 50
    assert freed["restorable_from"] == 2 and freed["manifest_bytes_freed"] > 0
    assert col.vectors.ids() == col.manifest.vector_owners() and not col.manifest.retired_ids()
    code, _, err = rag(capsys, "collections", "rollback", "docs", "1")
    assert code == 2 and "reclaimed by gc" in err


def test_a_rollback_missing_vectors_changes_nothing(versioned):
    col = Collection(versioned, "docs")
    before = (col.manifest.chunk_ids(), col.manifest.generation())
    with pytest.raises(ValueError, match=r"lacks \d\d+ of the chunks of version 1"):
        col.manifest.rollback(1, lambda ids: set())
    assert (col.manifest.chunk_ids(), col.manifest.generation()) == before
    assert [v["version"] for v in col.manifest.versions()] == [1, 2]


def test_concurrent_requests_for_one_version_build_one_snapshot(versioned, monkeypatch):
    """Eight readers ask for v1 at once: one copy is built, the others wait and reuse it."""
    import threading

    from tools.store.manifest import Manifest

    builds = []
    real = Manifest.rollback

    def counted(self, *args, **kwargs):
        builds.append(1)
        return real(self, *args, **kwargs)

    monkeypatch.setattr(Manifest, "rollback", counted)
    opened = []

    def read():
        handle = Collection(load_settings({"as_of": 1}), "docs")
        opened.append(handle.version)
        handle.close()

    threads = [threading.Thread(target=read) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert opened == [1] * 8 and len(builds) == 1
    snapshots = versioned.data_dir / "snapshots"
    assert [p.name for p in snapshots.glob("*.sqlite")] == ["docs-v1.sqlite"]
    assert not list(snapshots.glob("*.tmp"))


def test_snapshots_per_collection_are_bounded(versioned, tmp_path):
    from tools.store.pg_snapshots import SNAPSHOTS_KEPT

    root = tmp_path / "docs"
    for n in range(SNAPSHOTS_KEPT + 2):  # more versions than copies may be kept
        (root / "install.md").write_text(f"# Install\n\nThe service listens on port {n}.\n")
        ingest(versioned, root)
    latest = Collection(versioned, "docs").version
    for version in range(1, latest):
        Collection(load_settings({"as_of": version}), "docs").close()
    kept = sorted((versioned.data_dir / "snapshots").glob("*.sqlite"))
    assert len(kept) == SNAPSHOTS_KEPT
    assert f"docs-v{latest - 1}.sqlite" in {p.name for p in kept}  # the last one asked for
