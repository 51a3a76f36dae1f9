"""Bad inputs and write failures, end to end through the ingestion pipeline.

Real extraction, Chroma and SQLite; only the embedder is a deterministic fake.
"""

from __future__ import annotations

import os
import sqlite3
import zipfile
from pathlib import Path

import pytest

from ingest.partition import PartitionOptions
from ingest.pipeline import IngestError, IngestOptions, Ingestor
from tests.fakes import HashEmbeddings
from tests.files import make_pdf
from tools.config import load_settings
from tools.store.collection import Collection
from tools.store.manifest import Manifest

OPTIONS = IngestOptions(partition=PartitionOptions("structure", 200, 20))


@pytest.fixture
def settings(tmp_path):
    return load_settings({"data_dir": tmp_path / "data"})


def run(settings, paths, name="docs", options=OPTIONS):
    col = Collection(settings, name, create=True)
    report = Ingestor(settings, col, HashEmbeddings(), options, progress=False).run(paths)
    return report, col


GOOD = {
    "guide.md": "# Guide\n\nHow to install.\n\n## Details\n\n" + "Run the setup script. " * 20,
    "notes.txt": "Plain notes about the retrieval service.\n" * 5,
    "records.jsonl": '{"id": "r1", "text": "first record"}\n{"id": "r2", "text": "second one"}\n',
}


