"""Property-based tests: splitters, loaders, the answer parser and the sanitiser take any
text, random or hostile, without an unhandled exception."""

from __future__ import annotations

import re
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from ingest.extract import ExtractError, ExtractOptions, extract_file
from ingest.partition import SPLITTERS, PartitionOptions, partition
from tools.documents import ExtractedDocument, Section
from tools.errors import ModelOutputError
from tools.sanitize import neutralise
from tools.structured import parse_json_reply
from tools.text import cited_numbers, missing_facts, statements, strip_markers

FAST = settings(
    max_examples=100, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow]
)

# fragments that exercise the parsers' special cases, mixed with arbitrary unicode
FRAGMENTS = st.sampled_from(
    [
        "\n",
        "\n\n",
        "# ",
        "## Heading\n",
        "Title\n=====\n",
        "```\n",
        "def f():\n    ",
        "class A:\n",
        "[1]",
        "[999]",
        "[12][3]",
        ". ",
        "? ",
        "3.14",
        "1,000",
        "`code`",
        "Name-Like_Thing",
        "<|im_start|>system\n",
        "<|im_end|>",
        "[INST]",
        "<<SYS>>",
        "</passage>",
        "### System: ",
        "\r\n",
        "\t",
        "\x00",
        "\ufeff",
        "\u202e",
        "\U0001f600",
        "{",
        '"text": ',
        ",",
        "ü",
    ]
)
TEXT = st.lists(st.one_of(FRAGMENTS, st.text(max_size=40)), max_size=40).map("".join)
KINDS = st.sampled_from(["markdown", "rst", "text", "html", "python", "code", "pdf", "csv", "json"])


@st.composite
def options(draw) -> PartitionOptions:
    splitter = draw(st.sampled_from(SPLITTERS))
    size = draw(st.one_of(st.none(), st.integers(1, 400)))
    overlap = draw(st.one_of(st.none(), st.integers(0, 399)))
    try:
        return PartitionOptions(splitter, size, overlap)
    except ValueError:  # an invalid combination is the CLI's clear error, tested elsewhere
        return PartitionOptions(splitter)


@FAST
@given(
    sections=st.lists(TEXT, min_size=1, max_size=4),
    kind=KINDS,
    opts=options(),
    first_line=st.integers(1, 10_000),
)
def test_every_splitter_takes_any_text(sections, kind, opts, first_line):
    doc = ExtractedDocument(
        "f.txt",
        kind,
        [Section(t, page=i + 1, start_line=first_line) for i, t in enumerate(sections)],
    )
    chunks = partition(doc, opts)
    text = doc.text
    for index, chunk in enumerate(chunks):
        assert chunk.chunk_index == index and chunk.chunk_count == len(chunks)
        assert chunk.text == text[chunk.start_char : chunk.end_char] and chunk.text.strip()
        assert chunk.start_line <= chunk.end_line


SUFFIXES = st.sampled_from(
    [
        ".md",
        ".txt",
        ".rst",
        ".html",
        ".py",
        ".js",
        ".json",
        ".jsonl",
        ".csv",
        ".tsv",
        ".pdf",
        ".docx",
        ".x",
        "",
    ]
)


@FAST
@given(
    data=st.one_of(TEXT.map(lambda t: t.encode("utf-8", "surrogatepass")), st.binary()),
    suffix=SUFFIXES,
)
def test_every_loader_takes_any_bytes(data, suffix):
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"file{suffix}"
        path.write_bytes(data)
        try:
            docs = extract_file(path, path.name, ExtractOptions())
        except ExtractError as exc:
            assert str(exc)  # a reason the ingest report can show
            return
    for doc in docs:
        assert isinstance(doc.text, str) and doc.sections


@FAST
@given(answer=TEXT, passages=st.integers(0, 12), context=TEXT)
@example(answer="Yes [[9]2].", passages=1, context="")  # stripping [9] used to leave [2]
def test_answer_parser_takes_any_text(answer, passages, context):
    keep = set(range(1, passages + 1))
    stripped = strip_markers(answer, keep)
    assert set(cited_numbers(stripped)) <= keep  # finalize indexes passages with these
    assert strip_markers(stripped, keep) == stripped
    for statement in statements(answer):
        assert statement.strip()
        missing = missing_facts(statement, context)
        assert all(isinstance(m, str) for m in missing)
        body = re.sub(r"\[\d{1,3}\]", "", statement)  # what missing_facts reads of it
        assert missing_facts(statement, body + " " + context) == []


@FAST
@given(reply=st.one_of(TEXT, st.from_regex(r'\{"supported": \[(true|false|, )*\]?\}?')))
def test_json_reply_parser_raises_only_its_own_error(reply):
    from pydantic import BaseModel

    class Verdict(BaseModel):
        supported: list[bool]

    try:
        parsed = parse_json_reply(reply, Verdict)
    except ModelOutputError:
        return
    assert isinstance(parsed.supported, list)


@FAST
@given(text=TEXT)
def test_neutralised_text_is_inert_and_stable(text):
    clean = neutralise(text)
    assert neutralise(clean) == clean
    assert not re.search(
        r"<\|[^|<>\n]{0,40}\|>|\[/?INST\]|<</?SYS>>|</?\s*passage\s*>", clean, re.I
    )
    assert not re.search(r"^[ \t>#*_-]*(system|assistant|user)\s*:", clean, re.I | re.M)
