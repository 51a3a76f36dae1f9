"""Extract stage: real small files of every supported kind, and the bad inputs users really have."""

from __future__ import annotations

import json
from pathlib import Path

import docx
import pytest

from ingest.extract import (
    ExtractError,
    ExtractOptions,
    check_nesting,
    discover,
    extract_file,
    source_root,
)
from tests.files import make_pdf


def write(tmp_path: Path, name: str, content: str | bytes) -> Path:
    path = tmp_path / name
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(content, str):
        path.write_bytes(content.encode("utf-8"))
    else:
        path.write_bytes(content)
    return path


def extract_one(path: Path, **options):
    docs = extract_file(path, path.name, ExtractOptions(**options))
    assert len(docs) == 1
    return docs[0]


# ---- text formats ---------------------------------------------------------------------------


def test_markdown_title_skips_fenced_code_and_normalises_line_endings(tmp_path):
    path = write(
        tmp_path, "guide.md", "```sh\r\n# not a title\r\n```\r\n# Install Guide\r\n\r\nRun.\r\n"
    )
    doc = extract_one(path)
    assert (doc.kind, doc.title, doc.source) == ("markdown", "Install Guide", "guide.md")
    assert doc.sections[0].text == "```sh\n# not a title\n```\n# Install Guide\n\nRun.\n"
    assert doc.sections[0].start_line == 1 and doc.sections[0].page is None


def test_rst_title_from_underlined_line(tmp_path):
    doc = extract_one(write(tmp_path, "api.rst", "=====\nAPI\n=====\n\nIntro\n-----\n"))
    assert (doc.kind, doc.title) == ("rst", "API")


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        ("notes.txt", "text"),
        ("README", "text"),
        ("x.log", "text"),
        ("m.py", "python"),
        ("cfg.yaml", "code"),
        ("main.go", "code"),
        ("q.sql", "code"),
    ],
)
def test_plain_kinds_keep_full_text_and_use_stem_as_title(tmp_path, name, kind):
    doc = extract_one(write(tmp_path, name, "# comment\nline two\r"))
    assert (doc.kind, doc.title, doc.text) == (kind, Path(name).stem, "# comment\nline two\n")


def test_utf8_bom_is_dropped(tmp_path):
    assert extract_one(write(tmp_path, "b.txt", b"\xef\xbb\xbfhello")).text == "hello"


def test_html_becomes_readable_text_with_markdown_headings(tmp_path):
    html = """<!DOCTYPE html><html><head><title>Fish &amp; Chips</title>
    <style>body { color: red }</style><script>var secret = "<p>hidden</p>";</script></head>
    <body><h1>Menu</h1><p>Cod &amp; haddock,
         served   hot.</p><script>alert("no")</script>
    <ul><li>Peas</li><li>Vinegar</li></ul><h2>Prices</h2>
    <table><tr><th>Item</th> <th>Cost</th></tr><tr><td>Cod</td> <td>&pound;9</td></tr></table>
    <div>line<br>break</div></body></html>"""
    doc = extract_one(write(tmp_path, "menu.html", html))
    assert (doc.kind, doc.title) == ("html", "Fish & Chips")
    assert doc.text == (
        "# Menu\n\nCod & haddock, served hot.\n\n- Peas\n- Vinegar\n\n## Prices\n\n"
        "Item | Cost\nCod | £9\n\nline\nbreak"
    )
    for gone in ("color", "secret", "hidden", "alert", "&amp;"):
        assert gone not in doc.text


def test_html_title_falls_back_to_first_h1(tmp_path):
    doc = extract_one(write(tmp_path, "p.htm", "<h1>First</h1><h1>Second</h1><p>x</p>"))
    assert doc.title == "First"


# ---- PDF and DOCX ---------------------------------------------------------------------------


def test_pdf_one_section_per_page_skipping_blank_pages(tmp_path):
    path = make_pdf(tmp_path / "r.pdf", ["Alpha page one", "", "Gamma page three"], "Report")
    doc = extract_one(path)
    assert (doc.kind, doc.title) == ("pdf", "Report")
    assert [(s.page, s.text, s.start_line) for s in doc.sections] == [
        (1, "Alpha page one", 1),
        (3, "Gamma page three", 1),
    ]


