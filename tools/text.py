"""The one text module: words, sentences, citation markers, code fences and literals,
as keyword search, evidence selection, partitioning, sanitising and the answer checks
read them.

Embedding similarity cannot tell a true claim from one with a wrong number (both
score about 0.78 in the field notes), so before (and besides) the verifier LLM we
check literally that every number, name and code token in a statement occurs in the
passages. Answers are Markdown, often near-verbatim copies of docs with fenced blocks
and inline code, so the check reads Markdown rather than pairing any two backticks.
"""

from __future__ import annotations

import re
from functools import lru_cache

import snowballstemmer

MARKER = re.compile(r"\[(\d{1,3})\]")  # a citation marker, [n]

# --- words: the keyword tokeniser (keyword search, evidence selection, the checks) ---
# Stored chunk tokens must come from the same tokenisation as query tokens: bump this
# whenever ``tokenize`` changes, so old collections are rebuilt instead of mismatching.
TOKENIZER_VERSION = 1
_WORD = re.compile(r"[a-z0-9]+(?:['’][a-z]+)?")
_STEMMER = snowballstemmer.stemmer("english")
STOPWORDS = frozenset(
    """a about above after again against all am an and any are as at be because been before
    being below between both but by can did do does doing down during each few for from further
    had has have having he her here hers herself him himself his how i if in into is it its
    itself just me more most my myself no nor not now of off on once only or other our ours
    ourselves out over own same she should so some such than that the their theirs them
    themselves then there these they this those through to too under until up very was we were
    what when where which while who whom why will with you your yours yourself yourselves""".split()
)


@lru_cache(maxsize=200_000)
def _stem(word: str) -> str:
    return _STEMMER.stemWord(word)


def tokenize(text: str) -> list[str]:
    """Stemmed words, stopwords left out: what keyword search indexes and matches."""
    return [_stem(w) for w in _WORD.findall(text.lower()) if w not in STOPWORDS]


# --- sentence boundaries and code fences, one definition per reader ------------------
# They differ on purpose. A passage's sentence may open with a citation-like "[" (a
# reference list); a chunk also breaks at a blank line; an answer's sentence keeps the
# markers that close it; sanitising reads a sentence as a span, to quote an order.
PASSAGE_SENTENCE_END = re.compile(r"(?<=[.!?])(?<!e\.g\.)(?<!i\.e\.)\s+(?=[A-Z0-9\"'(`*\[])")
CHUNK_SENTENCE_BREAK = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9])|\n[ \t]*\n\s*")
SENTENCE_SPAN = re.compile(r"(?:[^.!?\n]|[.!?](?=\S))+[.!?]*")
CHUNK_PARAGRAPH_BREAK = re.compile(r"\n[ \t]*\n\s*")  # with the blank space after it
# a line opening (or closing) a fenced code block; ``_FENCE`` below also reads its info (answers)
FENCE_OPENING = re.compile(r"^ {0,3}(`{3,}|~{3,})")
ANSWER_SENTENCE_END = re.compile(
    r"(?<=[.!?])(?<!e\.g\.)(?<!i\.e\.)(?:\s*(?:\[\d{1,3}\])+)?\s+(?=[A-Z0-9\"'(`*-])"
)
_SPAN_ON_A_LINE = re.compile(r"`[^`\n]+`")

