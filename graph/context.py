"""The passages block that opens the generator's and the verifier's prompts."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from langchain_core.messages import SystemMessage

from graph import prompts
from tools.retrieval.hybrid import Passage
from tools.sanitize import PASSAGE_CLOSE, PASSAGE_OPEN, neutralise, one_line

# A passage's header: its number and location, then the opening delimiter, which no
# passage text can hold (tools.sanitize), so a document cannot fake a header.
_HEADER = "[{n}] ({location})\n" + PASSAGE_OPEN
_HEADER_LINE = re.compile(
    "^" + re.escape(_HEADER).replace(r"\{n\}", r"(\d+)").replace(r"\{location\}", r"(.*)") + "$",
    re.MULTILINE,
)


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
        _HEADER.format(n=n, location=header_location(p))
        + f"\n{neutralise(p['text'])}\n{PASSAGE_CLOSE}"
        for n, p in zip(numbers, passages, strict=True)
    )
    return SystemMessage(prompts.CONTEXT.text.format(passages=numbered))


def header_location(passage: dict[str, Any]) -> str:
    """Where a passage comes from, as its header line in the prompt names it."""
    return one_line(Passage(**passage).location())


def numbers_by_location(prompt: str) -> dict[str, int]:
    """The number each passage location has in a prompt ``context_message`` wrote. The
    answer renumbers passages in the order it cites them, so the generator's [3] can be
    the answer's [1], and a reader comparing the two needs to know."""
    return {match[2]: int(match[1]) for match in _HEADER_LINE.finditer(prompt)}
