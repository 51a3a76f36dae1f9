"""Why an answer is not verified, in one sentence a user can act on.

One function writes it (``reason``), from the answer object's verdict and passages:
``finalize`` puts it in the answer object, and the CLI, the chat page and the server's
output all show that sentence. It names the statement and the source (file and line,
or page) and what the source says instead; never a check's number, a reading, a
confidence or a threshold: those are in ``verdict`` (``rag ask --json`` or
``--verbose``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from graph import prompts
from graph.checks.citations import FOLLOWS, NO_CITATION, NOT_QUOTED
from graph.checks.support import line_at, plain_statement, where
from graph.results import PassageRecord
from tools.text import cited_clauses, found_phrase, sentence_spans, strip_markers, tokenize

CHECK_THE_QUOTES = "Read the quoted lines before relying on it."
# a statement quoted in a reason is cut to this many characters
STATEMENT_CHARS = 90


def quoted_statement(statement: str) -> str:
    """A statement as a reason quotes it: without markers, in quotes, cut when long."""
    text = plain_statement(statement)
    return f'"{text}"' if len(text) <= STATEMENT_CHARS else f'"{text[: STATEMENT_CHARS - 1]}…"'


def closest_sentence(
    statement: str, passages: Sequence[PassageRecord], first: Sequence[int] = ()
) -> tuple[str, str] | None:
    """What the passages say nearest ``statement``: the sentence sharing the most of its
    words, of the passages ``first`` (the cited ones) if any shares one, else of any; as
    (``[n] (file, line L)``, the sentence). None when no sentence shares a word."""
    words = set(tokenize(strip_markers(statement, set())))
    best: tuple[int, int, int] | None = None  # (shared, n, start) of the best sentence
    ends: dict[tuple[int, int], int] = {}
    for group in ([n for n in first if 1 <= n <= len(passages)], range(1, len(passages) + 1)):
        for n in group:
            text = passages[n - 1]["text"]
            for start, end in sentence_spans(text):
                shared = len(words & set(tokenize(text[start:end])))
                if shared and (best is None or shared > best[0]):
                    best, ends[(n, start)] = (shared, n, start), end
        if best is not None:
            break
    if best is None:
        return None
    _, n, start = best
    passage = passages[n - 1]
    sentence = " ".join(passage["text"][start : ends[(n, start)]].split())
    if len(sentence) > 2 * STATEMENT_CHARS:
        sentence = sentence[: 2 * STATEMENT_CHARS - 1] + "…"
    return f"[{n}] ({where(passage, line_at(passage, start))})", sentence


def _source(n: int, passages: Sequence[PassageRecord], literal: str = "") -> str:
    """``[n] (file, line L)``: the line where ``literal`` is, when the passage's text is
    its file's lines; else the passage's own range."""
    if not 1 <= n <= len(passages):
        return f"[{n}]"
    passage = passages[n - 1]
    at = passage["text"].casefold().find(literal.casefold()) if literal else -1
    return f"[{n}] ({where(passage, line_at(passage, at) if at >= 0 else None)})"


def _cited(statement: str) -> list[int]:
    return [n for _, numbers in cited_clauses(statement) for n in numbers]


def _holding(literal: str, passages: Sequence[PassageRecord], first: Sequence[int]) -> int | None:
    """The passage (of ``first``, then any) whose text holds ``literal``."""
    order = [*first, *(n for n in range(1, len(passages) + 1) if n not in first)]
    for n in order:
        if 1 <= n <= len(passages) and found_phrase(literal, passages[n - 1]["text"]):
            return n
    return None


def _unsupported(verdict: dict[str, Any], passages: Sequence[PassageRecord]) -> str:
    statement, gaps = next(iter((verdict.get("missing") or {}).items()))
    said = quoted_statement(statement)
    cited = [n for n in _cited(statement) if 1 <= n <= len(passages)]
    if NO_CITATION in gaps and not cited:
        return f"{said} cites no source, and none of the sources was found to say it."
    if any(g.startswith(FOLLOWS) for g in gaps):
        return f"{said} follows an instruction written inside a source, not its content."
    source = _source(cited[0], passages) if cited else "its source"
    if NOT_QUOTED in gaps:
        return f"{said} is not worded as {source} words it."
    literals = [g for g in gaps if g not in (NO_CITATION, NOT_QUOTED)]
    names = " or ".join(literals[:3])
    near = closest_sentence(statement, passages, cited)
    instead = (
        f' It says: "{near[1]}"' if near and cited and near[0].startswith(f"[{cited[0]}]") else ""
    )
    return f"{said} names {names}, which {source} does not name.{instead}"


def _overruled(verdict: dict[str, Any], passages: Sequence[PassageRecord]) -> str:
    choice = verdict["literal_choice"]
    literal, picked, rival = choice["literal"], choice["picked"], choice["rival"]
    cited = sorted(verdict.get("cited") or [])
    other = picked if picked != literal else rival
    n = _holding(other, passages, cited)
    source = _source(n, passages, other) if n else "the sources"
    if picked != literal:
        return (
            f"{source} names {other} where the answer says {literal}, and the check read "
            f"{other} as what the question asks for."
        )
    return (
        f"{source} names both {literal} and {other}, and the check could not tell which "
        f"the question asks for."
    )


def _sources(verdict: dict[str, Any], passages: Sequence[PassageRecord]) -> str:
    cited = [n for n in sorted(verdict.get("cited") or []) if 1 <= n <= len(passages)]
    return " and ".join(_source(n, passages) for n in cited[:2]) or "the sources"


def reason(verdict: dict[str, Any], passages: Sequence[PassageRecord]) -> str:
    """Why ``verdict`` is not verified, naming the statement and the source."""
    if verdict.get("error"):
        message = re.sub(r"^verifier failed: ", "", str(verdict["error"]))
        return f"The answer could not be checked: the checking model failed ({message})."
    if verdict.get("missing"):
        return _unsupported(verdict, passages)
    if verdict.get("unnamed"):
        names = ", ".join(verdict["unnamed"][:3])
        return (
            f"The question asks about {names}, which {_sources(verdict, passages)} never "
            f"names: the answer may be about something else."
        )
    for result in verdict.get("checks") or []:  # a check that says so itself (its Finding)
        if not result["passed"] and result["facts"].get("reason"):
            return str(result["facts"]["reason"])
    opinion = verdict.get("second_opinion")
    if opinion and "error" in opinion:
        return f"The answer could not be checked a second time ({opinion['error']})."
    if opinion:
        again = strip_markers(opinion.get("answer", ""), set()).strip()
        if prompts.NOT_FOUND in again:
            return "Asked again with the sources in another order, the model found no answer."
        return f'Asked again with the sources in another order, the model answered "{again}".'
    choice = verdict.get("literal_choice")
    if choice and choice["overruled"]:
        return _overruled(verdict, passages)
    sources = _sources(verdict, passages)
    own = verdict.get("own_answer")
    if own and not own.get("found", True):
        return (
            f"The checking model could not confirm that {sources} answers the question, "
            f"and asked the question itself, it found no answer in the sources."
        )
    if own and not own["agrees"]:
        said = strip_markers(own["answer"], set()).strip()
        return (
            f"The checking model could not confirm that {sources} states this answer; "
            f'asked the question itself, it answered "{said}".'
        )
    if own:
        return f"The checking model gave the same answer from {sources}, but was not sure of it."
    if verdict.get("copied"):
        return (
            f"The answer copies words of {sources}, but the checking model could not "
            f"confirm they answer the question."
        )
    return f"The checking model could not confirm that {sources} states this answer."


def not_verified(judgement: dict[str, Any]) -> str:
    """What a user reads after the NOT VERIFIED label, on every surface: the judgement's
    ``reason`` and what to do."""
    return f"{judgement.get('reason') or ''} {CHECK_THE_QUOTES}".strip()