# A literal must not be glued to its neighbours, or `RAG_K` would be found in RAG_K_MAX,
# 45 in 450 or 4.45, `--k` in --keep, `-k` in --k and `gpt-4o` in gpt-4o-mini. Word
# characters glue; "." glues a word character after it (and anything before it, as for
# decimals); "-" glues two letters and a flag's dashes, but not digits ("10-20" holds 20).
_START = r"(?<![\w.])(?<!-(?=-))(?<![^\W\d]-(?=[^\W\d]))"
_END = r"(?!\w|\.\w|(?<=[^\W\d])-[^\W\d])"
_NUMBER = re.compile(_START + r"\d+(?:[.,]\d+)*" + _END)
_NAME = re.compile(_START + r"[A-Z][A-Za-z0-9]*(?:[-_.][A-Za-z0-9]+)*" + _END)
_FIRST_WORD = re.compile(r"\W*(\w+)")
# In code every run of these is a token: a command word, flag, setting, path, number or
# model spec such as openai:gpt-4o-mini@http://127.0.0.1:8000/v1 ($, quotes, brackets
# and commas separate). Trailing ".:@=-/" are punctuation (`RAG_API_KEY=...`) or a
# directory's optional slash.
_CODE_TOKEN = re.compile(r"[\w~./+:@=%-]+")
_THOUSANDS = re.compile(r"(?<=\d),(?=\d{3}(?!\d))")
# The 1.5B generator glues a determiner to the file suffix after it ("the.pyz" for "the
# .pyz", "a.netrc") in prose; read as written, that is a dotted name no passage holds.
# Not "this": `this.server` is a JavaScript name.
_GLUED_SUFFIX = re.compile(r"\b(the|an?|your|its|each|any)\.(?=[a-z])", re.IGNORECASE)
# Words in quotation marks claim to be the passage's own ("the 'deny temporary allowlist
# on backup MX' setting" is a name the generator made up): they must occur as written.
_QUOTED = re.compile(r'["\u201c]([^"\u201c\u201d\n]{2,120})["\u201d]')
# CommonMark: a fence is 3+ backticks (info string without backticks) or 3+ tildes,
# indented at most 3 spaces; a backtick string is a maximal run of backticks
_FENCE = re.compile(r" {0,3}(?P<fence>`{3,}(?=[^`]*$)|~{3,})(?P<info>.*)")
_BACKTICKS = re.compile(r"`+")


def cited_numbers(text: str) -> list[int]:
    """Passage numbers cited as [n], in order of first appearance."""
    return list(dict.fromkeys(int(m) for m in MARKER.findall(text)))


MARKER_GROUP = re.compile(r"(?:\[\d{1,3}\])+")


def cited_clauses(statement: str) -> list[tuple[str, list[int]]]:
    """A statement cut after each group of markers: (the clause, the passages it cites).

    "Markdown uses `structure` [1], whose default is 1000 characters [2]." gives two
    clauses, each to be found in its own passage; text after the last group belongs to
    the last clause. A statement without markers is one clause citing nothing.
    """
    clauses: list[tuple[str, list[int]]] = []
    last = 0
    for group in MARKER_GROUP.finditer(statement):
        clauses.append((statement[last : group.start()], cited_numbers(group.group())))
        last = group.end()
    tail = statement[last:]
    if not clauses:
        return [(tail, [])]
    text, numbers = clauses[-1]
    clauses[-1] = (text + tail, numbers)
    return clauses


def strip_markers(text: str, keep: set[int]) -> str:
    """Remove citation markers that point at no passage.

    Repeated until nothing changes: removing "[9]" from "[[9]2]" leaves a new "[2]".
    """
    while True:
        stripped = MARKER.sub(lambda m: m.group(0) if int(m.group(1)) in keep else "", text)
        if stripped == text:
            return text
        text = stripped


def renumber(text: str, new_of: dict[int, int]) -> str:
    """``text`` with each marker [old] written [new_of[old]] (markers not in it unchanged)."""
    return MARKER.sub(lambda m: f"[{new_of.get(int(m.group(1)), int(m.group(1)))}]", text)


_ENUMERATOR = re.compile(r"\d{1,3}[.)]")
# the markers right after a fenced block, which cite it
_CITED_BY = re.compile(rf"(?:\s*{MARKER.pattern})*")


def statements(answer: str) -> list[str]:
    """Split an answer into sentence-level statements, keeping each one's markers.

    Never inside a code span (`rag ingest PATH... --rebuild` is one command) or a fenced
    block, nor after "e.g." or "i.e.". A fenced block closes the statement that shows it
    ("Run this: ```make demo```"), with the markers right after it: the text after it
    says something else, and read as one statement with it, a sentence of framing and a
    sentence of facts had to be found in one quote.
    """
    parts: list[str] = []
    last = 0
    masked = _SPAN_ON_A_LINE.sub(lambda m: "`" + "x" * (len(m.group()) - 2) + "`", answer)
    blocks = _fenced_spans(answer)
    for start, end in blocks:
        masked = masked[:start] + re.sub(r"[^\n]", "x", masked[start:end]) + masked[end:]
    ends = [m.end() for m in ANSWER_SENTENCE_END.finditer(masked)]
    for _, end in blocks:  # the block's markers go with it; text after it starts anew
        after = _CITED_BY.match(answer, end)
        if after and answer[after.end() :].strip():
            ends.append(after.end())
    for end in sorted(set(ends)):
        parts.append(answer[last:end].strip())
        last = end
    parts.append(answer[last:].strip())
    # a list item's number ("1. Run `make demo`.") opens its statement: it is not one
    merged: list[str] = []
    for part in parts:
        if merged and _ENUMERATOR.fullmatch(merged[-1]):
            merged[-1] = f"{merged[-1]} {part}"
        else:
            merged.append(part)
    # a part must say something: "[1]\n[2]" or " - ." is markup, not a statement
    return [p for p in merged if re.search(r"\w", MARKER.sub("", p))]


