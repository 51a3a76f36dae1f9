"""The quoted support under each statement of an answer: the sentences of the passage
it cites that it rests on, with where they are (file and line, or page).

A reader checks an answer by reading a few quoted lines, not five passages. The quote
is what the literal check compared: for each clause, the smallest run of the cited
passage's sentences (``tools.text.sentence_spans``) that holds all the clause's names,
numbers and code tokens, and of those the one sharing the most of its words. A clause
none of whose cited passages holds its literals gets no quote: the answer shows what
the documents say, never a sentence that does not say it. No model is asked.
"""

from __future__ import annotations

from collections.abc import Sequence

from graph.results import Closest, PassageRecord, Support
from tools.text import (
    claims_with_citations,
    missing_facts,
    sentence_spans,
    strip_markers,
    tokenize,
)

# A quote is a sentence or two: longer ones are cut, with an ellipsis, at this length.
QUOTE_CHARS = 300
# How many adjacent sentences a quote may join to hold a clause's literals.
MAX_SENTENCES = 2
# How many passages "the documents do not say" shows, best first, one sentence each.
CLOSEST = 3


def _best_span(clause: str, text: str, question: str = "") -> tuple[int, int] | None:
    """The run of at most ``MAX_SENTENCES`` sentences of ``text`` that holds every literal
    of ``clause`` the question does not hold, and shares the most of the clause's new
    words (those the question does not hold); None when no run holds those literals or
    none shares a new word. The question's own names and numbers need not be quoted: the
    page is about them, and the sentence that answers rarely repeats them ("Up to ten
    nesting levels are supported"). A statement that only repeats the question has no
    new word, so no sentence supports it: it states no answer."""
    spans = sentence_spans(text)
    new = set(tokenize(clause)) - set(tokenize(question))
    # a literal the question lacks is news even when its words are the question's own
    # ("dhcp-ddns" where the question names kea-dhcp-ddns)
    news = len(missing_facts(clause, question)) if question else 0
    best: tuple[int, tuple[int, int]] | None = None
    for size in range(1, MAX_SENTENCES + 1):
        for i in range(len(spans) - size + 1):
            start, end = spans[i][0], spans[i + size - 1][1]
            quote = text[start:end]
            if missing_facts(clause, f"{quote}\n{question}"):
                continue
            shared = news + len(new & set(tokenize(quote)))
            if best is None or shared > best[0]:
                best = (shared, (start, end))
        if best is not None and best[0] > 0:
            break  # the fewest sentences that hold it
    if best is None or best[0] == 0:
        return None
    return best[1]


def line_at(passage: PassageRecord, offset: int) -> int | None:
    """The file line of ``offset`` in the passage's text, when the text is its file's lines
    verbatim (evidence selection may have cut lines out: then the passage's range says)."""
    start, end = passage.get("start_line"), passage.get("end_line")
    text = passage["text"]
    if start is None or end is None or text.count("\n") != end - start:
        return None
    return start + text.count("\n", 0, offset)


def _quoted(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= QUOTE_CHARS else text[: QUOTE_CHARS - 1].rstrip() + "…"


def support_for(
    answer: str, passages: Sequence[PassageRecord], question: str = ""
) -> list[Support]:
    """Each cited clause of ``answer`` with the quote of the first passage it cites that
    holds it, in the answer's order."""
    out: list[Support] = []
    for claim, clauses in claims_with_citations(answer):
        for clause, numbers in clauses:
            for n in numbers:
                if not 1 <= n <= len(passages):
                    continue
                passage = passages[n - 1]
                span = _best_span(clause, passage["text"], question)
                if span is None:
                    continue
                out.append(
                    Support(
                        statement=" ".join(strip_markers(claim, set()).split()),
                        n=n,
                        source=passage["source"],
                        page=passage.get("page"),
                        line=line_at(passage, span[0]),
                        quote=_quoted(passage["text"][span[0] : span[1]]),
                    )
                )
                break
    return out


def where(passage: PassageRecord, line: int | None = None) -> str:
    """Where a place in a passage is, as a reader finds it: "models.md, line 41",
    "guide.pdf, page 3", or the passage's line range when the line is not known. The CLI,
    the chat page (through rag_ui/exchange.py) and the reasons all say it so."""
    parts = [passage["source"]]
    if passage.get("page"):
        parts.append(f"page {passage['page']}")
    if line is not None:
        parts.append(f"line {line}")
    elif passage.get("start_line"):
        parts.append(f"lines {passage['start_line']}-{passage['end_line']}")
    return ", ".join(parts)


def closest(
    question: str, passages: Sequence[PassageRecord], limit: int = CLOSEST
) -> list[Closest]:
    """Of the first ``limit`` passages (retrieval's order), the sentence sharing the most
    of the question's words: what "the documents do not say" shows, so that the reader
    sees what the documents hold near the question and judges the gap themselves."""
    words = set(tokenize(question))
    out: list[Closest] = []
    for n, passage in enumerate(passages[:limit], 1):
        text = passage["text"]
        spans = sentence_spans(text) or [(0, len(text))]
        start, end = max(spans, key=lambda sp: len(words & set(tokenize(text[sp[0] : sp[1]]))))
        out.append(
            Closest(
                n=n,
                source=passage["source"],
                page=passage.get("page"),
                line=line_at(passage, start),
                quote=_quoted(text[start:end]),
            )
        )
    return out