def test_pdf_two_pages_title_falls_back_to_stem(tmp_path):
    doc = extract_one(make_pdf(tmp_path / "two.pdf", ["First text", "Second text"]))
    assert doc.title == "two"
    assert [(s.page, s.text) for s in doc.sections] == [(1, "First text"), (2, "Second text")]


def test_pdf_without_text_is_reported_as_scanned(tmp_path):
    with pytest.raises(ExtractError, match=r"no extractable text \(scanned PDF\?\)"):
        extract_one(make_pdf(tmp_path / "scan.pdf", ["", ""]))


def test_docx_headings_paragraphs_and_tables(tmp_path):
    document = docx.Document()
    document.add_heading("Quarterly Plan", level=1)
    document.add_paragraph("We ship in May.")
    document.add_heading("Owners", level=2)
    table = document.add_table(rows=2, cols=3)
    for row, values in zip(
        table.rows, [("Task", "Who", "When"), ("Docs", "Ana", "May")], strict=True
    ):
        for cell, value in zip(row.cells, values, strict=True):
            cell.text = value
    document.add_paragraph("End.")
    document.save(tmp_path / "plan.docx")
    doc = extract_one(tmp_path / "plan.docx")
    assert (doc.kind, doc.title) == ("docx", "Quarterly Plan")
    assert doc.text == (
        "# Quarterly Plan\nWe ship in May.\n## Owners\nTask | Who | When\nDocs | Ana | May\nEnd."
    )
    assert len(doc.sections) == 1


# ---- CSV and JSON ---------------------------------------------------------------------------


def test_csv_rows_become_lines_and_metadata(tmp_path):
    path = write(tmp_path, "people.csv", 'name,age,city\nBob,30,\n"Smith, Al",41,Rome\n\n')
    doc = extract_one(path)
    assert (doc.kind, doc.title) == ("csv", "people")
    assert doc.sections[0].text == "name: Bob; age: 30\nname: Smith, Al; age: 41; city: Rome"
    assert doc.sections[0].start_line == 2
    assert doc.metadata["columns"] == ["name", "age", "city"]
    assert doc.metadata["rows"][1] == {"name": "Smith, Al", "age": "41", "city": "Rome"}


def test_csv_sniffs_semicolons_and_tsv_uses_tabs(tmp_path):
    semi = extract_one(write(tmp_path, "s.csv", "a;b\n1;2\n3;4\n"))
    assert semi.text == "a: 1; b: 2\na: 3; b: 4"
    tsv = extract_one(write(tmp_path, "t.tsv", "k\tv\nx, y\tz\n"))
    assert tsv.metadata["rows"] == [{"k": "x, y", "v": "z"}]


def test_json_list_one_document_per_record(tmp_path):
    records = [
        {"id": "faq-1", "title": "Reset", "text": "Hold the button.", "lang": "en", "tags": ["a"]},
        {"text": "No id here.", "score": 0.5, "ok": True, "none": None},
    ]
    docs = extract_file(write(tmp_path, "faq.json", json.dumps(records)), "data/faq.json")
    assert [d.source for d in docs] == ["data/faq.json#faq-1", "data/faq.json#2"]
    assert [d.title for d in docs] == ["Reset", ""]
    # other plain fields follow the text; lists, objects and nulls do not
    assert docs[0].text == "Hold the button.\n\nlang: en"
    assert docs[1].text == "No id here.\n\nscore: 0.5\nok: True"
    assert {d.kind for d in docs} == {"json"}


def test_json_object_is_one_record_and_fields_are_configurable(tmp_path):
    path = write(tmp_path, "one.json", json.dumps({"key": 7, "body": "Hello", "name": "N"}))
    options = ExtractOptions(json_text_field="body", json_id_field="key", json_title_field="name")
    (doc,) = extract_file(path, "one.json", options)
    assert (doc.source, doc.title, doc.text) == ("one.json#7", "N", "Hello")


def test_jsonl_records_carry_their_line_numbers(tmp_path):
    lines = ['{"id": 10, "text": "first"}', "", '{"text": "second"}']
    docs = extract_file(write(tmp_path, "r.jsonl", "\n".join(lines) + "\n"), "r.jsonl")
    assert [(d.source, d.sections[0].start_line, d.text) for d in docs] == [
        ("r.jsonl#10", 1, "first"),
        ("r.jsonl#2", 3, "second"),
    ]


