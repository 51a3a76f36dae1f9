from __future__ import annotations

import random
from itertools import pairwise

import pytest

from ingest.partition import SPLITTERS, PartitionOptions, _tokenizer, partition
from tools.documents import Chunk, ExtractedDocument, Section

MARKDOWN = """\
# Install

How to install the tool.

## From source

Clone the repository and build it:

```bash
# not a heading
make install
```

## From PyPI

Run pip install tool, then check the version.

# Usage

Run the tool on a folder of documents.
"""

RST = """\
==========
User Guide
==========

Welcome to the guide.

Setup
-----

Install it first.

Details
~~~~~~~

More words about setup.

Running
-------

Run it daily.
"""

PYTHON = '''\
"""Toy module."""

import functools

LIMIT = 3


# Cache results: the lookup is slow.
@functools.cache
@functools.wraps(
    len,
)
def lookup(key: str) -> int:
    return len(key)


class Store:
    """Keeps things."""

    def get(self, key: str) -> int:
        return lookup(key)


async def fetch(key: str) -> int:
    return lookup(key)
'''

PROSE = " ".join(
    f"Sentence number {i} talks about topic {i % 7}. It has 2 parts, really." for i in range(30)
)


def make(text: str, kind: str = "text", source: str = "doc.txt") -> ExtractedDocument:
    return ExtractedDocument(source, kind, [Section(text)])


def two_pages() -> ExtractedDocument:
    page = "\n".join(f"Page line {i}: {PROSE[i * 40 : i * 40 + 60]}" for i in range(30))
    return ExtractedDocument("paper.pdf", "pdf", [Section(page, page=1), Section(page, page=2)])


def options(splitter: str) -> PartitionOptions:
    """Small sizes so every document yields several chunks."""
    return {
        "tokens": PartitionOptions("tokens", chunk_size=40, overlap=8),
        "lines": PartitionOptions("lines", chunk_size=6, overlap=2),
    }.get(splitter, PartitionOptions(splitter, chunk_size=120, overlap=30))


def section_of(doc: ExtractedDocument, offset: int) -> tuple[int, Section]:
    start = 0
    for section in doc.sections:
        if start <= offset <= start + len(section.text):
            return start, section
        start += len(section.text) + 1
    raise AssertionError(f"offset {offset} outside every section")


def check(doc: ExtractedDocument, chunks: list[Chunk]) -> None:
    """The invariants every splitter promises."""
    assert chunks
    text = doc.text
    for i, chunk in enumerate(chunks):
        assert (chunk.chunk_index, chunk.chunk_count) == (i, len(chunks))
        assert (chunk.doc_id, chunk.source) == (doc.doc_id, doc.source)
        assert (chunk.file_hash, chunk.kind) == (doc.content_hash, "chunk")
        assert chunk.text == text[chunk.start_char : chunk.end_char]
        assert chunk.text.strip() and chunk.text == chunk.text.rstrip()
        start, section = section_of(doc, chunk.start_char)
        assert chunk.end_char <= start + len(section.text), "chunk crosses a section"
        assert chunk.page == section.page
        assert chunk.start_line == section.start_line + text.count("\n", start, chunk.start_char)
        assert chunk.end_line == chunk.start_line + chunk.text.count("\n")
    assert [c.start_char for c in chunks] == sorted(c.start_char for c in chunks)


DOCS = {
    "markdown": lambda: make(MARKDOWN, "markdown", "guide.md"),
    "rst": lambda: make(RST, "rst", "guide.rst"),
    "python": lambda: make(PYTHON, "python", "toy.py"),
    "pdf": two_pages,
    "prose": lambda: make(PROSE),
}


@pytest.mark.parametrize("splitter", SPLITTERS)
@pytest.mark.parametrize("name", DOCS)
def test_invariants_for_every_splitter(splitter, name):
    doc = DOCS[name]()
    check(doc, partition(doc, options(splitter)))


def test_markdown_heading_paths_ignore_fenced_code():
    doc = make(MARKDOWN, "markdown", "guide.md")
    chunks = partition(doc, PartitionOptions("structure", chunk_size=100, overlap=10))
    headings = {c.heading for c in chunks}
    assert headings == {"Install", "Install > From source", "Install > From PyPI", "Usage"}
    fenced = next(c for c in chunks if "# not a heading" in c.text)
    assert fenced.heading == "Install > From source"
    assert fenced.text.startswith("## From source")  # the unit is whole: it fits in 100 chars
    assert fenced.text.endswith("```")