def ask_of(question: str) -> str:
    """The sentence of a question that asks (its last one ending in "?", else its last):
    "We run two servers. Which port does D2 listen on?" asks the second. What it names
    is what the answer must be about; the sentences before it set the scene."""
    parts = statements(question)
    asking = [p for p in parts if p.rstrip().endswith("?")]
    return (asking or parts or [question])[-1]


def qualifiers_missing(question: str, text: str) -> list[str]:
    """The names, numbers and code tokens of the question's ask (``ask_of``) that ``text``
    holds nowhere: "which systemd service runs the DHCPv4 server?" is not answered by a
    passage that never names DHCPv4. A lone capital letter ("I") is not one, and a
    compound name the text spells out in words names it (``spelled_out``)."""
    missing = missing_facts(ask_of(question), text)
    return [m for m in missing if not (len(m) == 1 and m.isalpha()) and not spelled_out(m, text)]


_COMPOUND_PART = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|\d+")


def spelled_out(name: str, text: str) -> bool:
    """Whether ``text`` names the compound ``name`` by its parts as words, in order,
    apart or joined: "DefaultServlet" is named by a page headed "Default Servlet
    Reference", "CookieProcessor" by "The Cookie Processor Component" (Tomcat's pages
    say the class name once and the words everywhere else). A name of one part is not a
    compound: only ``missing_facts``' own token rule finds it."""
    parts = _COMPOUND_PART.findall(name) if name.isalnum() else []
    if len(parts) < 2:
        return False
    words = r"[\s_-]*".join(map(re.escape, parts))
    return re.search(rf"(?<![\w-]){words}(?![\w-])", text, re.IGNORECASE) is not None


def _blocks(text: str) -> tuple[list[str], list[str]]:
    """Split Markdown into prose blocks and the bodies of fenced code blocks, at the
    blocks ``_fenced_spans`` finds (the module's one fence rule).

    A fence closes only with the same character, at least as many of them and no info
    string; an answer cut off inside a block (a truncated answer) is code to its end.
    """
    prose: list[str] = []
    code: list[str] = []
    last = 0
    for start, end in _fenced_spans(text):
        prose.append(_lines_between(text, last, start))
        lines = text[start:end].splitlines()
        opening = _FENCE.fullmatch(lines[0])
        closed = (
            len(lines) > 1 and opening and _closes(_FENCE.fullmatch(lines[-1]), opening["fence"])
        )
        code.append("\n".join(lines[1:-1] if closed else lines[1:]))
        last = end
        if not closed:
            return prose, code
    prose.append(_lines_between(text, last, len(text)))
    return prose, code


def _lines_between(text: str, start: int, end: int) -> str:
    """The lines of ``text[start:end]``, joined by newlines; after a block (``start`` > 0)
    without the line break that ends its closing fence."""
    lines = text[start:end].splitlines()
    return "\n".join(lines[1:] if start else lines)


def _closes(found: re.Match[str] | None, fence: str) -> bool:
    """Whether a line (``_FENCE``'s match of it) closes the block ``fence`` opened: the
    same character, at least as many of them, and no info string."""
    return bool(
        found
        and found["fence"][0] == fence[0]
        and len(found["fence"]) >= len(fence)
        and not found["info"].strip()
    )


def _fenced_spans(text: str) -> list[tuple[int, int]]:
    """The character spans of ``text``'s fenced code blocks, fences included, as
    ``_blocks`` reads them (a block cut off by the end of the text runs to its end)."""
    spans: list[tuple[int, int]] = []
    offset, start, fence = 0, 0, ""
    for line in text.splitlines(keepends=True):
        content = line.splitlines()[0]  # without its line break, as _blocks reads it
        found = _FENCE.fullmatch(content)
        if not fence and found:
            start, fence = offset, found["fence"]
        elif fence and _closes(found, fence):
            spans.append((start, offset + len(content)))
            fence = ""
        offset += len(line)
    if fence:
        spans.append((start, len(text)))
    return spans


