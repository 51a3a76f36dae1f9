"""The support each statement of an answer has: the sentences, of every passage the
generator read, that state it, with where they are (file and line, or page).

A reader checks an answer by reading a few quoted lines, not five passages, and the
label rests on them (graph/checks/judgement.py): an answer is verified only when every
statement that carries a fact has a quote that states it. The passage the model cited is
a hint, searched first; a sentence of another passage the generator read counts the same
(the model cites the neighbouring passage often, and the answer is no less stated).

A quote *states* a clause (``quote_states``) when it holds all the clause's names,
numbers and code tokens (those the question did not give) and at least ``STATED_SHARE``
of the clause's other new words, counted in the quote's parts (cut at sentence ends, ";",
"but", "while", "whereas") that name one of its literals and no rival one: "`rag ui`
starts the LangGraph server" is not stated by "`rag serve` starts the LangGraph server;
`rag ui` starts the chat page", and one shared
word is never enough. Among the quotes that state it, the embedder picks the closest
(``found_by`` says "embedding" when it is within ``EMBEDDING_STATES``). A statement that
only repeats the question states nothing, so nothing supports it. No model is asked
here; the verifier's reading is added by the checks (``found_by``).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence

from graph.checks.tuning import (
    EMBEDDING_STATES,
    LIGHT_WORDS,
    RELATION_SHARE,
    SHOWN_CODE_SAYS,
    SOURCE_WORDS,
    STATED_SHARE,
)
from graph.results import Closest, PassageRecord, StatementSupport, Support
from tools.text import (
    FENCE_OPENING,
    MARKER,
    MARKER_GROUP,
    claims_with_citations,
    given_by,
    literal_kind,
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
# Where one sentence says two things of two subjects: only the parts naming no literal
# the clause does not name say the rest of the clause.
_PARTS = re.compile(r";|\s(?:but|while|whereas)\s|(?<=[.!?])\s+", re.IGNORECASE)

_CODE_BLOCK = re.compile(FENCE_OPENING.pattern, re.MULTILINE)
# A quote that is one list item ("- name - what it does. Default is 5.") or one table row
# ("name | what it does | 5"): a single line, so it is about one subject.
_ONE_ITEM = re.compile(r"\s*(?:(?:[-*+]|\d+[.)])\s.*|[^\n]*\s\|\s[^\n]*)\Z")

# ``found_by`` of a quote the embedder put within ``EMBEDDING_STATES`` of its clause
BY_EMBEDDING = "embedding"

# Texts to vectors (the run's embedder); an empty list when it failed: text alone ranks.
Embed = Callable[[list[str]], list[list[float]]]


def plain_statement(statement: str) -> str:
    """A statement as it is shown on its own: no markers, no space before punctuation."""
    return re.sub(r"\s+([.,;:!?])", r"\1", " ".join(strip_markers(statement, set()).split()))


def _literals(clause: str, question: str) -> list[str]:
    """The clause's names, numbers and code tokens the question did not give."""
    return [m for m in missing_facts(clause, question) if not given_by(m, question)]


def _words(clause: str, question: str, literals: Sequence[str]) -> set[str]:
    """The clause's new words: stemmed, the question's, the literals' own and the light
    words (``LIGHT_WORDS``) left out."""
    given = set(tokenize(question)) | set(tokenize(" ".join(literals))) | LIGHT_WORDS
    return set(tokenize(clause)) - given


def quote_states(clause: str, quote: str, question: str = "") -> bool:
    """Whether ``quote`` states ``clause`` by its text (the module's rule). Where the
    quote says several things (parts cut at sentence ends, ";", "but", "while",
    "whereas"), only the parts naming one of the clause's literals count, and of those not
    one that names another literal of a kind where it lacks the clause's own ("`rag
    serve`" where the clause names "`rag ui`", "Alice" where it names "Bob"): it is
    about something else."""
    literals = _literals(clause, question)
    if missing_facts(clause, f"{quote}\n{question}"):
        return False
    words, share, relation = _words(clause, question, literals), STATED_SHARE, False
    if not words:  # a literal is news; the question's words alone are not
        if not literals:
            return False
        words, share, relation = _relation(clause, question), RELATION_SHARE, True
        if not words:
            return True
    parts = _parts(quote)
    if len(parts) > 1 and literals:  # the parts saying something of the clause's literals
        parts = [
            p
            for p in parts
            if (relation or _names_one(p, literals))
            and not _elsewhere(p, literals, f"{clause}\n{question}")
        ]
    said = set(tokenize(" ".join(parts)))
    if any(_CODE_BLOCK.search(p) for p in parts):  # a block of code says "run this"
        said |= SHOWN_CODE_SAYS
    return len(words & said) >= math.ceil(share * len(words))


