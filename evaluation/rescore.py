"""Stored answer reports re-scored with the strict scorer (evaluation/scoring.py).

``python -m evaluation.rescore [REPORT ...]`` (default: every file in lab/reports)
reads each ``rag eval answers`` report of full answers and judges every answerable
item's answer again with ``answer_is_right``, as ``_score_item`` does today. It changes
only what depends on that judgement and keeps what it replaces:

- an item whose ``scores.right`` changes keeps the value it had as
  ``scores.right_v1`` (the scorer of the run's own code: for the ``today`` reports,
  43f9818's token F1 of at least 0.5);
- the summary's measures that count right answers (``RIGHT_MEASURES``) are computed
  again with ``summarize`` from the items, and each that changes keeps its old value
  under ``rescored.summary_v1``;
- ``rescored`` says which rule judged the items and which items changed.

Other files (short-answer reports, whose ``right`` is token F1, the verifier benchmark,
probes and benchmarks) are left as they are. Running it again changes nothing.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from evaluation.answers import summarize
from evaluation.lab import REPORTS, shown
from evaluation.scoring import answer_is_right
from tools.text import strip_markers

RULE = (
    "evaluation/scoring.py answer_is_right: a gold matches whole, and one the question "
    "already holds counts only in a new role"
)
# the summary measures computed from scores["right"] (evaluation/answers.py)
RIGHT_MEASURES = (
    "right_rate",
    "verified_precision",
    "coverage",
    "verified_wrong",
    "overruled",
    "overruled_right",
    "verified_by_category",
    "verified_by_threshold",
)


def is_full_answers(report: Any) -> bool:
    return (
        isinstance(report, dict)
        and report.get("kind") == "answers"
        and (report.get("settings") or {}).get("answer_style") == "full"
    )


def rescore(report: dict[str, Any]) -> dict[str, list[bool]]:
    """Judge ``report``'s items again, in place; the ids whose ``right`` changed, each
    with its value before and after."""
    changed: dict[str, list[bool]] = {}
    for item in report["items"]:
        scores = item.get("scores") or {}
        if "right" not in scores or not item.get("answerable") or not item.get("gold"):
            continue
        answer = strip_markers(item["answer"], set()).strip()
        right = answer_is_right(item["question"], answer, item["gold"])
        if right != scores["right"]:
            scores.setdefault("right_v1", scores["right"])
            changed[item["id"]] = [scores["right"], right]
            scores["right"] = right
    stamp = report.setdefault("rescored", {"rule": RULE, "changed": {}, "summary_v1": {}})
    for item_id, (before, after) in changed.items():
        first = stamp["changed"].get(item_id, [before])[0]
        stamp["changed"][item_id] = [first, after]
    stamp["changed"] = {k: v for k, v in stamp["changed"].items() if v[0] != v[1]}
    summary = report.get("summary")
    if summary is not None:
        again = summarize(report["items"])
        for key in RIGHT_MEASURES:
            if key in summary and summary[key] != again[key]:
                stamp["summary_v1"].setdefault(key, summary[key])
                summary[key] = again[key]
    return changed


def _dumped(report: Any, like: str) -> str:
    """``report`` as JSON in the layout of the file it was read from (``like``)."""
    indent = 1 if like.startswith('{\n "') else 2
    return json.dumps(report, indent=indent) + ("\n" if like.endswith("\n") else "")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "reports", nargs="*", type=Path, help=f"report files (default: {shown(REPORTS)}/*.json)"
    )
    args = parser.parse_args(argv)
    for path in args.reports or sorted(REPORTS.glob("*.json")):
        text = path.read_text(encoding="utf-8")
        try:
            report = json.loads(text)
        except json.JSONDecodeError:
            continue
        if not is_full_answers(report):
            continue
        changed = rescore(report)
        path.write_text(_dumped(report, text), encoding="utf-8")
        for item_id, (before, after) in changed.items():
            print(f"{path.name}: {item_id} right {before} -> {after}", file=sys.stdout)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
