"""Deterministic helpers for citations and grounding checks.

Embedding similarity cannot tell a true claim from one with a wrong number (both
score about 0.78 in the field notes), so before (and besides) the verifier LLM we
check literally that every number and name in a statement occurs in the passages.
"""

from __future__ import annotations

import re

_MARKER = re.compile(r"\[(\d{1,3})\]")
_SENTENCE_END = re.compile(r"(?<=[.!?])(?:\s*(?:\[\d{1,3}\])+)?\s+(?=[A-Z0-9\"'(`*-])")
_NUMBER = re.compile(r"(?<![\w.])\d+(?:[.,]\d+)*(?![\w])")
_NAME = re.compile(r"\b[A-Z][A-Za-z0-9]*(?:[-_.][A-Za-z0-9]+)*\b")
_CODEISH = re.compile(r"`([^`]+)`")


def cited_numbers(text: str) -> list[int]:
    """Passage numbers cited as [n], in order of first appearance."""
    return list(dict.fromkeys(int(m) for m in _MARKER.findall(text)))


def strip_markers(text: str, keep: set[int]) -> str:
    """Remove citation markers that point at no passage.

    Repeated until nothing changes: removing "[9]" from "[[9]2]" leaves a new "[2]".
    """
    while True:
        stripped = _MARKER.sub(lambda m: m.group(0) if int(m.group(1)) in keep else "", text)
        if stripped == text:
            return text
        text = stripped


def statements(answer: str) -> list[str]:
    """Split an answer into sentence-level statements, keeping each one's markers."""
    parts: list[str] = []
    last = 0
    for match in _SENTENCE_END.finditer(answer):
        parts.append(answer[last : match.end()].strip())
        last = match.end()
    parts.append(answer[last:].strip())
    # a part must say something: "[1]\n[2]" or " - ." is markup, not a statement
    return [p for p in parts if re.search(r"\w", _MARKER.sub("", p))]


def _normalise(text: str) -> str:
    return re.sub(r"\s+", " ", text.replace(",", "")).lower()


def missing_facts(statement: str, context: str) -> list[str]:
    """Numbers and names in ``statement`` that appear nowhere in ``context``.

    Names are capitalised words not at the start of the sentence and code spans;
    comparison ignores case, whitespace and thousands separators.
    """
    body = _MARKER.sub("", statement)
    haystack = _normalise(context)
    candidates = [n for n in _NUMBER.findall(body)]
    words = _NAME.findall(body)
    first = re.match(r"\W*(\w+)", body)
    candidates += [w for w in words if not (first and w == first.group(1))]
    candidates += _CODEISH.findall(body)
    return [c for c in dict.fromkeys(candidates) if _normalise(c) not in haystack]
