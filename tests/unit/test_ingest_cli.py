"""`rag ingest`, `rag collections` and `rag inspect` driven in-process through ``main``.

Embeddings go to the OpenAI-compatible stub, which returns the same 3-d vector for every
text: enough to exercise the CLI plumbing, the report and the manifest, not retrieval.
"""

from __future__ import annotations

import json
from itertools import pairwise

import pytest
from fpdf import FPDF

from rag_cli.main import main
from tests.files import write_tree
from tests.openai_stub_server import OpenAIStub
from tools.config import load_settings
from tools.store.collection import Collection

PAGES = {
    "guide.md": "# Guide\n\nIntro to the guide.\n\n## Install\n\n"
    + "Run the bootstrap script to install everything. " * 12
    + "\n\n## Usage\n\n"
    + "Call rag ingest with a folder of documents. " * 12,
    "notes.txt": "".join(f"note line {n}\n" for n in range(1, 31)),
    "sub/extra.md": "# Extra\n\nAn extra page in a sub folder.\n",
}


UNREACHABLE = "openai:emb@http://127.0.0.1:9/v1"


@pytest.fixture(autouse=True)
def _cwd_and_no_model(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)  # source names are relative to the working directory
    # tests that must fail before embedding fail fast here instead of loading a real model
    monkeypatch.setenv("RAG_EMBEDDING_MODEL", UNREACHABLE)
    monkeypatch.setenv("RAG_LLM_MAX_RETRIES", "0")


@pytest.fixture
def stub(monkeypatch):
    with OpenAIStub() as server:
        monkeypatch.setenv("RAG_EMBEDDING_MODEL", f"openai:emb@{server.base_url}")
        yield server


@pytest.fixture
def corpus(tmp_path):
    return write_tree(tmp_path / "corpus", PAGES)


def rag(capsys, *argv: str) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def ingest_json(capsys, *argv: str) -> dict:
    code, out, err = rag(capsys, "ingest", *argv, "--json")
    assert code == 0, err
    return json.loads(out)  # the whole of stdout is one JSON object


def committed(collection: str = "docs") -> tuple[set[str], dict[str, int]]:
    col = Collection(load_settings(), collection)
    try:
        return col.manifest.chunk_ids(), col.manifest.stats()
    finally:
        col.close()


def test_ingest_json_report_then_rerun_adds_nothing(capsys, stub, corpus):
    first = ingest_json(capsys, corpus)
    for key in (
        "files_seen",
        "files_indexed",
        "files_unchanged",
        "skipped",
        "files_removed",
        "chunks_added",
        "chunks_deleted",
        "seconds",
        "chunks_per_s",
    ):
        assert key in first
    assert (first["files_seen"], first["files_indexed"], first["files_unchanged"]) == (3, 3, 0)
    assert first["skipped"] == [] and first["files_removed"] == 0
    ids, stats = committed()
    assert first["chunks_added"] == stats["chunks"] == len(ids) >= 3
    assert first["chunks_deleted"] == 0
    assert first["seconds"] > 0 and first["chunks_per_s"] > 0

    second = ingest_json(capsys, corpus)
    assert (second["files_unchanged"], second["files_indexed"]) == (3, 0)
    assert (second["chunks_added"], second["chunks_deleted"], second["chunks_embedded"]) == (
        0,
        0,
        0,
    )
    assert committed()[0] == ids


def test_exclude(capsys, stub, corpus):
    report = ingest_json(capsys, corpus, "--exclude", "sub/*", "--exclude", "*.txt")
    assert report["files_seen"] == report["files_indexed"] == 1
    col = Collection(load_settings(), "docs")
    assert col.manifest.files() == ["corpus/guide.md"]


def test_lines_splitter_with_size_and_overlap(capsys, stub, corpus):
    ingest_json(
        capsys, corpus / "notes.txt", "--splitter", "lines", "--chunk-size", "10", "--overlap", "2"
    )
    chunks = Collection(load_settings(), "docs").manifest.chunks_of_source("corpus/notes.txt")
    # 30 lines in windows of 10 stepping by 8: 1-10, 9-18, 17-26, 25-30
    assert [(c.start_line, c.end_line) for c in chunks] == [(1, 10), (9, 18), (17, 26), (25, 30)]


def test_changed_chunking_options_rechunk_an_unchanged_file(capsys, stub, corpus):
    ingest_json(capsys, corpus / "notes.txt")
    report = ingest_json(
        capsys, corpus / "notes.txt", "--splitter", "lines", "--chunk-size", "10", "--overlap", "2"
    )
    assert report["files_indexed"] == 1 and report["chunks_added"] == 4
    assert committed()[1]["chunks"] == 4


