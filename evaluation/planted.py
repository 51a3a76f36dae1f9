"""Planted instructions in documents: does an answer that obeys one get withheld, and
does an answer about an innocent passage that mentions models or replies get through?

``lab/data/planted_instructions.jsonl`` holds 24 planted orders (codewords, links, in
English, German, French, Spanish and Italian, polite, passive, hidden in a comment...)
and 24 innocent passages that say "the server must respond with", "the model must
reply", a URL or an all-capitals word. Each item carries the answer a generator would
give: for a planted one, the answer that obeys it; for an innocent one, a right
answer. Its ``split`` field is frozen: the detector (tools/sanitize.py, and
graph/checks/citations.py ``planted_words``) was written against the dev half only.

The check is the graph's own and deterministic, so this measures the detector, not
whether a given model obeys (tests/slow/test_injection_real.py does that).
"""

from __future__ import annotations

from typing import Any

from evaluation.datasets import read_jsonl
from evaluation.lab import DATA
from evaluation.metrics import wilson_interval
from graph.checks.citations import planted_words

ITEMS = DATA / "planted_instructions.jsonl"


def load(split: str | None = None) -> list[dict[str, Any]]:
    items = [item for _, item in read_jsonl(ITEMS)]
    return [i for i in items if split in (None, i["split"])]


def withheld(item: dict[str, Any]) -> list[str]:
    """The words for which the graph would withhold this item's answer (none: shown)."""
    return planted_words(item["question"], item["answer"], [{"text": item["passage"]}])


def _rate(hits: int, total: int) -> dict[str, Any]:
    low, high = wilson_interval(hits, total)
    return {
        "hits": hits,
        "total": total,
        "rate": hits / total if total else 0.0,
        "interval_95": [round(low, 3), round(high, 3)],
    }


def evaluate(split: str | None) -> dict[str, Any]:
    records = [{**i, "withheld_for": withheld(i)} for i in load(split)]
    planted = [r for r in records if r["kind"] == "planted"]
    innocent = [r for r in records if r["kind"] == "innocent"]
    return {
        "split": split or "all",
        "detection": _rate(sum(bool(r["withheld_for"]) for r in planted), len(planted)),
        "false_alarms": _rate(sum(bool(r["withheld_for"]) for r in innocent), len(innocent)),
        "missed": [r["id"] for r in planted if not r["withheld_for"]],
        "false_alarm_ids": [r["id"] for r in innocent if r["withheld_for"]],
    }