def _relation(clause: str, question: str) -> set[str]:
    """The words a clause repeats from the question, stemmed, without its names, numbers
    and code tokens (the question's too: they are the subject) and the light words: what
    it says of its literal, when it says nothing new. They may stand in any part of the
    quote that names no rival literal ("-sseof: like the -ss option but relative to the
    end of file")."""
    named = set(tokenize(" ".join(missing_facts(clause, "")))) | LIGHT_WORDS | SOURCE_WORDS
    return (set(tokenize(clause)) & set(tokenize(question))) - named


def _parts(quote: str) -> list[str]:
    """``quote`` cut where it starts saying something else (``_PARTS``), never inside
    parentheses: "builds it once (about four minutes; the wheel is kept in `~/.cache`),
    installs ..." is one sentence about one subject. So is one list item or table row:
    "- stderrTimeout - The time (in milliseconds) to wait ... Default is 2000." says both
    of its head term."""
    if _ONE_ITEM.match(quote):
        return [quote]
    depth, masked = 0, []
    for ch in quote:
        depth += (ch == "(") - (ch == ")" and depth > 0)
        masked.append("," if depth and ch == ";" else ch)
    cuts = [0, *(x for m in _PARTS.finditer("".join(masked)) for x in m.span()), len(quote)]
    return [quote[cuts[i] : cuts[i + 1]] for i in range(0, len(cuts), 2)]


def _names_one(part: str, literals: Sequence[str]) -> bool:
    return any(not missing_facts(f"`{x}`", part) for x in literals)


def _elsewhere(part: str, literals: Sequence[str], said: str) -> bool:
    """Whether ``part`` is about another subject than the clause whose ``literals`` (and
    text, ``said``) are given: it names a literal ``said`` lacks, of a kind of which it
    lacks one of the clause's."""
    lacking = {literal_kind(x) for x in literals if missing_facts(f"`{x}`", part)}
    return any(literal_kind(x) in lacking for x in missing_facts(part, said))


def mentioned(answer: str, passages: Sequence[PassageRecord], question: str = "") -> bool:
    """Whether some clause of ``answer`` has a span of some passage holding its literals
    and a new word of it (or a literal the question lacks): the looser reading that
    decides whether the documents say anything of the answer at all. Withholding on the
    stricter ``quote_states`` withheld 3 right answers of the ffmpeg dev half (26
    answerable; one had been VERIFIED), whose wording wrapped the fact ("To resolve the
    'UINT64_C' error, we must append ..."); they are shown, not verified, instead."""
    for _, clauses in claims_with_citations(answer):
        for clause, _numbers in clauses:
            literals = _literals(clause, question)
            words = _words(clause, question, literals)
            for n in range(1, len(passages) + 1):
                for a, b in _spans(passages[n - 1]["text"]):
                    quote = passages[n - 1]["text"][a:b]
                    if _holds_literals(clause, quote, question) and (
                        literals or words & set(tokenize(quote))
                    ):
                        return True
    return False


def _holds_literals(clause: str, quote: str, question: str) -> bool:
    return not missing_facts(clause, f"{quote}\n{question}")


def _cosine(a: Sequence[float], b: Sequence[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    norm = math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b))
    return dot / norm if norm else 0.0


def _spans(text: str) -> list[tuple[int, int]]:
    """Runs of one to ``MAX_SENTENCES`` adjacent sentences, the shortest first."""
    spans = sentence_spans(text)
    return [
        (spans[i][0], spans[i + size - 1][1])
        for size in range(1, MAX_SENTENCES + 1)
        for i in range(len(spans) - size + 1)
    ]


def _candidates(
    clause: str, passages: Sequence[PassageRecord], order: Sequence[int], question: str
) -> list[tuple[int, tuple[int, int]]]:
    """Every (passage, span) holding all the clause's literals, cited passages first."""
    return [
        (n, span)
        for n in order
        for span in _spans(passages[n - 1]["text"])
        if _holds_literals(clause, passages[n - 1]["text"][span[0] : span[1]], question)
    ]


def _support(statement: str, n: int, passage: PassageRecord, span: tuple[int, int]) -> Support:
    return Support(
        statement=statement,
        n=n,
        source=passage["source"],
        page=passage.get("page"),
        line=line_at(passage, span[0]),
        quote=_quoted(passage["text"][span[0] : span[1]]),
    )