def _inline_code(block: str) -> tuple[str, list[str]]:
    """Cut the code spans out of a prose block: (the prose, with a space for each; their text).

    CommonMark: a run of N backticks opens a span that the next run of exactly N backticks
    closes; a run with no such partner is literal text. So ``a `b` c`` is one span, and the
    prose between two spans is never taken for code.
    """
    runs = list(_BACKTICKS.finditer(block))
    partner: dict[int, int] = {}  # run -> the next run of the same length, if any
    nearest: dict[int, int] = {}  # length -> the nearest run of that length seen so far
    for later in reversed(range(len(runs))):
        length = len(runs[later].group())
        if length in nearest:
            partner[later] = nearest[length]
        nearest[length] = later
    pieces: list[str] = []
    spans: list[str] = []
    last = index = 0
    while index < len(runs):
        if index not in partner:  # unmatched: literal backticks
            index += 1
            continue
        opener, closer = runs[index], runs[partner[index]]
        pieces.append(block[last : opener.start()])
        spans.append(block[opener.end() : closer.start()])
        last, index = closer.end(), partner[index] + 1
    pieces.append(block[last:])
    return " ".join(pieces), spans


def _found(literal: str, text: str) -> bool:
    """Whether ``literal`` occurs in ``text`` as a whole token, ignoring case."""
    return re.search(_START + re.escape(literal) + _END, text, re.IGNORECASE) is not None


# A quantity written out in prose and abbreviated in a passage: "24 hours" is the 24h of
# a configuration reference, "50 megabytes" its 50M. Abbreviations keep their case, so
# 30m (minutes) never stands for 30 megabytes. Units of time and size only: these are
# the quantities reference pages abbreviate.
_UNIT_ABBREVIATIONS = {
    "second": ("s", "sec"),
    "minute": ("m", "min"),
    "hour": ("h", "hr"),
    "day": ("d",),
    "week": ("w",),
    "byte": ("B",),
    "kilobyte": ("K", "k", "KB", "kB", "KiB"),
    "megabyte": ("M", "MB", "MiB"),
    "gigabyte": ("G", "GB", "GiB"),
}
_QUANTITY = re.compile(
    _START + r"(?P<number>\d+(?:[.,]\d+)*)\s+(?P<unit>" + "|".join(_UNIT_ABBREVIATIONS) + r")s?\b",
    re.IGNORECASE,
)


def _qualified(name: str, context: str) -> bool:
    """Whether ``context`` names ``name`` qualified by a module or object (`CycleError` in
    "exception graphlib.CycleError"): an API reference names a class or function with its
    module where it defines it, and an answer names it the way code calls it. Only names
    that start with a letter: a number after a dot is a decimal's fraction."""
    if not name[:1].isalpha():
        return False
    pattern = r"(?<![\w.])[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*\." + re.escape(name) + _END
    return re.search(pattern, context, re.IGNORECASE) is not None


def _abbreviated(number: str, text: str, context: str) -> bool:
    """Whether ``text`` writes ``number`` with a unit that ``context`` abbreviates after
    the same number ("24 hours" in text, "24h" in context)."""
    for quantity in _QUANTITY.finditer(text):
        if quantity["number"] != number:
            continue
        short = _UNIT_ABBREVIATIONS[quantity["unit"].lower()]
        pattern = _START + re.escape(number) + r" ?(?:" + "|".join(short) + r")" + _END
        if re.search(pattern, context):
            return True
    return False


# A name: letters first, then word characters, inner dots and hyphens ("Lamini",
# `add_test`, `Node.js`, `console.error`, dial-on-demand); a number, an option (`--depth`)
# or a path is none.
_GIVEN_NAME = re.compile(r"[A-Za-z]\w*(?:[.-][A-Za-z_]\w*)*")


def given_by(literal: str, question: str) -> bool:
    """Whether ``literal`` is a name the question itself gave: the product, project,
    command or function it asks about ("Lamini", "git", `add_test()`), which an answer
    repeats and its cited passage need not (the retrieval found the passage for that
    name; a reference page rarely repeats its own title in every paragraph). Only names:
    a number, an option or a path is what an answer asserts, even when the question
    asked about it."""
    return _GIVEN_NAME.fullmatch(literal) is not None and _found(literal, question)


def found_phrase(span: str, text: str) -> bool:
    """Whether a code span of several words occurs as written (any spacing, any case):
    `make install` is not supported by a passage holding `make demo` and "install"."""
    words = span.split()
    pattern = _START + r"\s+".join(re.escape(w) for w in words) + _END
    return re.search(pattern, text, re.IGNORECASE) is not None