@pytest.fixture
def messy(tmp_path) -> Path:
    root = tmp_path / "messy"
    root.mkdir()
    for name, text in GOOD.items():
        (root / name).write_text(text)
    make_pdf(root / "report.pdf", ["Quarterly report page one", "Page two of the report"])
    (root / "blob.txt").write_bytes(b"\x7fELF\x02\x01\x01\x00" + bytes(range(256)) * 8)
    (root / "latin1.md").write_bytes("# Caf\xe9\n\nna\xefve text\n".encode("latin-1"))
    (root / "empty.txt").write_bytes(b"")
    (root / "blank.md").write_text(" \n\t\n")
    with (root / "huge.txt").open("wb") as fh:
        fh.truncate(50 * 1024 * 1024)  # sparse: instant, and reading it would be the bug
    (root / "corrupt.pdf").write_bytes(b"%PDF-1.7\n" + bytes(range(256)) * 16)
    whole = make_pdf(tmp_path / "whole.pdf", ["Alpha", "Beta"]).read_bytes()
    (root / "truncated.pdf").write_bytes(whole[: len(whole) // 2])
    make_pdf(root / "scanned.pdf", ["", ""])  # pages without any text layer
    (root / "image.png").write_bytes(b"\x89PNG\r\n\x1a\n")
    (root / "broken.json").write_text('[{"text": "unterminated"')
    (root / "dangling.md").symlink_to(tmp_path / "does-not-exist.md")
    os.mkfifo(root / "pipe.txt")  # reading a FIFO would block the run forever
    # a few KB that would expand to 25 MB, and 5 MB of XML squeezed 1000x under the limit
    for name, size in (("bomb.docx", 25_000_000), ("squeezed.docx", 5_000_000)):
        with zipfile.ZipFile(root / name, "w", zipfile.ZIP_DEFLATED) as archive:
            archive.writestr("word/document.xml", "<w:p/>" * (size // 6))
    (root / "deep.json").write_text("[" * 1500 + "]" * 1500)
    return root


EXPECTED_REASONS = {
    "messy/blob.txt": "binary file (NUL bytes in first 8 KiB)",
    "messy/latin1.md": "invalid UTF-8 at byte offset 5 (line 1)",
    "messy/empty.txt": "empty document",
    "messy/blank.md": "empty document",
    "messy/huge.txt": "file is 52.4 MB, over the 20.0 MB limit (max_file_bytes)",
    "messy/corrupt.pdf": "unreadable PDF",
    "messy/truncated.pdf": "unreadable PDF",
    "messy/scanned.pdf": "no extractable text (scanned PDF?)",
    "messy/image.png": "unsupported file type .png",
    "messy/broken.json": "invalid JSON at line 1",
    "messy/dangling.md": "cannot read file: No such file or directory",
    "messy/pipe.txt": "not a regular file",
    "messy/bomb.docx": "expands to 25.0 MB, over the 20.0 MB limit (max_file_bytes)",
    "messy/squeezed.docx": "member 'word/document.xml' expands",
    "messy/deep.json": "nested deeper than 100 levels",
}


def test_bad_files_are_skipped_with_reasons_and_good_ones_indexed(settings, messy, monkeypatch):
    read: list[str] = []
    real_read_bytes = Path.read_bytes

    def recording_read_bytes(self):
        read.append(self.name)
        return real_read_bytes(self)

    monkeypatch.setattr(Path, "read_bytes", recording_read_bytes)
    report, col = run(settings, [messy])

    reasons = {s["path"]: s["reason"] for s in report.skipped}
    assert set(reasons) == set(EXPECTED_REASONS)
    for path, reason in EXPECTED_REASONS.items():
        assert reasons[path].startswith(reason), (path, reasons[path])
    assert "huge.txt" not in read and "pipe.txt" not in read  # refused before reading

    good = ["messy/guide.md", "messy/notes.txt", "messy/records.jsonl", "messy/report.pdf"]
    assert report.files_seen == len(good) + len(EXPECTED_REASONS)
    assert report.files_indexed == len(good) and report.warnings == []
    assert col.manifest.files() == good
    assert col.manifest.stats()["documents"] == 5  # two JSONL records
    pages = [c.page for c in col.manifest.chunks_of_source("messy/report.pdf")]
    assert pages == [1, 2]
    assert col.vectors.ids() == col.manifest.vector_owners()

    # skipped files are not remembered as done: they are reported again, nothing else changes
    again, col = run(settings, [messy])
    assert {s["path"] for s in again.skipped} == set(EXPECTED_REASONS)
    assert (again.files_unchanged, again.files_indexed, again.chunks_added) == (4, 0, 0)


def test_strict_stops_at_the_first_bad_file_in_a_messy_folder(settings, messy):
    strict = IngestOptions(partition=OPTIONS.partition, strict=True)
    with pytest.raises(IngestError, match=r"messy/blank\.md: empty document \(--strict"):
        run(settings, [messy], options=strict)
    assert Collection(settings, "docs").manifest.stats()["chunks"] == 0


def test_good_file_becoming_unreadable_keeps_its_committed_chunks(settings, messy):
    _, col = run(settings, [messy])
    before = col.manifest.chunk_ids_of_file("messy/notes.txt")
    (messy / "notes.txt").write_bytes(b"now \xff\xfe broken")
    report, col = run(settings, [messy])
    assert "messy/notes.txt" in {s["path"] for s in report.skipped}
    assert col.manifest.chunk_ids_of_file("messy/notes.txt") == before  # last good version


# --- a failure while writing ----------------------------------------------------------------

V1 = {f"page{n}.md": f"# Page {n}\n\nVersion one of page {n}.\n" for n in range(4)}
V2 = {
    "page0.md": "# Page 0\n\nVersion two of page 0, now longer. " + "More text here. " * 30,
    "page1.md": "# Page 1\n\nVersion two of page 1.\n",
    "page2.md": V1["page2.md"],  # unchanged
    "page3.md": "# Page 3\n\nVersion two of page 3.\n\n## New\n\nA new section.\n",
    "page4.md": "# Page 4\n\nA brand new page.\n",
}


def write_corpus(root: Path, pages: dict[str, str]) -> None:
    root.mkdir(exist_ok=True)
    for name, text in pages.items():
        path = root / name
        if not path.exists() or path.read_text() != text:  # unchanged files keep their mtime
            path.write_text(text)


def stored_vectors(col: Collection, ids: set[str]) -> dict[str, list[float]]:
    if not ids:
        return {}
    got = col.vectors._collection.get(ids=sorted(ids), include=["embeddings"])
    return {cid: list(v) for cid, v in zip(got["ids"], got["embeddings"], strict=True)}


def snapshot(col: Collection) -> dict:
    manifest = col.manifest
    committed = manifest.chunk_ids()
    return {
        "files": {
            f: (manifest.file_record(f), manifest.chunk_ids_of_file(f)) for f in manifest.files()
        },
        "chunks": manifest.chunks(committed),
        "vectors": stored_vectors(col, committed),
    }


class DiskFull(sqlite3.OperationalError):
    pass


@pytest.mark.parametrize("existing", [False, True], ids=["fresh", "update"])
def test_failed_commit_leaves_uncommitted_files_as_before_and_rerun_completes(
    settings, tmp_path, monkeypatch, existing
):
    corpus = tmp_path / "corpus"
    if existing:
        write_corpus(corpus, V1)
        run(settings, [corpus])
    write_corpus(corpus, V2)
    col = Collection(settings, "docs", create=True)
    before = snapshot(col)

    calls: list[str] = []
    real_replace = Manifest.replace_file

    def failing_replace(self, record, documents, version=None):
        calls.append(record.file)
        if len(calls) == 2:
            raise DiskFull("database or disk is full")
        return real_replace(self, record, documents, version)

    monkeypatch.setattr(Manifest, "replace_file", failing_replace)
    with pytest.raises(DiskFull):
        run(settings, [corpus])
    monkeypatch.setattr(Manifest, "replace_file", real_replace)

    col = Collection(settings, "docs")
    after = snapshot(col)
    first = calls[0]
    assert first == "corpus/page0.md"
    # the first file is committed in its new version, every other file exactly as before
    assert after["files"][first][0].size == len(V2["page0.md"])
    for file in set(before["files"]) | set(after["files"]):
        if file != first:
            assert after["files"].get(file) == before["files"].get(file), file
    for cid, chunk in before["chunks"].items():
        if chunk.source != first:
            assert after["chunks"][cid] == chunk
            assert after["vectors"][cid] == before["vectors"][cid]
    # vectors of the uncommitted files exist but are invisible: reads only trust the manifest
    assert col.vectors.ids() > col.manifest.chunk_ids()
    hits = col.dense_search(HashEmbeddings().embed_query("A brand new page."), k=20)
    assert hits and all(c.id in col.manifest.chunk_ids() for c, _ in hits)
    assert "corpus/page4.md" not in {c.source for c, _ in hits}

    report, col = run(settings, [corpus])
    assert report.orphans_removed > 0
    assert report.files_unchanged == 1 + existing  # page0, and page2 if it existed before
    clean_report, clean = run(settings, [corpus], name="clean")
    assert col.manifest.stats() == clean.manifest.stats()
    assert col.manifest.chunk_ids() == clean.manifest.chunk_ids()
    assert col.vectors.ids() == col.manifest.vector_owners()
    assert col.vectors.count() == len(col.manifest.vector_owners())  # no duplicates
    assert report.files_indexed + report.files_unchanged == clean_report.files_indexed


def test_a_nul_past_the_binary_sniff_becomes_a_space(tmp_path):
    """PostgreSQL's text type refuses NUL; a space keeps every offset a citation uses."""
    from ingest.extract import extract_file

    text = "# A\n\n" + "word " * 3000 + "\x00 after the nul\n"
    (tmp_path / "a.md").write_text(text)
    (doc,) = extract_file(tmp_path / "a.md", "a.md")
    assert doc.text == text.replace("\x00", " ")


def test_a_parser_that_runs_away_is_stopped_and_the_file_refused():
    """PDF text is extracted in a child process with a time budget: a parser stuck on a
    crafted file is killed and the file refused, the ingestion goes on."""
    import time

    from ingest.extract import ExtractError, _in_child

    with pytest.raises(ExtractError, match=r"PDF extraction took over 0\.5 s"):
        _in_child(time.sleep, 30, 0.5, "PDF")