def test_splitter_for_a_kind(capsys, stub, corpus):
    ingest_json(capsys, corpus, "--splitter-for", "markdown=lines", "--chunk-size", "300")
    col = Collection(load_settings(), "docs")
    guide = col.manifest.chunks_of_source("corpus/guide.md")
    # markdown is cut into line windows (default 100 lines: the 300 is characters, the unit
    # of the run's own splitter), so one window without a heading path
    assert [(c.start_line, c.heading) for c in guide] == [(1, "")]
    notes = col.manifest.chunks_of_source("corpus/notes.txt")  # text: structure, 300 chars
    assert len(notes) > 1 and all(len(c.text) <= 300 for c in notes)


def test_splitter_for_pdf(capsys, stub, corpus):
    pdf = FPDF()
    pdf.set_font("Helvetica", size=12)
    for text in ("Quarterly report, page one.", "Results on page two."):
        pdf.add_page()
        pdf.cell(text=text)
    pdf.output(str(corpus / "report.pdf"))
    report = ingest_json(capsys, corpus, "--splitter-for", "pdf=chars", "--chunk-size", "12")
    assert report["files_indexed"] == 4
    chunks = Collection(load_settings(), "docs").manifest.chunks_of_source("corpus/report.pdf")
    assert {c.page for c in chunks} == {1, 2} and all(len(c.text) <= 12 for c in chunks)
    guide = Collection(load_settings(), "docs").manifest.chunks_of_source("corpus/guide.md")
    assert all(len(c.text) <= 12 for c in guide)  # 12 characters for every other kind too


@pytest.mark.parametrize("value", ["x", "pdf", "pdf=pages", "=lines", "md=lines"])
def test_bad_splitter_for_exits_1(capsys, corpus, value):
    code, out, err = rag(capsys, "ingest", corpus, "--splitter-for", value)
    assert code == 1 and out == ""
    assert f"--splitter-for expects KIND=SPLITTER, got {value!r}" in err
    assert "markdown" in err and "lines" in err  # says what is accepted


@pytest.mark.parametrize(
    "flags",
    [
        ["--overlap", "1000"],  # default structure size is 1000 characters
        ["--chunk-size", "10", "--overlap", "10"],
        ["--splitter", "lines", "--chunk-size", "5", "--overlap", "7"],
    ],
)
def test_overlap_not_below_chunk_size_is_a_clear_error(capsys, corpus, flags):
    code, _, err = rag(capsys, "ingest", corpus, *flags)
    assert code != 0
    assert "overlap" in err and "smaller than chunk_size" in err
    assert "Traceback" not in err


def test_chunk_size_alone_scales_the_default_overlap(capsys, stub, corpus):
    ingest_json(capsys, corpus / "guide.md", "--chunk-size", "200")
    chunks = Collection(load_settings(), "docs").manifest.chunks_of_source("corpus/guide.md")
    # 15% of 200 characters, as 150 is of the default 1000; not 199, one word per step
    overlaps = [a.end_char - b.start_char for a, b in pairwise(chunks)]
    assert max(overlaps) <= 30
    assert len(chunks) <= 2 * len(PAGES["guide.md"]) // 200


def test_zero_chunk_size_is_an_error_not_the_default(capsys, corpus):
    code, _, err = rag(capsys, "ingest", corpus, "--chunk-size", "0")
    assert code == 1 and "chunk_size must be at least 1" in err


def test_strict_with_a_binary_file_changes_nothing(capsys, stub, corpus):
    ingest_json(capsys, corpus)
    before = committed()
    (corpus / "guide.md").write_text("# Guide\n\nA rewritten guide.\n")
    (corpus / "zz.txt").write_bytes(b"\x00\x01\x02binary" * 20)
    code, out, err = rag(capsys, "ingest", corpus, "--strict", "--json")
    assert code == 1 and out == ""
    assert "corpus/zz.txt" in err and "binary file" in err
    assert committed() == before


def test_missing_path_exits_1_and_creates_nothing(capsys, corpus, tmp_path):
    missing = tmp_path / "no-such-folder"
    code, out, err = rag(capsys, "ingest", corpus, missing)
    assert code == 1 and out == ""
    assert str(missing) in err
    code, out, _ = rag(capsys, "collections", "--json")
    assert code == 0 and json.loads(out) == []


