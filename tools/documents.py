"""The units that flow from ingestion to retrieval: extracted documents and chunks.

A chunk carries everything a citation or a neighbouring-chunk ("window") lookup
needs: which document, where in it (characters, page, lines, heading path), and
its position among the document's chunks.
"""

from __future__ import annotations

import hashlib
from dataclasses import asdict, dataclass, field
from functools import cached_property
from typing import Any


def short_hash(*parts: str, length: int = 32) -> str:
    digest = hashlib.sha256()
    for part in parts:
        digest.update(part.encode("utf-8", "surrogatepass"))
        digest.update(b"\0")
    return digest.hexdigest()[:length]


@dataclass(frozen=True)
class Section:
    """A contiguous piece of a document's text with its location in the source.

    PDFs give one section per page; most other formats give one section. ``start_line``
    is the 1-based line of the section's first character in the source file.
    """

    text: str
    page: int | None = None
    start_line: int = 1


@dataclass
class ExtractedDocument:
    """A source file (or one record of a JSONL/JSON file) turned into text."""

    source: str  # the path as given/relative to the ingestion root; record id appended for JSONL
    kind: str  # markdown | rst | text | html | python | code | pdf | docx | csv | json
    sections: list[Section]
    title: str = ""
    metadata: dict[str, Any] = field(default_factory=dict)

    @property
    def text(self) -> str:
        return "\n".join(s.text for s in self.sections)

    @property
    def doc_id(self) -> str:
        return short_hash("doc", self.source, length=16)

    @property
    def content_hash(self) -> str:
        return short_hash("content", *(f"{s.page}|{s.start_line}|{s.text}" for s in self.sections))


@dataclass(frozen=True)
class Chunk:
    """One retrievable unit, as stored in the vector and keyword indexes.

    ``text`` is what a reader gets back; ``embed_text`` is what is embedded, which
    differs only for derived documents (e.g. a QA pair embedded by its question alone).
    """

    text: str
    doc_id: str
    source: str
    chunk_index: int
    chunk_count: int
    start_char: int
    end_char: int
    page: int | None = None
    start_line: int | None = None
    end_line: int | None = None
    heading: str = ""  # heading path, e.g. "Install > From source"
    kind: str = "chunk"  # chunk | summary | qa | row
    embed_text: str = ""
    file_hash: str = ""  # content hash of the file version this chunk came from

    @cached_property  # a hash of the whole text: retrieval asks for it many times
    def id(self) -> str:
        """Deterministic: the same file version and text always give the same id."""
        return short_hash(
            self.doc_id,
            self.file_hash,
            self.kind,
            str(self.chunk_index),
            self.embed_text,
            self.text,
        )

    @property
    def text_hash(self) -> str:
        return short_hash("text", self.embed_text or self.text)

    def to_metadata(self) -> dict[str, str | int | float | bool]:
        """Flat, None-free metadata as vector stores require."""
        data = asdict(self)
        data.pop("text")
        data["text_hash"] = self.text_hash
        return {k: v for k, v in data.items() if v is not None}

    @classmethod
    def from_metadata(cls, text: str, metadata: dict[str, Any]) -> Chunk:
        known = {f for f in cls.__dataclass_fields__ if f != "text"}
        return cls(text=text, **{k: v for k, v in metadata.items() if k in known})
