"""The verifier model's readings of an answer, and how the checks weigh them: its yes to
the question-answer pair, its pick among the passages' literals of the answer's kind,
its own answer to the question, and the generator's second answer (short answers).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from langchain_core.messages import BaseMessage, HumanMessage
from langchain_core.runnables import RunnableConfig

from graph import prompts
from graph.checks.tuning import LETTERS, OWN_ANSWER_TOKENS, WIN_MARGIN
from graph.context import context_message
from tools.answer_check import FirstTokenJudge, SureReply, states, token_overlap
from tools.text import (
    ask_of,
    blank_out,
    flags_in,
    found_phrase,
    literal_kind,
    statements,
    strip_markers,
    swappable_literals,
    tokenize,
)

# An ask for one thing: a name, a setting, a number, a time ("Which setting...", "What is
# the default port?", "How many..."). Not "How do I...", "Why...", "What does X do?":
# there the passages may name several valid ways, each an answer.
_ONE_THING = re.compile(
    r"\W*(?:which|who|whom|whose|when|how\s+(?:many|much|long|often|large|big)|"
    r"what(?!\s+(?:do|does|did|happens?|happened|should|can|could|would|will|must)\b))\b",
    re.IGNORECASE,
)


def asks_for_one(question: str) -> bool:
    """Whether the question's ask (``ask_of``) asks for exactly one thing, so the reading
    question (``literal_choice``) may make the verifier pick one literal. On the demo
    question ("How do I switch the answer generator to an OpenAI-compatible server?") the
    page names two settings, both right; the reading made the verifier pick one and the
    right answer stating the other was shown NOT VERIFIED (issue 70)."""
    return _ONE_THING.match(ask_of(question)) is not None


def question_words_said(question: str, draft: str) -> set[str]:
    """The question's words (stemmed, stopwords left out) that the answer says too: how
    much of the relation asked about an answer states, which ``answer_form`` and
    ``restates`` each weigh."""
    return set(tokenize(strip_markers(draft, set()))) & set(tokenize(question))


def answer_form(question: str, draft: str) -> str:
    """ "phrase" when the answer repeats none of the question's words: a bare name, date
    or value states no relation, so the verifier has to infer from the passage that it
    answers *this* question, and the 1.5B verifier does that less reliably (SQuAD dev:
    76% precision at 0.62 for phrases, 88% for sentences). "sentence" otherwise."""
    return "sentence" if question_words_said(question, draft) else "phrase"


def restates(question: str, draft: str) -> bool:
    """Whether the answer says at least two of the question's words: "The directive that
    changes the file name httpd looks for is AccessFileName" states the relation asked
    about, "RSYSLOG_spoofadr" (one shared word, inside the name) does not. Check 5's
    agreement is weaker evidence for a bare value: the verifier's own reading copies the
    same salient literal whether or not it answers the question (six dev halves,
    2026-11-27: between 0.50 and 0.60, two of four agreeing bare answers were wrong; from
    0.55, none of 13 agreeing restatements)."""
    return len(question_words_said(question, draft)) >= 2


def agreement_of(draft: str, second: str) -> float:
    """How far the second opinion says what the draft says: their token F1 without
    markers; 0 when the second one finds no answer."""
    if prompts.NOT_FOUND in second:
        return 0.0
    return token_overlap(strip_markers(draft, set()), strip_markers(second, set()))


def evidence(passage: dict[str, Any], quotes: Sequence[str]) -> dict[str, Any]:
    """The passage cut to its sentences that hold one of ``quotes``. A short answer is a
    copied phrase; whether it answers the question is decided by the sentence it comes
    from, and the 1.5B verifier judges one sentence better than a paragraph where a
    same-type phrase sits in every other sentence (SQuAD dev, 300 items: ROC AUC
    0.76 -> 0.84).
    A quote running across sentences keeps the whole passage."""
    held = [s for s in statements(passage["text"]) if any(found_phrase(q, s) for q in quotes)]
    return {**passage, "text": " ".join(held)} if held else passage


def _rivals(literal: str, pool: Sequence[str], claimed: Sequence[str]) -> list[str]:
    """The pool's literals of ``literal``'s kind that the answer does not itself state, nor
    hold, nor are held by one it states: `--chunk-size` is part of `--splitter lines
    --chunk-size 40`, and an answer naming three keys has each of them right somewhere."""
    kind = literal_kind(literal)
    return [
        other
        for other in dict.fromkeys(pool)
        if literal_kind(other) == kind
        and not any(found_phrase(other, c) or found_phrase(c, other) for c in claimed)
    ]


def literal_choice(
    judge: FirstTokenJudge,
    question: str,
    answer: str,
    context: BaseMessage,
    passages: Sequence[dict[str, Any]],
    *,
    config: RunnableConfig | None = None,
) -> dict[str, Any] | None:
    """The reading question for the first literal ``answer`` claims (a command, flag,
    path, setting or number the question does not already name) that the shown passages
    could swap for another of its kind: the answer with it left blank, the passages'
    other literals of its kind as lettered options (in alphabetical order, so the
    position says nothing), each option's share of the verifier's first-token
    probability, the option it picks, the literal's own share, its strongest rival, and
    whether the literal is overruled, for not winning by ``WIN_MARGIN``. None when no
    literal has a rival.

    Only the first: it is what the question asks for, and on later ones (a port, a count
    in a subordinate clause) the 1.5B verifier picks worse than on the answer itself
    (docs dev: it picked a right answer's own literal for 36 of 40 first ones, 8 of 26
    later ones)."""
    pool = [literal for p in passages for literal in swappable_literals(p["text"])]
    flags = [other for other in pool if literal_kind(other) == "flag"]
    pool += [  # a flag named only inside a command is a flag's rival too
        flag
        for literal in pool
        for flag in flags_in(literal)
        if not any(found_phrase(flag, other) for other in flags)
    ]
    claimed = swappable_literals(answer)
    for literal in claimed:
        rivals = _rivals(literal, pool, claimed)[: len(LETTERS) - 1]
        if rivals and not found_phrase(literal, question):
            break
    else:
        return None
    options = sorted([literal, *rivals], key=str.casefold)
    letters = tuple(LETTERS[: len(options)])
    ask = prompts.CHOOSE.text.format(
        question=question,
        answer=blank_out(answer, literal),
        options="\n".join(
            f"{letter}. {option}" for letter, option in zip(letters, options, strict=True)
        ),
    )
    shares = judge.read([context, HumanMessage(ask)], letters, config).shares
    weights = [round(shares[letter], 4) for letter in letters]
    share = dict(zip(options, weights, strict=True))
    rival = max((o for o in options if o != literal), key=share.__getitem__)
    return {
        "literal": literal,
        "options": options,
        "shares": weights,
        "picked": max(options, key=share.__getitem__),
        "share": share[literal],
        "rival": rival,
        "overruled": share[literal] < WIN_MARGIN * share[rival],
    }


def own_answer(
    judge: FirstTokenJudge,
    question: str,
    passages: Sequence[dict[str, Any]],
    *,
    config: RunnableConfig | None = None,
) -> SureReply:
    """The verifier's own answer to ``question`` from every passage the generator read: a
    reading that has not seen the draft. With how sure it was of its first word
    (``sure``). The passages come in the generator's order, in the generator's very
    context message, so the model reads only this question's few tokens and takes the
    passages from the generator's saved state (tools/models/kv_states.py); in reverse
    order (v1) it read them all again, 400 tokens and 5 s an answer on two cores, for
    the same outcomes on dev (docs_corpus/performance.md)."""
    context = context_message(passages)
    ask = prompts.OWN_ANSWER.text.format(question=question, not_found=prompts.NOT_FOUND)
    return judge.reply(
        [context, HumanMessage(ask)],
        max_tokens=OWN_ANSWER_TOKENS,
        what="the verifier's own answer",
        config=config,
    )


def sure_enough(own: SureReply, needed: float) -> bool:
    """Whether the own answer was read sure enough to count: at least ``needed`` on its
    first word. A reading that gives no probability is not sure of anything, unless
    nothing is ``needed`` (0 turns the requirement off)."""
    return needed == 0 or (own.sure is not None and own.sure >= needed)


def own_answer_agrees(question: str, answer: str, own: str) -> bool:
    """Whether ``answer`` states the verifier's ``own`` answer (``states``: its words, in
    order). An own answer that finds nothing, or only repeats the question's words,
    agrees with nothing."""
    if prompts.NOT_FOUND in own:
        return False
    own = strip_markers(own, set())
    return states(strip_markers(answer, set()), own) and not states(question, own)
