"""Incremental, idempotent, interrupt-safe ingestion (fake embedder, real Chroma + SQLite)."""

from __future__ import annotations

import os
from dataclasses import replace

import pytest

from ingest.partition import PartitionOptions
from ingest.pipeline import Batching, IngestError, IngestOptions, Ingestor
from tests.fakes import HashEmbeddings
from tests.files import write_tree
from tools.config import ConfigError, load_settings
from tools.store.collection import Collection, exclusive

OPTIONS = IngestOptions(partition=PartitionOptions("structure", 200, 20))

PAGES = {
    "install.md": "# Install\n\nRun make demo to install.\n\n## From source\n\n"
    + "Clone the repository and run the bootstrap script. " * 6,
    "config.md": "# Configuration\n\nSettings come from rag.toml and RAG_ variables.\n",
    "sub/models.md": "# Models\n\nThe default chat model is local.\n\n## Remote\n\n"
    + "Use openai specs for hosted models. " * 8,
}


@pytest.fixture
def corpus(tmp_path):
    return write_tree(tmp_path / "corpus", PAGES)


@pytest.fixture
def settings(tmp_path):
    return load_settings({"data_dir": tmp_path / "data"})


def run(settings, paths, name="docs", options=OPTIONS, embedder=None):
    col = Collection(settings, name, create=True)
    emb = embedder or HashEmbeddings()
    report = Ingestor(settings, col, emb, options, progress=False).run(paths)
    return report, col, emb


def consistent(col: Collection) -> bool:
    return col.vectors.ids() == col.manifest.vector_owners()


def test_first_run_indexes_everything(settings, corpus):
    report, col, _ = run(settings, [corpus])
    assert (report.files_seen, report.files_indexed, report.files_unchanged) == (3, 3, 0)
    assert report.chunks_added == col.manifest.stats()["chunks"] > 3
    assert consistent(col)
    hits = col.keyword_search("bootstrap script", k=3)
    assert hits and hits[0][0].heading == "Install > From source"


def test_second_run_embeds_nothing(settings, corpus):
    run(settings, [corpus])
    report, col, emb = run(settings, [corpus])
    assert (report.files_unchanged, report.chunks_added, report.chunks_deleted) == (3, 0, 0)
    assert emb.calls == []
    assert consistent(col)


def test_touched_but_identical_file_is_unchanged(settings, corpus):
    run(settings, [corpus])
    path = corpus / "config.md"
    os.utime(path, ns=(1, 1))
    report, _, emb = run(settings, [corpus])
    assert report.files_unchanged == 3 and emb.calls == []


def test_changed_file_replaces_exactly_its_chunks(settings, corpus):
    _, col, _ = run(settings, [corpus])
    before = {s: col.manifest.chunk_ids_of_file(s) for s in col.manifest.files()}
    (corpus / "config.md").write_text(PAGES["config.md"] + "\n## Secrets\n\nKeys are masked.\n")
    report, col, _ = run(settings, [corpus])
    after = {s: col.manifest.chunk_ids_of_file(s) for s in col.manifest.files()}
    changed = [s for s in after if after[s] != before[s]]
    assert changed == ["corpus/config.md"]
    assert report.files_indexed == 1 and report.chunks_deleted == len(before[changed[0]])
    assert consistent(col)


def test_deleted_file_removed_only_with_prune(settings, corpus):
    run(settings, [corpus])
    (corpus / "sub" / "models.md").unlink()
    report, col, _ = run(settings, [corpus])
    assert report.files_removed == 0 and len(col.manifest.files()) == 3
    report, col, _ = run(
        settings, [corpus], options=IngestOptions(partition=OPTIONS.partition, prune=True)
    )
    assert report.files_removed == 1 and report.chunks_deleted > 0
    assert sorted(col.manifest.files()) == ["corpus/config.md", "corpus/install.md"]
    assert consistent(col)


def test_prune_only_touches_the_paths_given(settings, corpus, tmp_path):
    other = tmp_path / "other"
    other.mkdir()
    (other / "notes.txt").write_text("Unrelated notes that must survive a prune of corpus.")
    run(settings, [corpus])
    run(settings, [other])
    prune = IngestOptions(partition=OPTIONS.partition, prune=True)
    report, col, _ = run(settings, [corpus], options=prune)
    assert report.files_removed == 0
    assert "other/notes.txt" in col.manifest.files()