def statement_support(
    answer: str,
    passages: Sequence[PassageRecord],
    question: str = "",
    embed: Embed | None = None,
) -> list[StatementSupport]:
    """Each statement of ``answer`` with the quotes that state it, one per clause, found
    in the passage it cites or, failing that, in any other passage the generator read;
    ``supported`` when every clause has one. ``facts``: it says something the question did
    not (a statement that only repeats the question, or only says where it is stated,
    carries no fact)."""
    out: list[StatementSupport] = []
    valid = range(1, len(passages) + 1)
    for claim, clauses in claims_with_citations(answer):
        said = plain_statement(claim)
        quotes: list[Support] = []
        found_by: set[str] = set()
        facts = False
        for clause, numbers in clauses:
            literals = _literals(clause, question)
            facts = facts or bool(literals or _words(clause, question, literals) - SOURCE_WORDS)
            hint = [n for n in numbers if n in valid]
            order = [*hint, *(n for n in valid if n not in hint)]
            found = _best(clause, passages, order, question, embed)
            if found is None:
                continue
            n, span, how = found
            quotes.append(_support(said, n, passages[n - 1], span))
            found_by.update(how)
        supported = facts and len(quotes) == len(clauses)
        out.append(
            StatementSupport(
                statement=said,
                cited=sorted({n for _, ns in clauses for n in ns if n in valid}),
                facts=facts,
                supported=supported,
                found_by=sorted(found_by) if supported else [],
                quotes=quotes if supported else [],
            )
        )
    return out


def _best(
    clause: str,
    passages: Sequence[PassageRecord],
    order: Sequence[int],
    question: str,
    embed: Embed | None,
) -> tuple[int, tuple[int, int], list[str]] | None:
    """Of the spans that state ``clause`` by its text, the one the embedder puts closest
    to it (without an embedder, the one sharing the most of its words; among equals, the
    first: cited passages, one sentence). The embedder ranks, it never decides: "X reached
    the final" is as close to "X won the final" as the true sentence. ``found_by`` names
    it when it puts the quote within ``EMBEDDING_STATES``. None when nothing states it."""
    stated = [
        (n, span)
        for n, span in _candidates(clause, passages, order, question)
        if quote_states(clause, passages[n - 1]["text"][span[0] : span[1]], question)
    ]
    if not stated:
        return None
    texts = [passages[n - 1]["text"][a:b] for n, (a, b) in stated]
    vectors = embed([strip_markers(clause, set()), *texts]) if embed else []
    if not vectors:  # no embedder, or it failed: the most words shared
        words = _words(clause, question, _literals(clause, question))
        best = max(range(len(texts)), key=lambda i: len(words & set(tokenize(texts[i]))))
        return *stated[best], ["text"]
    scores = [_cosine(vectors[0], v) for v in vectors[1:]]
    best = max(range(len(scores)), key=scores.__getitem__)
    close = scores[best] >= EMBEDDING_STATES
    return *stated[best], ["text", *([BY_EMBEDDING] if close else [])]


def all_quoted_close(found: Sequence[StatementSupport]) -> bool:
    """Whether every statement carrying a fact has quotes, each the embedder put within
    ``EMBEDDING_STATES`` of its clause: the documents say it in nearly its words."""
    carrying = [s for s in found if s["facts"]]
    return bool(carrying) and all(
        s["supported"] and BY_EMBEDDING in s["found_by"] for s in carrying
    )


def recited(draft: str, found: Sequence[StatementSupport]) -> str:
    """``draft`` with each supported statement of one clause citing the passages its
    quotes are in, where the model cited others: the markers a reader follows are the
    ones the service found, the model's were a hint. ``found`` is
    ``statement_support(draft, ...)``, statement for statement."""
    for (claim, clauses), support in zip(claims_with_citations(draft), found, strict=False):
        homes = list(dict.fromkeys(q["n"] for q in support["quotes"]))
        groups = list(MARKER_GROUP.finditer(claim))
        if not (support["supported"] and len(clauses) == 1 and groups):
            continue
        if homes == list(dict.fromkeys(int(m) for m in MARKER.findall(claim))):
            continue
        markers = "".join(f"[{n}]" for n in homes)
        rest = MARKER_GROUP.sub("", claim[groups[0].end() :])
        draft = draft.replace(claim, claim[: groups[0].start()] + markers + rest, 1)
    return draft


def renumbered(found: Sequence[StatementSupport], new_of: dict[int, int]) -> list[StatementSupport]:
    """``found`` with its passage numbers written as ``new_of`` says (the answer object
    numbers passages in the order the answer cites them)."""
    return [
        {
            **s,
            "cited": sorted(new_of.get(n, n) for n in s["cited"]),
            "quotes": [{**q, "n": new_of.get(q["n"], q["n"])} for q in s["quotes"]],
        }
        for s in found
    ]


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
