"""The answer-checking page lists the pipeline exactly as graph/checks/ runs it."""

from __future__ import annotations

import re
from pathlib import Path

from graph.checks.pipeline import CHECKS
from graph.checks.repairs import ATTEMPTS, CITING, WRITTEN

PAGE = Path(__file__).parents[2] / "docs_corpus" / "answering-and-verification.md"


def documented() -> list[list[str]]:
    """The names of each bulleted list under "The pipeline, in order", in order."""
    section = PAGE.read_text().split("## The pipeline, in order", 1)[1].split("\n## ", 1)[0]
    lists: list[list[str]] = []
    previous_was_item = False
    for line in section.splitlines():
        item = re.match(r"- `([a-z_]+)`", line)
        if item:
            if not previous_was_item:
                lists.append([])
            lists[-1].append(item[1])
        previous_was_item = bool(item) or (previous_was_item and line.startswith("  "))
    return lists


def test_the_page_lists_every_repair_and_check_in_the_code_order():
    in_code = [
        [r.__name__ for r in WRITTEN],
        [a.name for a in ATTEMPTS],
        [r.__name__ for r in CITING],
        [c.name for c in CHECKS],
    ]
    assert documented() == in_code


def test_each_unit_says_why_it_exists():
    for unit in [*WRITTEN, *CITING, *(c.run for c in CHECKS)]:
        assert unit.__doc__ and len(unit.__doc__.split()) >= 8, unit