# ---- bad inputs -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "content", "reason"),
    [
        ("blob.txt", b"abc\x00\x01\x02def", r"binary file \(NUL bytes in first 8 KiB\)"),
        ("blob.bin", bytes(range(256)) * 4, "binary file"),
        ("latin1.txt", "line one\ncaf\xe9\n".encode("latin-1"), "invalid UTF-8 at byte offset 12"),
        ("empty.md", b"", "empty document"),
        ("blank.txt", b"  \n\t\r\n  ", "empty document"),
        ("bom-only.md", b"\xef\xbb\xbf\n", "empty document"),
        ("only-script.html", b"<script>x()</script>", "empty document"),
        ("image.png", b"\x89PNG\r\n\x1a\n", r"unsupported file type \.png"),
        ("a.zip", b"PK\x03\x04", r"unsupported file type \.zip"),
        ("tool.EXE", b"MZ", r"unsupported file type \.exe"),
        ("junk.pdf", bytes(range(256)) * 8, "unreadable PDF"),
        ("junk.docx", b"not a zip file at all", "unreadable DOCX"),
        ("bad.json", b'[{"text": "a"},', "invalid JSON at line 1"),
        ("bad.jsonl", b'{"text": "ok"}\n{"text": oops}\n', "invalid JSON on line 2"),
        ("scalar.json", b"42", "record 1 is not a JSON object"),
        ("none.json", b"[]", "no records"),
        ("header.csv", b"a,b\n", "no data rows"),
    ],
)
def test_bad_inputs_raise_clear_reasons(tmp_path, name, content, reason):
    with pytest.raises(ExtractError, match=reason):
        extract_file(write(tmp_path, name, content), name)


def test_invalid_utf8_reports_offset_and_line(tmp_path):
    path = write(tmp_path, "x.md", b"ok\nok\n\xff\xfe")
    with pytest.raises(ExtractError) as info:
        extract_file(path, "x.md")
    assert str(info.value) == "invalid UTF-8 at byte offset 6 (line 3)"


def test_oversized_file_is_refused_before_reading(tmp_path, monkeypatch):
    path = tmp_path / "huge.txt"
    with path.open("wb") as f:
        f.truncate(52_400_000)  # sparse: instant, no disk used

    def no_reading(self):
        raise AssertionError("read an oversized file")

    monkeypatch.setattr(Path, "read_bytes", no_reading)
    with pytest.raises(ExtractError) as info:
        extract_file(path, "huge.txt")
    assert str(info.value) == "file is 52.4 MB, over the 20.0 MB limit (max_file_bytes)"
    with pytest.raises(ExtractError, match=r"over the 0\.0 MB limit"):
        extract_file(write(tmp_path, "small.txt", "12345"), "small.txt", ExtractOptions(4))


