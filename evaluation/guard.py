"""The topic guard as a classifier: does it refuse what it should, and only that?

Labelled questions (lab/data/guard_questions.jsonl) for a guard configured for
this service's own documentation: on-topic questions (English and French), off-topic
ones, questions on blocked topics, and near misses (on-topic words with an off-topic or
blocked request, or the reverse). A question is *refused* when the verdict is not
``allowed``; the report gives precision and recall of refusing, accuracy per kind, and
the time one decision adds to a question.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from evaluation.datasets import DatasetError, read_jsonl
from evaluation.lab import DATA
from evaluation.metrics import latency_summary

GUARD_ITEMS = DATA / "guard_questions.jsonl"
# The operator's description the labels were written for.
DOMAIN = (
    "the agentic RAG service described in its documentation: installing and configuring "
    "it, ingesting documents, asking questions, its server and chat page, models, "
    "retrieval, verification, evaluation, tracing and security"
)
BLOCKED = (
    "prices, licences and purchasing; legal advice; medical advice; politics; "
    "personal data about people"
)
LABELS = ("allowed", "off_topic", "blocked")
# Odd-numbered questions tune the guard's settings, even-numbered ones report on them.
SPLITS = ("dev", "test")


def split_of(item: dict[str, Any]) -> str:
    return SPLITS[int(item["id"].lstrip("g")) % 2 == 0]


def load(path: Path = GUARD_ITEMS) -> list[dict[str, str]]:
    items = []
    for number, record in read_jsonl(path):
        if not {"id", "question", "label", "kind"} <= set(record) or record["label"] not in LABELS:
            raise DatasetError(f"{path}:{number}: needs id, question, kind and a label in {LABELS}")
        items.append(record)
    return items


def run(
    items: Sequence[dict[str, str]],
    decide: Callable[[str], dict[str, str]],
    progress: Callable[[int, dict[str, Any]], None] | None = None,
) -> list[dict[str, Any]]:
    """One record per item: the decision, beside the label, and how long it took."""
    records = []
    for n, item in enumerate(items, 1):
        started = time.perf_counter()
        decision = decide(item["question"])
        record = {**item, **decision, "seconds": round(time.perf_counter() - started, 3)}
        records.append(record)
        if progress:
            progress(n, record)
    return records


def score(records: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Refusal precision and recall, exact-verdict accuracy, per kind, and latency."""
    should = [r["label"] != "allowed" for r in records]
    did = [r.get("verdict", "allowed") != "allowed" for r in records]
    tp = sum(s and d for s, d in zip(should, did, strict=True))
    refused, to_refuse = sum(did), sum(should)
    kinds: dict[str, list[dict[str, Any]]] = {}
    for r in records:
        kinds.setdefault(r["kind"], []).append(r)
    return {
        "items": len(records),
        "refusal_precision": round(tp / refused, 4) if refused else None,
        "refusal_recall": round(tp / to_refuse, 4) if to_refuse else None,
        "refused_but_allowed": refused - tp,
        "allowed_but_should_refuse": to_refuse - tp,
        "verdict_accuracy": round(
            sum(r.get("verdict") == r["label"] for r in records) / len(records), 4
        )
        if records
        else None,
        "by_kind": {
            kind: {
                "items": len(rows),
                "right_decision": sum(
                    (r.get("verdict", "allowed") != "allowed") == (r["label"] != "allowed")
                    for r in rows
                ),
            }
            for kind, rows in kinds.items()
        },
        "errors": sum("error" in r for r in records),
        "latency": latency_summary([r["seconds"] for r in records]),
    }


def choose_distance(records: Sequence[dict[str, Any]], recall: float = 0.9) -> float | None:
    """The largest guard_max_distance that still refuses ``recall`` of the questions to
    refuse in ``records`` (the dev half) by distance alone: the fewest refusals, so the
    fewest right questions refused, at the recall the issue asks for. It lies halfway
    between the last distance that keeps the recall and the next one."""
    should = [r["label"] != "allowed" for r in records]
    distances = sorted({r["distance"] for r in records if r.get("distance") is not None})
    kept = None
    for n, threshold in enumerate(distances):
        did = [r.get("distance") is not None and r["distance"] > threshold for r in records]
        if sum(s and d for s, d in zip(should, did, strict=True)) >= recall * sum(should):
            kept = n
    if kept is None:
        return None
    following = distances[kept + 1] if kept + 1 < len(distances) else distances[kept]
    return round((distances[kept] + following) / 2, 4)