def test_structure_merges_a_section_with_its_subsections_only():
    doc = make(MARKDOWN, "markdown", "guide.md")
    chunks = partition(doc, PartitionOptions("structure", chunk_size=220, overlap=10))
    assert [c.heading for c in chunks] == ["Install", "Usage"]
    assert "## From PyPI" in chunks[0].text and "# Usage" not in chunks[0].text


def test_structure_splits_big_units_with_overlap_and_keeps_heading():
    body = "\n\n".join(f"Paragraph {i}. " + "word " * 12 for i in range(12))
    doc = make(f"# Big\n\n{body}\n\n# Small\n\nTiny.\n", "markdown", "big.md")
    chunks = partition(doc, PartitionOptions("structure", chunk_size=200, overlap=80))
    check(doc, chunks)
    big = [c for c in chunks if c.heading == "Big"]
    assert len(big) > 3 and all(len(c.text) <= 200 for c in big)
    assert all(a.end_char > b.start_char for a, b in pairwise(big))
    assert all(c.text.startswith(("# Big", "Paragraph")) for c in big)  # paragraph boundaries
    assert chunks[-1].heading == "Small"


def test_rst_levels_follow_first_appearance():
    doc = make(RST, "rst", "guide.rst")
    chunks = partition(doc, PartitionOptions("structure", chunk_size=60, overlap=0))
    assert [(c.heading, c.start_line) for c in chunks] == [
        ("User Guide", 1),
        ("User Guide > Setup", 7),
        ("User Guide > Setup > Details", 12),
        ("User Guide > Running", 17),
    ]


def test_python_units_keep_decorators_and_comments():
    doc = make(PYTHON, "python", "toy.py")
    chunks = partition(doc, PartitionOptions("structure", chunk_size=140, overlap=0))
    by_heading = {c.heading: c for c in chunks}
    assert set(by_heading) == {"", "lookup", "Store", "fetch"}
    assert by_heading[""].text.startswith('"""Toy module."""')
    assert "LIMIT = 3" in by_heading[""].text
    lookup = by_heading["lookup"]
    assert lookup.text.startswith("# Cache results")
    assert lookup.text.endswith("return len(key)") and lookup.start_line == 8
    assert by_heading["Store"].text.startswith("class Store:")
    assert by_heading["fetch"].text.startswith("async def fetch")


def test_plain_text_structure_is_paragraph_aware():
    paragraphs = [f"Paragraph {i} has a few words in it." for i in range(10)]
    doc = make("\n\n".join(paragraphs))
    chunks = partition(doc, PartitionOptions(chunk_size=100, overlap=0))
    assert all(c.heading == "" for c in chunks)
    assert all(c.text.startswith("Paragraph") and c.text.endswith("it.") for c in chunks)
    assert len(chunks) == 5


def test_lines_windows_match_the_seed_formula():
    doc = make("\n".join(f"row {i}" for i in range(1, 251)), "csv", "rows.csv")
    chunks = partition(doc, PartitionOptions("lines", chunk_size=100, overlap=5))
    assert [(c.start_line, c.end_line) for c in chunks] == [(1, 100), (96, 195), (191, 250)]
    assert chunks[1].text.startswith("row 96\n") and chunks[0].text.endswith("row 100")


def test_lines_drop_blank_windows_and_keep_source_line_numbers():
    text = "a\nb\n" + "\n" * 10 + "c\nd"
    doc = ExtractedDocument("f.txt", "text", [Section(text, start_line=41)])
    chunks = partition(doc, PartitionOptions("lines", chunk_size=4, overlap=0))
    assert [(c.text, c.start_line, c.end_line) for c in chunks] == [
        ("a\nb", 41, 42),
        ("c\nd", 53, 54),
    ]


def test_pdf_pages_and_lines_within_page():
    doc = two_pages()
    chunks = partition(doc, PartitionOptions("lines", chunk_size=10, overlap=2))
    check(doc, chunks)
    assert [(c.page, c.start_line) for c in chunks] == [
        (p, line) for p in (1, 2) for line in (1, 9, 17, 25)
    ]
    assert all(c.heading == "" for c in chunks)


def test_chars_overlap_and_whole_words():
    doc = make(PROSE)
    chunks = partition(doc, PartitionOptions("chars", chunk_size=100, overlap=30))
    check(doc, chunks)
    assert all(len(c.text) <= 100 for c in chunks)
    for a, b in pairwise(chunks):
        assert 20 <= a.end_char - b.start_char <= 30  # overlap, minus at most one word
        assert PROSE[a.end_char].isspace() and PROSE[b.start_char - 1].isspace()