def test_truncated_pdf_is_unreadable(tmp_path):
    whole = make_pdf(tmp_path / "whole.pdf", ["Alpha", "Beta"]).read_bytes()
    path = write(tmp_path, "cut.pdf", whole[: len(whole) // 2])
    with pytest.raises(ExtractError, match="unreadable PDF"):
        extract_file(path, "cut.pdf")


def test_json_record_without_text_names_field_and_record(tmp_path):
    path = write(tmp_path, "m.json", json.dumps([{"text": "fine"}, {"id": "b", "body": "x"}]))
    with pytest.raises(ExtractError, match=r"record 2: text field 'text' is missing"):
        extract_file(path, "m.json")
    path = write(tmp_path, "m.jsonl", '{"text": "fine"}\n\n{"text": 3}\n')
    with pytest.raises(ExtractError, match=r"record 2 \(line 3\): text field 'text'"):
        extract_file(path, "m.jsonl")


def test_duplicate_json_ids_are_refused(tmp_path):
    path = write(tmp_path, "d.jsonl", '{"id": 1, "text": "a"}\n{"id": 1, "text": "b"}\n')
    with pytest.raises(ExtractError, match="duplicate id '1'"):
        extract_file(path, "d.jsonl")


# ---- discover -------------------------------------------------------------------------------


@pytest.fixture
def corpus(tmp_path) -> Path:
    root = tmp_path / "corpus"
    for name in [
        "a.md",
        "b.bin",
        "sub/c.txt",
        "sub/deep/d.md",
        ".hidden.md",
        ".git/config",
        ".cache/e.md",
        "node_modules/x.js",
        "__pycache__/m.pyc",
    ]:
        write(root, name, "x")
    return root


def test_discover_recurses_skips_hidden_and_prefixes_dir_name(corpus):
    found = discover([corpus])
    assert [name for _, name in found] == [
        "corpus/a.md",
        "corpus/b.bin",
        "corpus/sub/c.txt",
        "corpus/sub/deep/d.md",
    ]
    assert all(path.is_absolute() and path.is_file() for path, _ in found)
    assert found[2][0] == (corpus / "sub" / "c.txt").resolve()


def test_discover_include_and_exclude_globs(corpus):
    names = lambda found: [name for _, name in found]  # noqa: E731
    assert names(discover([corpus], exclude=["*.bin", "sub/*"])) == ["corpus/a.md"]
    assert names(discover([corpus], include=["*.md"])) == ["corpus/a.md", "corpus/sub/deep/d.md"]
    assert names(discover([corpus], include=["sub/*"], exclude=["d.md"])) == ["corpus/sub/c.txt"]


def test_discover_file_arguments_keep_the_given_relative_name(corpus, monkeypatch):
    monkeypatch.chdir(corpus.parent)
    found = discover(["./corpus//sub/c.txt", "corpus/a.md", corpus / "a.md"])
    assert found == [
        ((corpus / "a.md").resolve(), "corpus/a.md"),
        ((corpus / "sub" / "c.txt").resolve(), "corpus/sub/c.txt"),
    ]
    monkeypatch.chdir(corpus)
    assert discover(["."])[0][1] == "corpus/a.md"


def test_discover_absolute_file_argument_never_gives_an_absolute_name(corpus, monkeypatch):
    monkeypatch.chdir(corpus)
    assert discover([corpus / "sub" / "c.txt"])[0][1] == "sub/c.txt"
    monkeypatch.chdir(corpus / "sub")
    assert discover([corpus / "a.md"])[0][1] == "a.md"


def test_source_root_is_the_prefix_discover_uses(corpus, monkeypatch):
    monkeypatch.chdir(corpus.parent)
    assert source_root(corpus) == source_root("corpus/") == "corpus"
    assert source_root("./corpus/sub/../a.md") == "corpus/a.md"
    assert all(name.startswith(source_root(corpus) + "/") for _, name in discover([corpus]))


def test_discover_missing_path_names_it(tmp_path):
    missing = tmp_path / "nope"
    with pytest.raises(FileNotFoundError, match="nope"):
        discover([missing])


def test_symlinks_out_of_the_folder_and_loops_are_skipped_and_reported(tmp_path):
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "a.md").write_text("# A\n\ntext\n")
    secret = tmp_path / "secret.txt"
    secret.write_text("outside")
    (corpus / "leak.txt").symlink_to(secret)
    (corpus / "x.md").symlink_to(corpus / "y.md")
    (corpus / "y.md").symlink_to(corpus / "x.md")
    (corpus / "inner.md").symlink_to(corpus / "a.md")  # inside: followed, deduplicated
    skipped: list[dict[str, str]] = []
    found = discover([corpus], skipped=skipped)
    assert [name for _, name in found] == ["corpus/a.md"]
    reasons = {s["path"]: s["reason"] for s in skipped}
    assert set(reasons) == {"corpus/leak.txt", "corpus/x.md", "corpus/y.md"}
    assert "outside the ingested folder" in reasons["corpus/leak.txt"]
    assert "not followed" in reasons["corpus/x.md"]


def test_nesting_is_counted_outside_strings_only():
    check_nesting('{"text": "' + "[" * 500 + '\\" [[[", "n": [[1]]}')  # brackets in strings
    check_nesting("[" * 100 + "]" * 100)
    with pytest.raises(ExtractError, match="nested deeper than 100 levels"):
        check_nesting("[" * 101 + "]" * 101)