def test_invalid_collection_name_exits_2(capsys, corpus):
    code, _, err = rag(capsys, "ingest", corpus, "--collection", "../x")
    assert code == 2 and "invalid collection name" in err
    assert "Traceback" not in err


def test_human_summary_lists_every_skipped_file_with_its_reason(capsys, stub, corpus):
    (corpus / "blob.txt").write_bytes(b"\x00\x01binary\x00" * 10)
    (corpus / "empty.md").write_text("  \n\n")
    (corpus / "latin1.txt").write_bytes("caf\xe9 au lait\n".encode("latin-1"))
    (corpus / "broken.pdf").write_bytes(b"%PDF-1.4\nnot really a pdf")
    (corpus / "photo.png").write_bytes(b"\x89PNG\r\n")
    code, out, err = rag(capsys, "ingest", corpus)
    assert code == 0, err
    assert "8 files seen, 3 indexed, 0 unchanged, 5 skipped, 0 removed" in out
    for line in (
        "skipped corpus/blob.txt: binary file",
        "skipped corpus/empty.md: empty document",
        "skipped corpus/latin1.txt: invalid UTF-8 at byte offset 3 (line 1)",
        "skipped corpus/broken.pdf: unreadable PDF",
        "skipped corpus/photo.png: unsupported file type .png",
    ):
        assert line in out


def test_unreachable_embedding_server_is_an_error_not_a_traceback(capsys, corpus):
    code, out, err = rag(capsys, "ingest", corpus, "--json")  # RAG_EMBEDDING_MODEL=UNREACHABLE
    assert code == 1 and out == ""
    assert f"embedding model {UNREACHABLE!r} failed" in err and "Traceback" not in err
    code, out, _ = rag(capsys, "collections", "--json")  # the failed first run left nothing
    assert code == 0 and json.loads(out) == []


def test_a_first_ingestion_that_stores_nothing_leaves_no_collection(capsys, stub, corpus):
    ingest_json(capsys, corpus)  # "docs" exists: a later empty run must keep it
    only_binary = corpus.parent / "blobs"
    only_binary.mkdir()
    (only_binary / "blob.txt").write_bytes(b"\x00\x01binary\x00" * 10)
    code, _, err = rag(capsys, "ingest", only_binary, "--collection", "blobs", "--json")
    assert code == 0, err
    code, out, _ = rag(capsys, "collections", "--json")
    assert [c["name"] for c in json.loads(out)] == ["docs"]


def test_collections_human_and_json(capsys, corpus, stub):
    code, out, _ = rag(capsys, "collections")
    assert code == 0 and "no collections" in out
    ingest_json(capsys, corpus)
    ingest_json(capsys, corpus / "notes.txt", "--collection", "notes")
    code, out, _ = rag(capsys, "collections")
    assert code == 0
    lines = out.strip().splitlines()
    assert lines[0].startswith("docs: 3 files, 3 documents, ")
    assert lines[1].startswith("notes: 1 files, 1 documents, ")
    assert f"embedded with openai:emb@{stub.base_url}" in lines[0]
    code, out, _ = rag(capsys, "collections", "--json")
    rows = {row["name"]: row for row in json.loads(out)}
    assert set(rows) == {"docs", "notes"}
    assert rows["docs"]["chunks"] == rows["docs"]["vectors"] == committed()[1]["chunks"]
    assert rows["notes"]["embedding_dimension"] == 3


def test_inspect_shows_position_lines_and_heading(capsys, stub, corpus):
    ingest_json(capsys, corpus, "--chunk-size", "300", "--overlap", "0")
    code, out, _ = rag(capsys, "inspect", "corpus/guide.md")
    assert code == 0
    chunks = Collection(load_settings(), "docs").manifest.chunks_of_source("corpus/guide.md")
    n = len(chunks)
    assert n > 2
    assert out.splitlines()[0] == f"corpus/guide.md: {n} chunks"
    for c in chunks:
        assert (
            f"[chunk {c.chunk_index + 1}/{n}] lines {c.start_line}-{c.end_line} "
            f"chars {c.start_char}-{c.end_char}" in out
        )
    assert "heading 'Guide > Install'" in out and "heading 'Guide > Usage'" in out


def test_inspect_unknown_source_exits_1_with_suggestion(capsys, stub, corpus):
    ingest_json(capsys, corpus)
    code, out, err = rag(capsys, "inspect", "corpus/guide.mdx")
    assert code == 1 and out == ""
    assert "no chunks for 'corpus/guide.mdx'" in err and "corpus/guide.md" in err