_QUOTE_EDGES = " \t\n.,;:!?\"'"


def quote_of(clause: str) -> str:
    """The words a short answer's clause claims to copy: its text without the spacing and
    punctuation around it (an answer ends "... 1997." where the passage says "1997,")."""
    return clause.strip(_QUOTE_EDGES)


_PARAGRAPH = re.compile(r"\n[ \t]*\n")


def claims_with_citations(draft: str) -> list[tuple[str, list[tuple[str, list[int]]]]]:
    """Each statement with its clauses and their markers. A statement without any
    marker takes the markers of the next cited statement of its paragraph: writers (and
    small models) put one citation at the end of a paragraph for all of it. What it says
    is still checked against those passages; a paragraph with no marker cites nothing."""
    out: list[tuple[str, list[tuple[str, list[int]]]]] = []
    for paragraph in _PARAGRAPH.split(draft):
        pending: list[str] = []
        for claim in statements(paragraph):
            clauses = cited_clauses(claim)
            if not any(numbers for _, numbers in clauses):
                pending.append(claim)
                continue
            out += [(p, [(p, clauses[0][1])]) for p in pending]
            out.append((claim, clauses))
            pending = []
        out += [(p, [(p, [])]) for p in pending]
    return out


_LIST_MARK = re.compile(r"^[ \t]*(?:" + _ENUMERATOR.pattern + r"|[-*+])[ \t]+", re.MULTILINE)


def missing_facts(statement: str, context: str) -> list[str]:
    """Numbers, names and code tokens in ``statement`` that occur in ``context`` nowhere.

    From prose: numbers, capitalised words and the words of literals named without
    backticks (``_PROSE_WORD``: `table_info`, `--allow-fs-read`, `/tmp`), except a
    block's first word, and each span in quotation marks as the phrase it is. From code
    (fenced or inline): every token, and an inline span of several words also as the
    phrase it is. Each is looked for in the context as a whole token (see ``_START``),
    ignoring case and thousands separators; line breaks and spacing never matter.
    """
    # a list item's number or bullet is layout, not a fact: "1. Navigate to ..."
    statement = _LIST_MARK.sub("", statement)
    prose, fenced = _blocks(_THOUSANDS.sub("", MARKER.sub("", statement)))
    haystack = _THOUSANDS.sub("", context)
    candidates: list[str] = []
    code = list(fenced)
    phrases: list[str] = []
    quoted: list[str] = []
    for block in prose:
        text, spans = _inline_code(block)
        quoted += [" ".join(q.split()) for q in _QUOTED.findall(text)]
        text = _GLUED_SUFFIX.sub(r"\1 .", text)
        code += spans
        phrases += [" ".join(span.split()) for span in spans if len(span.split()) > 1]
        first = _FIRST_WORD.match(text)
        candidates += _NUMBER.findall(text)
        named = _NAME.findall(text) + _PROSE_TOKEN.findall(text)
        # a capitalised first word is only the sentence's; a literal is one anywhere
        # ("NOT_AUTH rcode is returned" where the passage says NOTAUTH)
        opening = (
            first.group(1) if first and not re.fullmatch(_PROSE_WORD, first.group(1)) else None
        )
        candidates += [w for w in named if w != opening]
    for part in code:
        tokens = (t.rstrip(".:@=-/") for t in _CODE_TOKEN.findall(part))
        candidates += [t for t in tokens if any(c.isalnum() for c in t)]
    said = "\n".join(prose)
    missing = [
        c
        for c in dict.fromkeys(candidates)
        if not (_found(c, haystack) or _qualified(c, haystack) or _abbreviated(c, said, haystack))
    ]
    missing += [q for q in dict.fromkeys(quoted) if q and not found_phrase(q, haystack)]
    if missing:  # a phrase is only news when each of its words was found on its own
        return missing
    return [p for p in dict.fromkeys(phrases) if not found_phrase(p, haystack)]


def swappable_literals(text: str) -> list[str]:
    """The literals of Markdown ``text`` a writer could swap for another of the same kind:
    each inline code span and each line of a fenced block as written, and each number of
    its prose. "`rag ui` starts the server" passes the literal check when the passage
    names `rag ui` for the chat page; which literal fills the role is a reading question
    (graph/checks/readings.py asks it)."""
    prose, fenced = _blocks(MARKER.sub("", text))
    found: list[str] = [line.strip() for block in fenced for line in block.splitlines()]
    for block in prose:
        rest, spans = _inline_code(block)
        found += [" ".join(span.split()) for span in spans]  # a span may wrap a line
        found += _NUMBER.findall(rest)
    return [f for f in dict.fromkeys(found) if any(c.isalnum() for c in f)]


