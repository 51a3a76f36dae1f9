"""The passages block that opens the generator's and the verifier's prompts."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.messages import SystemMessage

from graph import prompts
from tools.retrieval import Passage
from tools.sanitize import PASSAGE_CLOSE, PASSAGE_OPEN, neutralise, one_line


def context_message(
    passages: Sequence[dict[str, Any]], numbers: Sequence[int] | None = None
) -> SystemMessage:
    """The shared leading block of the generator's and the verifier's prompts.

    The instruction comes first; each passage follows inside delimiters, neutralised
    (tools.sanitize), so a document's text can never pose as a turn or an instruction.
    ``numbers`` keeps the answer's own passage numbers when only some passages are shown.
    """
    numbers = numbers or range(1, len(passages) + 1)
    numbered = "\n\n".join(
        f"[{n}] ({one_line(Passage(**p).location())})\n"
        f"{PASSAGE_OPEN}\n{neutralise(p['text'])}\n{PASSAGE_CLOSE}"
        for n, p in zip(numbers, passages, strict=True)
    )
    return SystemMessage(prompts.CONTEXT.text.format(passages=numbered))
