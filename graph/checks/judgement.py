"""The label on an answer, built once: its outcome, each statement's support and the
reason, as one ``Judgement`` (graph/results.py).

``finalize`` calls ``judge`` and puts the result in the answer object; the CLI, the chat
page, the server's output, evaluation and tracing read it and never work the label out
again (it used to be worked out three times, and "the documents do not say" recognised
by a string prefix). The outcome follows from the statements:

- VERIFIED: the checks confirmed the answer, and every statement that carries a fact has
  a quote that states it (graph/checks/support.py; the checks refuse it otherwise).
- NOT VERIFIED: shown, naming the statement without support, or what else failed.
- THE DOCUMENTS DO NOT SAY: no statement has a quote that states it, or no answer was
  found; the draft, if one was written, is kept as ``withheld`` and never shown.
- ABSTAINED: no answer for another reason (a failed step, a refused topic, an obeyed
  instruction, a not-verified answer withheld with ``on_unverified = "abstain"``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from graph import prompts
from graph.checks.explain import closest_sentence, quoted_statement, reason
from graph.results import LABELS, Judgement, Outcome, PassageRecord, StatementSupport


def _unsupported(statements: Sequence[StatementSupport]) -> list[str]:
    return [s["statement"] for s in statements if s["facts"] and not s["supported"]]


def _unstated_reason(
    statement: StatementSupport, passages: Sequence[PassageRecord], question: str
) -> str:
    """Which statement nothing states, and what the nearest passage says instead."""
    said = quoted_statement(statement["statement"])
    near = closest_sentence(statement["statement"], passages, statement["cited"])
    if near is None:
        return f"No passage the answer was written from states {said}."
    where, sentence = near
    return f'No passage the answer was written from states {said}; {where} says: "{sentence}"'


def judge(
    *,
    question: str,
    draft: str,
    verdict: dict[str, Any],
    passages: Sequence[PassageRecord],
    stopped: str = "",
    unsaid: bool = False,
    withhold_unverified: bool = False,
) -> tuple[Judgement, str]:
    """The judgement on ``draft`` and the text shown as the answer (the draft, or the
    message saying why there is none). ``stopped``: the message of a step that ended the
    question before anything was checked (``unsaid``: because the documents hold no
    answer). ``passages`` are numbered as ``draft`` cites them."""
    statements: list[StatementSupport] = list(verdict.get("statement_support") or [])
    unsupported = _unsupported(statements)
    written = draft if draft and prompts.NOT_FOUND not in draft else None
    why: str | None = None
    outcome: Outcome
    shown = stopped
    if stopped:
        outcome = "not_in_documents" if unsaid else "abstained"
    elif verdict.get("obeyed_passage"):
        outcome, shown = "abstained", prompts.ABSTAIN_OBEYED
    elif statements and verdict.get("documents_say") is False:
        outcome, shown = "not_in_documents", prompts.ABSTAIN_NOT_STATED
        why = _unstated_reason(statements[0], passages, question)
    elif verdict.get("grounded"):
        outcome, shown = "verified", draft
    else:
        first = (
            next(s for s in statements if s["statement"] in unsupported) if unsupported else None
        )
        if first is not None and not verdict.get("missing") and not verdict.get("error"):
            why = _unstated_reason(first, passages, question)
        else:
            why = reason(verdict, passages)
        outcome, shown = "not_verified", draft
        if withhold_unverified:
            outcome, shown = "abstained", prompts.ABSTAIN_UNVERIFIED
    judgement = Judgement(
        outcome=outcome,
        label=LABELS[outcome],
        statements=statements,  # of the withheld draft too, numbered as it cites
        unsupported=unsupported if outcome == "not_verified" else [],
        reason=why,
        withheld=written if shown != draft else None,
    )
    return judgement, shown
