"""Evidence: the sentences of the retrieved passages that bear on the question.

The generator read five whole passages (~1,300 prompt tokens) to find one sentence: on a
2-core CPU the prompt alone took ~15 s before the first answer token, and the answer
sentence sat among a dozen others the small model could quote instead. Each passage is
cut into units (a prose sentence, a list item, a table row, a heading, a whole code
block); every unit is scored against the question and its rewrites, and the best units,
each with its neighbours and the heading above it for context, are kept up to a character
budget. What is kept stays a ``Passage`` of its file, with its line range narrowed to the
units kept, so a citation still points at where the words are.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace

from langchain_core.embeddings import Embeddings

from tools.retrieval.hybrid import Passage
from tools.text import sentence_spans, tokenize

# the weight of keyword overlap beside cosine similarity in a unit's score, chosen on the
# dev questions (bench/bench_evidence.py: with 1.0 the evidence held a gold answer for
# 24 of 24 at every budget from 600 characters; with 0, 22 of 24)
KEYWORD_WEIGHT = 1.0
# a unit of the passage retrieval ranked r-th (from 0) gains RANK_WEIGHT / (1 + r): the
# first passage held the answer most often, and on docs_corpus the best-scoring units
# elsewhere were pages mentioning the question's words, such as an error message naming
# the generator's server for the make demo question (bench_evidence, dev, 900
# characters: with 0, 0.1, 0.2, 0.3 the evidence held the answer for 95, 96, 98, 98 of
# 104 docs_corpus questions and 24, 24, 23, 23 of 24 on git's manual)
RANK_WEIGHT = 0.2
# With a score ratio (settings.evidence_score_ratio), past FLOOR_CHARS a unit is read
# only when it scores at least that share of the best unit's score, up to the budget: a
# question one sentence answers reads little more than that sentence, one whose best
# units score alike reads them all. On the eight dev halves of issue 71 (208 answerable
# questions, no LLM), the evidence held a gold answer for 178 with a fixed 900
# characters (mean 1,085 read), 171 with a fixed 600 (782) and 178 with a 0.8 ratio
# under a 1,200 budget (805). Floors of 200-450 were tried (docs_corpus/performance.md).
FLOOR_CHARS = 450
SCORE_RATIO = 0.8  # the ratio measured for issue 71; the setting's default, 0, is off
GAP = "\n[...]\n"  # between units of one passage that were not adjacent
# A prose sentence ends at . ! or ? followed by space and a capital, digit, quote, bracket
# or code; never after "e.g." or "i.e.".
_HEADING = re.compile(r"#{1,6} ")
# a list item, a table row, a heading or a quote: a unit of one line
_SEPARATOR_ROW = re.compile(r"^\|[\s:|-]+\|$")


@dataclass(frozen=True)
class Unit:
    passage: int  # index in the passages given
    start: int  # character offsets in the passage's text
    end: int
    # a table row's header and separator rows (indices in the unit list): a row read
    # without them is "| `llm_timeout_s` | `180` | seconds; ... |", what neither the
    # scorer nor the generator can place
    header: tuple[int, ...] = ()
    row: bool = False  # a table row: a record of its own, never another row's context
    # the nearest heading above in the passage (its index in the unit list): on a
    # reference page the heading names what the text below it describes ("####
    # TCP_FrameDelimiter" over "Sets a custom frame delimiter for TCP transmission..."),
    # and a description read without it answers "which parameter?" with nothing
    # (bench_evidence, nine dev halves at 900 characters: the answer held for 195 of 228
    # questions with it, 192 without; rsyslog's 20 against 17)
    heading: int | None = None

    def text(self, passages: Sequence[Passage]) -> str:
        return passages[self.passage].text[self.start : self.end]

    @property
    def context(self) -> tuple[int, ...]:
        """The units this one is never read without: its heading and its table header."""
        return ((self.heading,) if self.heading is not None else ()) + self.header


def units_of(passages: Sequence[Passage]) -> list[Unit]:
    """Every passage's units in order; a table row below a header and its separator row
    carries them, and every unit but a heading carries the heading above it."""
    units: list[Unit] = []
    for i, passage in enumerate(passages):
        text = passage.text
        run: list[int] = []  # the table rows met so far, one per line, in a row
        heading = None
        for start, end in sentence_spans(text):
            row = text.startswith("|", start)
            if not (row and run and text.count("\n", units[run[-1]].end, start) == 1):
                run = []
            header = tuple(run[:2]) if len(run) >= 2 and _is_separator(text, units[run[1]]) else ()
            if row:
                run.append(len(units))
            if _HEADING.match(text, start):
                heading = len(units)
                units.append(Unit(i, start, end))
            else:
                units.append(Unit(i, start, end, header, row, heading))
    return units


def _is_separator(text: str, unit: Unit) -> bool:
    return bool(_SEPARATOR_ROW.match(text[unit.start : unit.end]))


def _cosine(a: Sequence[float], b: Sequence[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    norm = math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b))
    return dot / norm if norm else 0.0


def keyword_overlap(queries: Sequence[str], texts: Sequence[str]) -> list[float]:
    """Per text, the idf-weighted share of the queries' words it holds (its best query):
    a sentence naming the option or the command asked about scores high even when its
    embedding is pulled elsewhere by the rest of the sentence."""
    tokens = [set(tokenize(t)) for t in texts]
    n = len(texts)
    idf = {}
    for words in tokens:
        for w in words:
            idf[w] = idf.get(w, 0) + 1
    idf = {w: math.log(1 + n / df) for w, df in idf.items()}
    scores = [0.0] * n
    for query in queries:
        wanted = set(tokenize(query))
        total = sum(idf.get(w, math.log(1 + n)) for w in wanted)
        if not total:
            continue
        for i, words in enumerate(tokens):
            share = sum(idf[w] for w in wanted & words) / total
            scores[i] = max(scores[i], share)
    return scores


def _quotations(queries: Sequence[str]) -> list[re.Pattern[str]]:
    """Patterns for quotations of the queries (of three words or more): a page that
    quotes the question as an example ("`rag ask` with the question "How do I
    switch..."") matches it word for word and says nothing about its answer, so a unit is
    scored without them."""
    quoted = (query.strip().rstrip("?.!").split() for query in queries)
    return [
        re.compile(r"\s+".join(map(re.escape, words)), re.IGNORECASE)
        for words in quoted
        if len(words) >= 3
    ]


def _without(quotations: Sequence[re.Pattern[str]], text: str) -> str:
    for quotation in quotations:
        text = quotation.sub(" ", text)
    return text


def score_units(
    units: Sequence[Unit],
    passages: Sequence[Passage],
    queries: Sequence[str],
    embedder: Embeddings,
    keyword_weight: float,
) -> list[float]:
    """Cosine similarity to the closest query, plus ``keyword_weight`` times keyword
    overlap, plus the passage's rank prior, for each unit as read with its table header
    and without quotations of the question. A header or separator row scores nothing of
    its own: it comes with a row."""
    headers = {j for unit in units for j in unit.header}
    quotations = _quotations(queries)
    texts = [
        _without(quotations, "\n".join(units[j].text(passages) for j in (*u.header, i)))
        for i, u in enumerate(units)
    ]
    vectors = embedder.embed_documents([*texts, *queries])  # one batch, as retrieval embeds
    vectors, asked = vectors[: len(texts)], vectors[len(texts) :]
    dense = [max(_cosine(v, q) for q in asked) for v in vectors]
    words = keyword_overlap(queries, texts)
    return [
        0.0 if i in headers else d + keyword_weight * w + RANK_WEIGHT / (1 + unit.passage)
        for i, (unit, d, w) in enumerate(zip(units, dense, words, strict=True))
    ]


def select(
    passages: Sequence[Passage],
    units: Sequence[Unit],
    scores: Sequence[float],
    budget_chars: int,
    neighbours: int,
    floor_chars: int | None = None,
    ratio: float = 0.0,
) -> list[Passage]:
    """The best units, each with ``neighbours`` on either side in its passage, until
    ``budget_chars``, and past ``floor_chars`` only those scoring at least ``ratio`` of
    the best (``ratio`` 0: a fixed budget); each passage cut to its chosen units (in
    reading order), the passages ordered by their best unit. A passage with none is
    left out."""
    by_passage: dict[int, list[int]] = {}
    for i, unit in enumerate(units):
        by_passage.setdefault(unit.passage, []).append(i)
    chosen: set[int] = set()
    used = 0
    best: dict[int, float] = {}
    ranked = sorted(range(len(units)), key=lambda i: -scores[i])
    enough = ratio * scores[ranked[0]] if ranked and ratio > 0 else -math.inf
    floor = budget_chars if floor_chars is None else min(floor_chars, budget_chars)
    for i in ranked:
        if used >= budget_chars or (used >= floor and scores[i] < enough):
            break
        unit = units[i]
        siblings = by_passage[unit.passage]
        at = siblings.index(i)
        around = [
            j
            for j in siblings[max(0, at - neighbours) : at + neighbours + 1]
            if j == i or not units[j].row
        ]
        # a unit comes with its heading, a row with its table header: its context
        for j in sorted({h for k in around for h in units[k].context} | set(around)):
            if j not in chosen:
                chosen.add(j)
                used += units[j].end - units[j].start
        best.setdefault(unit.passage, scores[i])
    kept = []
    for index in sorted(best, key=lambda p: -best[p]):
        picked = [units[j] for j in by_passage[index] if j in chosen]
        kept.append(_cut(passages[index], picked, by_passage[index], units))
    return kept


def _cut(passage: Passage, picked: list[Unit], order: list[int], units: Sequence[Unit]) -> Passage:
    """``passage`` holding only ``picked``, with [...] where units were skipped."""
    position = {(u.start, u.end): k for k, u in enumerate(units[j] for j in order)}
    parts: list[str] = []
    previous = None
    for unit in picked:
        k = position[(unit.start, unit.end)]
        if previous is not None and k != previous + 1:
            parts.append(GAP)
        elif previous is not None:  # adjacent units keep what separated them
            parts.append(passage.text[units[order[previous]].end : unit.start])
        parts.append(passage.text[unit.start : unit.end])
        previous = k
    text = "".join(parts)
    start_line, end_line = passage.start_line, passage.end_line
    exact = start_line is not None and passage.text.count("\n") == (end_line or 0) - start_line
    if exact and picked:  # the passage is its file's lines verbatim: narrow the range
        start_line = start_line + passage.text.count("\n", 0, picked[0].start)
        end_line = passage.start_line + passage.text.count("\n", 0, picked[-1].end)
    return replace(passage, text=text, start_line=start_line, end_line=end_line)


def evidence_for(
    passages: Sequence[Passage],
    queries: Sequence[str],
    embedder: Embeddings,
    budget_chars: int,
    neighbours: int,
    ratio: float = 0.0,
) -> tuple[list[Passage], int]:
    """What the generator and the verifier read of ``passages`` for ``queries``, and how
    many units they were cut into: the graph's select_evidence step and the verifier
    benchmark (rag eval verifier) both read through this."""
    units = units_of(passages)
    scores = score_units(units, passages, queries, embedder, KEYWORD_WEIGHT)
    kept = select(passages, units, scores, budget_chars, neighbours, FLOOR_CHARS, ratio)
    return kept, len(units)