def test_renamed_file_reuses_vectors(settings, corpus):
    run(settings, [corpus])
    (corpus / "install.md").rename(corpus / "setup.md")
    prune = IngestOptions(partition=OPTIONS.partition, prune=True)
    report, col, _emb = run(settings, [corpus], options=prune)
    assert report.files_indexed == 1 and report.files_removed == 1
    assert report.chunks_embedded == 0 and report.vectors_reused > 0
    assert consistent(col)


class ExplodingEmbeddings(HashEmbeddings):
    def __init__(self, after_calls: int) -> None:
        super().__init__()
        self.after = after_calls

    def embed_documents(self, texts):
        if len(self.calls) >= self.after:
            raise KeyboardInterrupt  # what Ctrl-C looks like mid-run
        return super().embed_documents(texts)


def test_interrupted_run_then_rerun_matches_a_clean_run(settings, corpus):
    one_per_group = replace(OPTIONS, batching=Batching(group_chunks=1))  # commits in between
    with pytest.raises(KeyboardInterrupt):
        run(
            settings,
            [corpus],
            name="broken",
            options=one_per_group,
            embedder=ExplodingEmbeddings(after_calls=2),
        )
    col = Collection(settings, "broken")
    committed = len(col.manifest.files())
    assert 0 < committed < 3  # some files committed, some not: never a half-written file
    assert consistent(col) or col.vectors.ids() >= col.manifest.chunk_ids()
    report, col, _ = run(settings, [corpus], name="broken")
    _, clean, _ = run(settings, [corpus], name="clean")
    assert col.manifest.stats() == clean.manifest.stats()
    assert col.manifest.chunk_ids() == clean.manifest.chunk_ids()
    assert col.vectors.count() == clean.vectors.count()  # no duplicates, no orphans
    assert report.files_unchanged == committed


def test_skipped_files_are_listed(settings, corpus):
    (corpus / "blob.txt").write_bytes(b"\x00\x01binary\x00" * 10)
    (corpus / "empty.md").write_text("   \n")
    report, _, _ = run(settings, [corpus])
    reasons = {s["path"]: s["reason"] for s in report.skipped}
    assert set(reasons) == {"corpus/blob.txt", "corpus/empty.md"}
    assert report.files_indexed == 3


def test_strict_stops_and_changes_nothing(settings, corpus):
    run(settings, [corpus])
    _, col, _ = run(settings, [corpus])
    before = col.manifest.chunk_ids()
    (corpus / "config.md").write_text("# Configuration\n\nA changed page.\n")
    (corpus / "zz.bin.txt").write_bytes(b"\x00" * 100)
    strict = IngestOptions(partition=OPTIONS.partition, strict=True)
    with pytest.raises(IngestError, match=r"zz\.bin\.txt"):
        run(settings, [corpus], options=strict)
    assert Collection(settings, "docs").manifest.chunk_ids() == before


def test_exclude_glob(settings, corpus):
    report, col, _ = run(
        settings, [corpus], options=IngestOptions(partition=OPTIONS.partition, exclude=("sub/*",))
    )
    assert report.files_seen == 2
    assert "corpus/sub/models.md" not in col.manifest.files()


def test_embedding_model_switch_is_refused(settings, corpus, tmp_path):
    run(settings, [corpus])
    other = load_settings({"data_dir": tmp_path / "data", "embedding_model": "openai:x@http://h"})
    with pytest.raises(ConfigError, match="was embedded with 'local'"):
        run(other, [corpus])


def test_concurrent_ingestion_is_refused(settings, corpus):
    col = Collection(settings, "docs", create=True)
    with exclusive(settings, col.name), pytest.raises(IngestError, match="another ingestion"):
        run(settings, [corpus])


def test_csv_rows_are_derived_per_field_combination(settings, tmp_path):
    table = tmp_path / "sessions.csv"
    table.write_text("time,title,room\n10:00,Opening keynote,Hall A\n11:00,RAG in practice,B2\n")
    derive = IngestOptions(partition=OPTIONS.partition, derive=True)
    _report, col, _ = run(settings, [table], options=derive)
    rows = [c for c in col.manifest.chunks_of_source("sessions.csv") if c.kind == "row"]
    assert len(rows) == 2 * 7  # 3 fields -> 7 combinations per row, as in the seeds
    assert {c.text for c in rows} == {
        "time: 10:00; title: Opening keynote; room: Hall A",
        "time: 11:00; title: RAG in practice; room: B2",
    }
    hits = col.keyword_search("keynote", k=3)
    assert hits[0][0].text.startswith("time: 10:00")
