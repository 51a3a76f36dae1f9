"""What a draft says beyond the question: the two ways the 1.5B generator writes a
sentence that answers nothing.

Both were read in the rsyslog dev half (lab/data/newdocs/rsyslog), where 4 of 32
drafts wrote the question back with a marker where the answer goes, and 2 added a
sentence naming the passage's header ("This parameter is defined in the
rsyslog/imfile.html document, lines 342-342. [1]"), whose line numbers are in no
passage's text, so check 2 refused a right answer for it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from tools.grounding import statements, strip_markers
from tools.store.keyword_index import tokenize

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
    line number it copies fails check 2 for the whole answer. A draft that is nothing
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