# Documentation extracted from HTML has lost its code formatting, and answers drawn
# from it name literals in plain prose: an upper-case word (PRAGMA, EXCLUSIVE), an
# identifier with "_" (table_info), a flag (-x, --cruft), a dotted, camelCase
# or PascalCase name (gc.pruneExpire, AsyncLocalStorage), a word of three hyphenated
# parts (pre-auto-gc), an absolute path (/tmp). Check 2 looks for each in the passage.
_PROSE_WORD = (
    r"(?:[A-Z][A-Z0-9]+|[A-Za-z][A-Za-z0-9]*_\w+|--?[A-Za-z][\w-]*"
    r"|[a-z]\w+(?:\.[a-z]\w+)+|[a-z]+[A-Z]\w*|[A-Z][a-z0-9]+[A-Z]\w*|[a-z]+(?:-[a-z0-9]+){2,}"
    r"|/[\w.-]*\w(?:/[\w.-]*\w)*)"
)
_PROSE_TOKEN = re.compile(_START + _PROSE_WORD + _END)


_FLAG = re.compile(r"(?<![\w-])--[A-Za-z][\w-]*")


def flags_in(literal: str) -> list[str]:
    """The long flags a literal holds: `--port` in `rag ui [--host H] [--port P]`. A
    passage often names a command's flags only inside the command."""
    return _FLAG.findall(literal)


def literal_kind(literal: str) -> str:
    """A coarse kind, so a literal is weighed against others of its own kind: a flag
    against flags, a path against paths, a number against numbers."""
    if _NUMBER.fullmatch(literal):
        return "number"
    if literal.startswith("-"):
        return "flag"
    if "/" in literal:
        return "path"
    return "command" if len(literal.split()) > 1 else "name"


def blank_out(text: str, literal: str, blank: str = "___") -> str:
    """``text`` with the first occurrence of ``literal`` (a number as a whole token, a
    code span with its backticks) replaced by ``blank``."""
    if _NUMBER.fullmatch(literal):
        return re.sub(r"(?<!\[)" + _START + re.escape(literal) + _END, blank, text, count=1)
    words = r"\s+".join(re.escape(word) for word in literal.split())
    span = re.compile(r"(`+)\s*" + words + r"\s*\1")
    if span.search(text):
        return span.sub(blank, text, count=1)
    return text.replace(literal, blank, 1)


# a line that is a unit of its own: a list item, a table row, a heading, a quote
_LINE_UNIT = re.compile(r"^\s*(?:[-*+] |\d+[.)] |\||#{1,6} |>)")


def sentence_spans(text: str) -> list[tuple[int, int]]:
    """The units of one passage as character spans, in order: each sentence of prose,
    each list item, table row, heading or quote line, and each fenced code block whole.
    What evidence selection picks from and what an answer's support quotes."""
    spans: list[tuple[int, int]] = []
    lines = text.splitlines(keepends=True)
    offset, block_start, fence = 0, None, False

    def prose(start: int, end: int) -> None:
        last = start
        for match in PASSAGE_SENTENCE_END.finditer(text, start, end):
            spans.append((last, match.start()))
            last = match.end()
        spans.append((last, end))

    for line in lines:
        stripped = line.strip()
        if fence or FENCE_OPENING.match(line):  # a code block is one unit, fences included
            if not fence:
                if block_start is not None:
                    prose(block_start, offset)
                block_start, fence = offset, True
            elif FENCE_OPENING.match(line):
                spans.append((block_start, offset + len(line.rstrip("\n"))))
                block_start, fence = None, False
        elif not stripped or _LINE_UNIT.match(line):
            if block_start is not None:
                prose(block_start, offset)
                block_start = None
            if stripped:
                spans.append((offset, offset + len(line.rstrip("\n"))))
        elif block_start is None:
            block_start = offset
        offset += len(line)
    if block_start is not None:
        if fence:
            spans.append((block_start, len(text)))
        else:
            prose(block_start, len(text))
    trimmed = []
    for start, end in spans:
        while start < end and text[start].isspace():
            start += 1
        while end > start and text[end - 1].isspace():
            end -= 1
        if end > start:
            trimmed.append((start, end))
    return trimmed