def test_tokens_windows_count_model_tokens():
    doc = make(PROSE)
    chunks = partition(doc, PartitionOptions("tokens", chunk_size=32, overlap=8))
    check(doc, chunks)
    tokenizer = _tokenizer()
    counts = [len(tokenizer.encode(c.text, add_special_tokens=False).ids) for c in chunks]
    assert all(n <= 32 for n in counts) and max(counts) == 32
    for a, b in pairwise(chunks):
        assert a.end_char > b.start_char


def test_sentences_pack_whole_sentences_and_carry_overlap():
    doc = make(PROSE)
    chunks = partition(doc, PartitionOptions("sentences", chunk_size=150, overlap=40))
    check(doc, chunks)
    assert all(len(c.text) <= 150 and c.text.endswith(".") for c in chunks)
    assert all(c.text[0].isupper() for c in chunks)
    for a, b in pairwise(chunks):
        assert a.text.endswith(doc.text[b.start_char : a.end_char])  # the carried sentence
        assert 0 < a.end_char - b.start_char <= 40


def test_per_kind_override_and_auto_choice():
    assert [PartitionOptions().splitter_for(k) for k in ("markdown", "pdf", "code", "text")] == [
        "structure",
        "lines",
        "lines",
        "structure",
    ]
    opts = PartitionOptions("lines", chunk_size=8, overlap=1, per_kind={"rst": "structure"})
    assert opts.splitter_for("markdown") == "lines" and opts.splitter_for("rst") == "structure"
    doc = make(MARKDOWN, "markdown", "guide.md")
    chunks = partition(doc, opts)
    check(doc, chunks)
    assert [c.start_line for c in chunks] == [1, 9, 16]  # windows at 1, 8, 15; line 8 is blank
    assert all(c.heading == "" for c in chunks)


def test_sizes_apply_to_their_unit_only():
    opts = PartitionOptions(chunk_size=500, overlap=50)  # auto: characters
    assert opts.sizes_for("structure") == (500, 50)
    assert opts.sizes_for("lines") == (100, 5)  # auto's PDF windows keep the seeds' 100/5
    assert opts.sizes_for("tokens") == (200, 30)
    assert PartitionOptions("lines", 40, 4).sizes_for("lines") == (40, 4)
    doc = two_pages()
    assert [c.start_line for c in partition(doc, opts)] == [1, 1]  # one window per page


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"chunk_size": 100, "overlap": 100}, "overlap"),
        ({"chunk_size": 100, "overlap": 150}, "overlap"),
        ({"overlap": -1}, "overlap"),
        ({"chunk_size": 0, "overlap": 0}, "chunk_size"),
        ({"splitter": "words"}, "unknown splitter"),
        ({"per_kind": {"pdf": "pages"}}, "unknown splitter"),
    ],
)
def test_bad_options_raise(kwargs, message):
    with pytest.raises(ValueError, match=message):
        PartitionOptions(**kwargs)


def test_empty_documents_give_no_chunks():
    assert partition(ExtractedDocument("e.txt", "text", [])) == []
    assert partition(make(" \n\n \t\n", "markdown")) == []
    for splitter in SPLITTERS:
        assert partition(make("\n\n"), options(splitter)) == []


def test_deterministic_ids():
    for name, build in DOCS.items():
        first = [c.id for c in partition(build(), options("auto"))]
        assert first == [c.id for c in partition(build(), options("auto"))], name
        assert len(set(first)) == len(first)


def test_random_texts_keep_invariants_and_size_limits():
    rng = random.Random(7)
    pieces = [
        "word",
        "Big",
        " ",
        "\n",
        "\n\n",
        ". ",
        "! Next",
        "# H\n",
        "```\n",
        "===\n",
        "é",
        "1.",
    ]
    for _ in range(150):
        sections = [
            Section("".join(rng.choices(pieces, k=rng.randint(0, 60))), page=p, start_line=3)
            for p in range(1, rng.randint(1, 3) + 1)
        ]
        doc = ExtractedDocument("r", rng.choice(["markdown", "rst", "python", "text"]), sections)
        size = rng.randint(1, 50)
        for splitter in SPLITTERS:
            chunks = partition(doc, PartitionOptions(splitter, size, rng.randint(0, size - 1)))
            if chunks:
                check(doc, chunks)
            if splitter in ("structure", "chars", "sentences"):
                assert all(len(c.text) <= size for c in chunks)