def test_inspect_a_jsonl_file_points_at_its_records(capsys, stub, tmp_path):
    data = tmp_path / "recs.jsonl"
    data.write_text('{"id": "a", "text": "first record"}\n{"id": "b", "text": "second"}\n')
    ingest_json(capsys, data)
    code, _, err = rag(capsys, "inspect", "recs.jsonl")
    assert code == 1 and "recs.jsonl#a" in err
    code, out, _ = rag(capsys, "inspect", "recs.jsonl#b")
    assert code == 0 and "second" in out


def test_inspect_unknown_collection_exits_2(capsys, stub, corpus):
    ingest_json(capsys, corpus)
    code, _, err = rag(capsys, "inspect", "corpus/guide.md", "--collection", "nope")
    assert code == 2
    assert "unknown collection 'nope'" in err and "known: docs" in err


def test_json_lines_saved_as_json_with_a_text_field(capsys, stub, tmp_path):
    data = tmp_path / "abstracts.json"  # JSON Lines despite the name, like the CACM dump
    data.write_text(
        '{"id": "CACM-1", "contents": "Algorithms for sorting"}\n'
        '{"id": "CACM-2", "contents": "Compilers and parsing"}\n'
    )
    report = ingest_json(capsys, data, "--json-text-field", "contents")
    assert report["skipped"] == [] and report["chunks_added"] == 2
    code, out, _ = rag(capsys, "inspect", "abstracts.json#CACM-2")
    assert code == 0 and "lines 2-2" in out and "Compilers and parsing" in out
    bad = tmp_path / "bad.json"
    bad.write_text('{"id": 1, "contents": "x"} {"id": 2}\n')  # not one object per line
    report = ingest_json(capsys, bad, "--json-text-field", "contents")
    assert report["skipped"] == [
        {"path": "bad.json", "reason": "invalid JSON at line 1: Extra data"}
    ]
    pretty = tmp_path / "pretty.json"  # two indented objects: neither JSON nor JSON Lines
    pretty.write_text('{\n  "contents": "x"\n}\n{\n  "contents": "y"\n}\n')
    report = ingest_json(capsys, pretty, "--json-text-field", "contents")
    assert report["skipped"] == [
        {"path": "pretty.json", "reason": "invalid JSON at line 4: Extra data"}
    ]


def test_one_progress_bar_for_the_whole_embedding(capsys, stub, corpus):
    code, _, err = rag(capsys, "ingest", corpus, "--commit-chunks", "1")  # a group per file
    assert code == 0, err
    bars = {line.split(":")[0].strip() for line in err.replace("\r", "\n").splitlines()}
    assert {b for b in bars if b.startswith("embed")} == {"embed and commit 3 files"}, bars
    assert "committed=3/3 files" in err


def test_every_run_that_changes_files_is_a_version_with_history_and_diff(capsys, stub, corpus):
    first = ingest_json(capsys, corpus)
    assert first["version"] == 1
    assert ingest_json(capsys, corpus)["version"] is None  # nothing changed: no version
    pages = sorted(corpus.iterdir())
    pages[0].write_text(pages[0].read_text() + "\n\nA new paragraph about embeddings.\n")
    pages[1].unlink()
    (corpus / "new.md").write_text("# New\n\nA page added later.\n")
    second = ingest_json(capsys, corpus, "--prune")
    assert second["version"] == 2  # the run that changed nothing did not open a version

    code, out, _ = rag(capsys, "collections", "history", "docs", "--json")
    history = json.loads(out)
    assert code == 0 and [v["version"] for v in history] == [1, second["version"]]
    assert (history[0]["added"], history[0]["changed"], history[0]["removed"]) == (
        len(PAGES),
        0,
        0,
    )
    assert (history[1]["added"], history[1]["changed"], history[1]["removed"]) == (1, 1, 1)
    assert all(v["finished_at"] for v in history)

    code, out, _ = rag(capsys, "collections", "diff", "docs", "1", str(second["version"]), "--json")
    diff = json.loads(out)
    assert list(diff["added"]) == ["corpus/new.md"] and list(diff["removed"]) == [
        f"corpus/{pages[1].name}"
    ]
    assert list(diff["changed"]) == [f"corpus/{pages[0].name}"]
    assert diff["files"] == [len(PAGES), len(PAGES)]
    code, _, err = rag(capsys, "collections", "diff", "docs", "1", "99")
    assert code == 2 and "no version 99" in err
    code, out, _ = rag(capsys, "collections", "history", "docs")
    assert out.startswith("v1  ") and "1 added, 1 changed, 1 removed" in out
