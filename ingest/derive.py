"""Derived documents: short, focused texts that embed better than raw chunks.

From the seeds: per document, an LLM writes a summary and question-answer pairs;
each pair is embedded from three angles (question, answer, both) but always
returned whole. Table rows are embedded once per combination of their fields and
also always returned whole. All derived chunks point back to their source document.
"""

from __future__ import annotations

import itertools
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import HumanMessage, SystemMessage
from pydantic import BaseModel, Field

from tools.documents import Chunk, ExtractedDocument
from tools.structured import invoke_structured

MAX_SOURCE_CHARS = 6000  # what a 4k-token local model can read with room to answer
ALL_SUBSETS_UP_TO = 4  # columns; wider tables get single fields plus the whole row

DERIVE_PROMPT = (
    "You write retrieval aids for a document. Return JSON with a 2-3 sentence summary "
    "of the document and up to 4 question-answer pairs that the document answers. "
    "Use only facts stated in the document."
)


class QAPair(BaseModel):
    question: str = Field(max_length=200)
    answer: str = Field(max_length=300)


class Derived(BaseModel):
    summary: str = Field(max_length=600)
    qa: list[QAPair] = Field(max_length=4)


def _chunk(
    doc: ExtractedDocument, kind: str, index: int, count: int, text: str, embed: str, **where: Any
) -> Chunk:
    return Chunk(
        text=text,
        embed_text=embed if embed != text else "",
        doc_id=doc.doc_id,
        source=doc.source,
        chunk_index=index,
        chunk_count=count,
        start_char=0,
        end_char=len(doc.text),
        kind=kind,
        file_hash=doc.content_hash,
        **where,
    )


def row_chunks(doc: ExtractedDocument) -> list[Chunk]:
    """Each table row embedded per field combination, the full row returned every time."""
    columns: list[str] = doc.metadata.get("columns", [])
    rows: list[dict[str, str]] = doc.metadata.get("rows", [])
    if len(columns) <= ALL_SUBSETS_UP_TO:
        combos = [c for n in range(1, len(columns) + 1) for c in itertools.combinations(columns, n)]
    else:
        combos = [(c,) for c in columns] + [tuple(columns)]
    out: list[Chunk] = []
    for row_no, row in enumerate(rows):
        full = "; ".join(f"{c}: {row[c]}" for c in columns if row.get(c))
        angles = dict.fromkeys(
            "; ".join(f"{c}: {row[c]}" for c in combo if row.get(c)) for combo in combos
        )
        for angle in filter(None, angles):
            out.append(
                _chunk(
                    doc,
                    "row",
                    row_no,
                    len(rows),
                    full,
                    angle,
                    start_line=row_no + 2,
                    end_line=row_no + 2,
                )
            )
    return out


def llm_chunks(doc: ExtractedDocument, llm: BaseChatModel, retries: int = 2) -> list[Chunk]:
    """A summary chunk and each QA pair from three angles."""
    derived: Derived = invoke_structured(
        llm,
        Derived,
        [
            SystemMessage(DERIVE_PROMPT),
            HumanMessage(f"Document ({doc.source}):\n{doc.text[:MAX_SOURCE_CHARS]}"),
        ],
        retries=retries,
    )
    out = [_chunk(doc, "summary", 0, 1, derived.summary, derived.summary)]
    pairs = [p for p in derived.qa if p.question.strip() and p.answer.strip()]
    for index, pair in enumerate(pairs):
        full = f"Q: {pair.question}\nA: {pair.answer}"
        for angle in (pair.question, pair.answer, full):
            out.append(_chunk(doc, "qa", index, len(pairs), full, angle))
    return out


def derived_chunks(doc: ExtractedDocument, llm: BaseChatModel | None) -> list[Chunk]:
    if doc.kind == "csv":
        return row_chunks(doc)
    return llm_chunks(doc, llm) if llm is not None else []
