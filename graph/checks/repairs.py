"""The repairs a draft goes through before it is checked, in the order they run.

The generator is a 1.5B model: it writes sentences that answer nothing, talks about its
sources, and cites a neighbouring passage. Each repair below is one of those slips,
undone where it is a slip (a wrong number on a right quote) and turned into "found
nothing" where there is no answer to save; none makes an answer say more than the
generator wrote. The verify node's checks (graph/checks/pipeline.py) then judge the
repaired draft.

``WRITTEN``: every draft the generator writes, in order; a draft that answers nothing
becomes ``NOT_FOUND`` and gets the next of ``ATTEMPTS``.
``ATTEMPTS``: the prompts a question's first answer is asked with, each only when the
previous found nothing (a regeneration asks only the first, with the checks' feedback).
``CITING``: the draft that is kept, in order, by answer style.

Slips read in the rsyslog dev half (lab/data/newdocs/rsyslog), where 4 of 32
drafts wrote the question back with a marker where the answer goes, and 2 added a
sentence naming the passage's header ("This parameter is defined in the
rsyslog/imfile.html document, lines 342-342. [1]"), whose line numbers are in no
passage's text, so the literal check refused a right answer for it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from graph import prompts
from graph.checks.tuning import RECITE_MARGIN
from tools.text import (
    MARKER,
    MARKER_GROUP,
    cited_numbers,
    claims_with_citations,
    found_phrase,
    missing_facts,
    quote_of,
    statements,
    strip_markers,
    tokenize,
)

# A yes or a no is an answer even in the question's own words ("path.basename() does not
# ignore case"); these words are stopwords to ``tokenize``, so they are looked for first.
_YES_OR_NO = re.compile(r"\b(?:yes|no|not|never|cannot|none)\b|n't\b", re.IGNORECASE)
# A sentence whose last word before its markers leaves the answer's place empty.
_MARKER_SLOT = re.compile(
    r"\b(?:is|are|was|were|be|by|to|of|the|an?|as|called|named|with|in|from|on|use|uses)"
    r"\s*(?:\[\d{1,3}\]\s*)+[.!]?$",
    re.IGNORECASE,
)
# A sentence about the sources names them the way the prompt labels them.
_SOURCE_WORD = re.compile(r"\b(?:passages?|documents?|lines? \d+)", re.IGNORECASE)
# Words a sentence about where the answer is written uses besides the labels themselves.
_ABOUT_SOURCES = frozenset(
    tokenize(
        "passage passages document documents page section line lines source sources "
        "support supported supports defined define found mentioned stated states according "
        "cited described explained refer refers see shown given provided information"
    )
)


def adds_nothing(question: str, draft: str) -> bool:
    """Whether ``draft`` puts a marker where its answer goes ("The input parameter that
    adds the port number to the inputname property is [1].") and uses only the
    question's words (stemmed, stopwords left out), saying neither yes nor no: it names
    nothing. Treated as NOT_FOUND, it gets the second look (graph/nodes.py). An answer
    that picks a literal the question named ("Assertion failed [1]") does not end in a
    marker slot."""
    text = strip_markers(draft, set())
    return (
        any(_MARKER_SLOT.search(s) for s in statements(draft))
        and not _YES_OR_NO.search(text)
        and set(tokenize(text)) <= set(tokenize(question))
    )


def without_source_talk(draft: str, question: str, locations: Sequence[str]) -> str:
    """``draft`` without its sentences about where the answer is written: those naming a
    passage, a document or a line number with no word but the question's, the draft's
    other sentences', the passages' header ``locations`` and words about sources. The
    headers are our labels, not the documents' words; such a sentence tells the reader
    nothing the rest of the answer and the references list do not ("The startmsg.regex
    parameter is defined in the rsyslog/imfile.html document, lines 322-342."), and a
    line number it copies fails the ``literals`` check for the whole answer. A draft that is nothing
    else is left as it is: it then answers a question about the documents."""
    labels = set(tokenize(question + " " + " ".join(locations))) | _ABOUT_SOURCES
    kept = draft
    sentences = statements(draft)
    texts = [strip_markers(sentence, set()) for sentence in sentences]
    words = [set(tokenize(text)) for text in texts]
    for i, (sentence, text) in enumerate(zip(sentences, texts, strict=True)):
        if not _SOURCE_WORD.search(text):
            continue
        others = set().union(*(w for j, w in enumerate(words) if j != i))
        if words[i] <= labels | others:
            kept = re.sub(r"[ \t]*" + re.escape(sentence), "", kept, count=1)
    kept = kept.strip()
    return kept if statements(kept) else draft


def copied_from(reply: str, passages: Sequence[str]) -> bool:
    """Whether a reply asked to copy the passages' words is a copy: its words, without
    markers and the punctuation around them, occur as written in one passage. Anything
    else was written, not copied, and is no answer to that request."""
    words = quote_of(strip_markers(reply, set())).strip("`")
    return bool(words) and any(found_phrase(words, text) for text in passages)


def _each_clause(answer: str, markers_for: Callable[[str, str], str]) -> str:
    """``answer`` with each group of markers replaced by ``markers_for(clause, markers)``,
    the clause being the text since the previous group."""
    pieces: list[str] = []
    last = 0
    for group in MARKER_GROUP.finditer(answer):
        clause = answer[last : group.start()]
        pieces.append(clause + markers_for(clause, group.group()))
        last = group.end()
    return "".join(pieces) + answer[last:]


def cite_holders(answer: str, passages: Sequence[str]) -> str:
    """A quote cited to a passage that does not hold it, re-cited to the first passage
    that does. A small model copies the right words and numbers the wrong passage
    ("Adaptive immune system [1]" where [2] says it); the words are checkable, the
    number is a slip, and the verifier must read the passage the words come from.
    A quote that no passage holds keeps its markers, and fails the quote check."""

    def markers_for(clause: str, markers: str) -> str:
        quote = quote_of(clause)
        cited = [n for n in cited_numbers(markers) if 1 <= n <= len(passages)]
        if quote and not any(found_phrase(quote, passages[n - 1]) for n in cited):
            holders = [n for n, text in enumerate(passages, 1) if found_phrase(quote, text)]
            return f"[{holders[0]}]" if holders else markers
        return markers

    return _each_clause(answer, markers_for)


def cite_uncited(answer: str, passages: Sequence[str]) -> str:
    """Each statement that cites nothing (``claims_with_citations``) cited to the passage
    that holds all its literals and the most of its words. A small model reading a few
    sentences of evidence sometimes writes the right sentence and no [n], or closes a
    cited answer with an uncited sentence from the same passage ("..., which supports
    indexed queries using these operators:"); which passage it read is then a lookup,
    and the verifier still judges the statement against that passage. A statement no
    passage holds stays uncited, and fails the check as before."""
    words = _word_sets(passages)
    cited = answer
    for statement, clauses in claims_with_citations(answer):
        if any(numbers for _, numbers in clauses):
            continue
        best, _, _ = _best_holder(statement, passages, words)
        if best is not None:
            cited = cited.replace(statement, f"{statement.rstrip()} [{best + 1}]", 1)
    return cited


_WORDS = re.compile(r"\w{3,}")


def _word_sets(passages: Sequence[str]) -> list[set[str]]:
    return [set(_WORDS.findall(p.lower())) for p in passages]


def _best_holder(
    text: str, passages: Sequence[str], words: list[set[str]]
) -> tuple[int | None, list[int], list[int]]:
    """The index of the passage that holds all of ``text``'s literals and the most of its
    words (None when none holds them), how many of its words each passage shares, and
    the indexes of every passage holding all its literals."""
    said = set(_WORDS.findall(MARKER.sub("", text).lower()))
    shared = [len(said & passage) for passage in words]
    holders = [n for n, passage in enumerate(passages) if not missing_facts(text, passage)]
    return (max(holders, key=shared.__getitem__) if holders else None), shared, holders


def recite_best(answer: str, passages: Sequence[str]) -> str:
    """A clause cited to a passage that says less of it than another one does, re-cited to
    that one: the passage that holds all its literals and clearly more of its words
    (``RECITE_MARGIN``). Reading evidence from one page, the 1.5B generator writes the
    right sentence and numbers a neighbouring passage ("path.isAbsolute() returns false
    for an empty string [1]" where [1] is about path.extname()); the verifier, reading
    [1], rightly says no to a right answer. The reader is owed the passage that says it.
    A clause whose cited passages all lack one of its literals ("... set to 0.9 [2]"
    where [1] says 0.9) cannot be supported by them, so the passage holding them all
    takes the citation whatever the margin: the verifier then judges it against that one."""
    words = _word_sets(passages)

    def markers_for(clause: str, markers: str) -> str:
        cited = [n - 1 for n in cited_numbers(markers) if 1 <= n <= len(passages)]
        best, shared, holders = _best_holder(clause, passages, words)
        if not cited or best is None or best in cited:
            return markers
        lacking = not set(cited) & set(holders)
        clearer = shared[best] >= max(shared[n] for n in cited) + RECITE_MARGIN
        return f"[{best + 1}]" if lacking or clearer else markers

    return _each_clause(answer, markers_for)


@dataclass(frozen=True)
class DraftContext:
    """What a repair reads besides the draft."""

    question: str
    passages: Sequence[str]  # the texts the generator read, numbered from 1
    locations: Sequence[str]  # their header lines, as the prompt showed them
    copy: bool = False  # the draft was asked to copy the passages' words (OWN_ANSWER)
    short: bool = False  # answer_style = "short": a quote


Repair = Callable[[str, DraftContext], str]


def drop_source_talk(draft: str, context: DraftContext) -> str:
    """``without_source_talk``: sentences about where the answer is written go."""
    return without_source_talk(draft, context.question, context.locations)


def nothing_said(draft: str, context: DraftContext) -> str:
    """``NOT_FOUND`` for a draft that answers nothing: no statement at all ("[1]"), the
    question written back around a marker (``adds_nothing``), or, asked to copy the
    passages' words, words no passage holds (``copied_from``)."""
    if (
        not statements(draft)
        or adds_nothing(context.question, draft)
        or (context.copy and not copied_from(draft, context.passages))
    ):
        return prompts.NOT_FOUND
    return draft


def cite_quote_holder(draft: str, context: DraftContext) -> str:
    """A short answer's quote is cited to the passage that holds it (``cite_holders``)."""
    return cite_holders(draft, context.passages) if context.short else draft


def cite_statements(draft: str, context: DraftContext) -> str:
    """A full answer's uncited statements are cited to the passage holding them
    (``cite_uncited``), then clauses re-cited to the passage saying clearly more of them
    (``recite_best``)."""
    if context.short or prompts.NOT_FOUND in draft:
        return draft
    return recite_best(cite_uncited(draft, context.passages), context.passages)


@dataclass(frozen=True)
class Attempt:
    """One way of asking for a first answer: the prompt (None: the answer style's own)
    and whether the reply must be a copy of the passages' words."""

    prompt: prompts.Prompt | None
    copy: bool = False

    @property
    def name(self) -> str:
        return self.prompt.name if self.prompt else "answer"


# Each written draft, in order.
WRITTEN: tuple[Repair, ...] = (drop_source_talk, nothing_said)
# A first answer that found nothing is asked again: with the passages' sentences
# pointed at (the second look), then as the verifier's own-answer check asks, copied
# words (a draft the checks then know is that reading). Only with takes_second_look.
ATTEMPTS: tuple[Attempt, ...] = (
    Attempt(None),
    Attempt(prompts.ANSWER_SECOND_LOOK),
    Attempt(prompts.OWN_ANSWER, copy=True),
)
# The kept draft, in order.
CITING: tuple[Repair, ...] = (cite_quote_holder, cite_statements)


def repaired(draft: str, context: DraftContext, repairs: Sequence[Repair]) -> str:
    """``draft`` through ``repairs``, in order."""
    for repair in repairs:
        draft = repair(draft, context)
    return draft
