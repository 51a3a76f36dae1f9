"""What ingestion and readers rely on, on every backend: an incremental re-ingest touches
only what changed, and a reader during commits sees each file's old or new chunks,
never neither (the kill -9 cases are in tests/unit/test_storage_faults.py, on the
embedded store and PostgreSQL)."""

from __future__ import annotations

import threading

from ingest.partition import PartitionOptions
from ingest.pipeline import IngestOptions, Ingestor
from tests.fakes import HashEmbeddings
from tools.store.collection import Collection

EMB = HashEmbeddings()
OPTIONS = IngestOptions(partition=PartitionOptions("structure", 80, 0), prune=True)


def ingest(settings, root):
    collection = Collection(settings, "contract", create=True)
    return Ingestor(settings, collection, EMB, OPTIONS, progress=False).run([root]), collection


def test_an_incremental_reingest_embeds_only_what_changed(backend_settings, tmp_path):
    root = tmp_path / "docs"
    root.mkdir()
    for n in range(5):
        (root / f"f{n}.md").write_text(f"# Page {n}\n\nTopic {n} is described here.\n")
    first, _ = ingest(backend_settings, root)
    assert (first.files_indexed, first.version) == (5, 1)
    (root / "f2.md").write_text("# Page 2\n\nTopic two was rewritten.\n")
    (root / "f4.md").unlink()
    second, collection = ingest(backend_settings, root)
    assert (second.files_indexed, second.files_unchanged, second.files_removed) == (1, 3, 1)
    assert second.chunks_embedded == second.chunks_added == 1
    assert [hit.text for hit, _ in collection.keyword_search("rewritten", 5)] == [
        "# Page 2\n\nTopic two was rewritten."
    ]
    assert not [hit for hit, _ in collection.keyword_search("page 4", 10) if "f4" in hit.source]
    assert (len(collection.manifest.files_at(1)), len(collection.manifest.files_at(2))) == (5, 4)


def test_a_reader_during_commits_sees_the_old_or_the_new_file(backend_settings, tmp_path):
    root = tmp_path / "docs"
    root.mkdir()
    page = root / "release.md"
    page.write_text("# Release\n\nThe codename is release0.\n")
    ingest(backend_settings, root)
    reader = Collection(backend_settings, "contract")
    seen: list[tuple[int, int]] = []  # (keyword hits, dense hits) per read
    done = threading.Event()

    def read() -> None:
        vector = EMB.embed_query("codename")
        while not done.is_set():
            hits = reader.stable_read(
                lambda: (reader.keyword_search("codename", 5), reader.dense_search(vector, 5))
            )
            seen.append((len(hits[0]), len(hits[1])))

    thread = threading.Thread(target=read)
    thread.start()
    try:
        for n in range(1, 8):
            page.write_text(f"# Release\n\nThe codename is release{n}.\n")
            ingest(backend_settings, root)
    finally:
        done.set()
        thread.join()
    # one chunk holds the word, before, during and after every commit, in both halves
    assert seen and set(seen) == {(1, 1)}


def test_as_of_reads_a_past_version_and_rollback_brings_it_back(backend_settings, tmp_path):
    root = tmp_path / "docs"
    root.mkdir()
    page = root / "release.md"
    for codename in ("bluefin", "marlin"):
        page.write_text(f"# Release\n\nThe codename is {codename}.\n")
        ingest(backend_settings, root)

    def codename(collection) -> str:
        (hit, _), *_ = collection.keyword_search("codename", 5)
        return hit.text.split()[-1]

    past = Collection(backend_settings.model_copy(update={"as_of": 1}), "contract")
    assert (past.version, codename(past)) == (1, "bluefin.")
    again = Collection(backend_settings.model_copy(update={"as_of": 1}), "contract")
    assert codename(again) == "bluefin."  # the copy made once is read again
    current = Collection(backend_settings, "contract")
    assert codename(current) == "marlin."
    assert current.rollback(1) == (3, 1) and codename(current) == "bluefin."
