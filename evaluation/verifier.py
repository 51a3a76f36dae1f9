"""The verifier benchmark: does "verified" mean right?

Labelled items (question, passages, answer, right/wrong, category) from two sources:

- SQuAD 2.0 dev: the gold answer with its paragraph (right); another question's gold
  answer from the same paragraph, of the same type (a year for a year, a number for a
  number, a name for a name) (wrong: ``same_type_span``); the plausible answer of an
  unanswerable question (wrong: ``plausible_unanswerable``).
- docs_corpus: hand-written pairs about the product (lab/data/verifier_docs.jsonl),
  each a right answer and a subtly wrong twin (wrong flag, default, number, path,
  merged facts, wrong citation).

Splits are frozen in files (evaluation/splits.py: SQuAD by article, docs pairs by the
passage text they quote), so an article or a passage never lands in both and no seed
moves an item across; tune ``verify_threshold`` and
``verify_threshold_phrase`` (one threshold per answer form, graph.checks.readings.answer_form)
on ``dev`` and report on ``test``, never the reverse.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from evaluation.datasets import DatasetError, read_jsonl
from evaluation.lab import DATA
from evaluation.metrics import wilson_interval
from evaluation.splits import SPLITS, Split, excluded_from_test, side_of
from graph.checks.readings import answer_form

DOCS_ITEMS = DATA / "verifier_docs.jsonl"


@dataclass(frozen=True)
class VerifierItem:
    id: str
    source: str  # "squad" or "docs"
    category: str
    question: str
    passages: tuple[dict[str, str], ...]  # {"source", "text"}
    answer: str  # with [n] markers, as the generator writes it
    right: bool
    group: str  # items of one group share a split


# --- SQuAD ---------------------------------------------------------------------------
_YEAR = re.compile(r"^(1[0-9]{3}|20[0-9]{2})$")
_MONTHS = "january february march april may june july august september october november december"
_NUMBER = re.compile(r"^[\d.,%$ ]+(\w+)?$")


def answer_type(text: str) -> str:
    """A coarse type, so a wrong answer has the shape of the right one."""
    words = text.strip().split()
    if not words:
        return "other"
    if _YEAR.match(text.strip()) or any(w.lower().strip(",") in _MONTHS.split() for w in words):
        return "date"
    if any(ch.isdigit() for ch in text) and _NUMBER.match(text.strip()):
        return "number"
    if all(w[:1].isupper() for w in words if w.lower() not in ("of", "the", "and", "de")):
        return "name"
    return "phrase"


def squad_items(path: Path, *, per_split: int, seed: int) -> list[VerifierItem]:
    """Up to ``per_split`` items per split: half right, a quarter of each wrong kind,
    sampled with ``seed`` inside each side of the frozen article split."""
    try:
        articles = json.loads(path.read_text(encoding="utf-8"))["data"]
    except (OSError, ValueError, KeyError) as exc:
        raise DatasetError(f"{path}: not a readable SQuAD file ({exc})") from None
    pools: dict[tuple[Split, str], list[VerifierItem]] = {}
    burned = excluded_from_test("squad")
    for article in articles:
        group = article.get("title", "")
        split = side_of("squad", group)
        for p, paragraph in enumerate(article["paragraphs"]):
            context = paragraph["context"]
            passages = ({"source": f"{group}#{p}", "text": context},)
            golds = [
                (qa, qa["answers"][0]["text"])
                for qa in paragraph["qas"]
                if not qa.get("is_impossible") and qa.get("answers")
            ]
            for qa in paragraph["qas"]:
                if split == "test" and qa["id"] in burned:
                    continue
                if qa.get("is_impossible"):
                    plausible = (qa.get("plausible_answers") or [{}])[0].get("text")
                    if plausible:
                        kind, answer, right = "plausible_unanswerable", plausible, False
                    else:
                        continue
                else:
                    gold = qa["answers"][0]["text"]
                    pool_key = (split, "right")
                    pools.setdefault(pool_key, []).append(
                        _squad_item(qa, "right_answer", passages, gold, True, group)
                    )
                    others = [
                        text
                        for other, text in golds
                        if other is not qa
                        and answer_type(text) == answer_type(gold)
                        and not set(text.lower().split())
                        & {a["text"].lower() for a in qa["answers"]}
                        and all(
                            text.lower() not in a["text"].lower()
                            and a["text"].lower() not in text.lower()
                            for a in qa["answers"]
                        )
                    ]
                    if not others:
                        continue
                    kind, answer, right = "same_type_span", others[0], False
                pools.setdefault((split, kind), []).append(
                    _squad_item(qa, kind, passages, answer, right, group)
                )
    rng = random.Random(seed)
    items: list[VerifierItem] = []
    for split in SPLITS:
        for kind, share in (
            ("right", 2),
            ("same_type_span", 4),
            ("plausible_unanswerable", 4),
        ):
            pool = pools.get((split, kind), [])
            items += rng.sample(pool, min(len(pool), per_split // share))
    return items


def _squad_item(
    qa: dict[str, Any],
    kind: str,
    passages: tuple[dict[str, str], ...],
    answer: str,
    right: bool,
    group: str,
) -> VerifierItem:
    return VerifierItem(
        id=f"squad-{qa['id']}-{kind}",
        source="squad",
        category=kind,
        question=qa["question"],
        passages=passages,
        answer=f"{answer} [1]",
        right=right,
        group=group,
    )


# --- docs_corpus -----------------------------------------------------------------------
DOCS_FIELDS = ("id", "question", "passages", "answer", "label", "category", "pair")


def docs_items(path: Path = DOCS_ITEMS) -> list[VerifierItem]:
    items = []
    for number, record in read_jsonl(path):
        absent = [f for f in DOCS_FIELDS if f not in record]
        if absent or record["label"] not in ("right", "wrong"):
            raise DatasetError(f"{path}:{number}: needs {DOCS_FIELDS}, label right|wrong")
        items.append(
            VerifierItem(
                id=record["id"],
                source="docs",
                category=record["category"],
                question=record["question"],
                passages=tuple(record["passages"]),
                answer=record["answer"],
                right=record["label"] == "right",
                group=record["pair"],
            )
        )
    return items


def load_items(
    squad: Path | None, *, split: Split, seed: int = 0, squad_per_split: int = 100
) -> list[VerifierItem]:
    """The benchmark's items of ``split`` (the frozen split files: evaluation/splits.py):
    docs_corpus pairs, and SQuAD when given. ``seed`` only samples SQuAD inside a side."""
    items = [i for i in docs_items() if side_of("verifier_docs", i.group) == split]
    if squad is not None:
        items += [
            i
            for i in squad_items(squad, per_split=squad_per_split, seed=seed)
            if side_of("squad", i.group) == split
        ]
    return items


# --- scoring ---------------------------------------------------------------------------
def roc_auc(scores: Sequence[float], labels: Sequence[bool]) -> float | None:
    """Probability a right item scores above a wrong one (ties count half)."""
    pos = [s for s, y in zip(scores, labels, strict=True) if y]
    neg = [s for s, y in zip(scores, labels, strict=True) if not y]
    if not pos or not neg:
        return None
    wins = sum((p > n) + 0.5 * (p == n) for p in pos for n in neg)
    return round(wins / (len(pos) * len(neg)), 4)


Thresholds = dict[str, float]  # per answer form: {"sentence": ..., "phrase": ...}
FORMS = ("sentence", "phrase")


def classify(records: Sequence[dict[str, Any]], thresholds: Thresholds) -> dict[str, Any]:
    """Precision and recall of the verified label, accuracy, AUC, confusion matrix."""
    tp = fp = fn = tn = 0
    for r in records:
        verified = r["confidence"] is not None and r["confidence"] >= thresholds[r["form"]]
        if verified and r["right"]:
            tp += 1
        elif verified:
            fp += 1
        elif r["right"]:
            fn += 1
        else:
            tn += 1
    n = len(records)
    scored = [r for r in records if r["confidence"] is not None]
    return {
        "items": n,
        "right": tp + fn,
        "precision": round(tp / (tp + fp), 4) if tp + fp else None,
        "recall": round(tp / (tp + fn), 4) if tp + fn else None,
        "accuracy": round((tp + tn) / n, 4) if n else None,
        "auc": roc_auc([r["confidence"] for r in scored], [r["right"] for r in scored]),
        "confusion": {
            "verified_right": tp,
            "verified_wrong": fp,
            "rejected_right": fn,
            "rejected_wrong": tn,
        },
    }


def report(records: Sequence[dict[str, Any]], thresholds: Thresholds) -> dict[str, Any]:
    """Overall, per source, per answer form and per category."""
    groups: dict[str, list[dict[str, Any]]] = {"all": list(records)}
    for r in records:
        groups.setdefault(r["source"], []).append(r)
        groups.setdefault(f"{r['source']}/{r['form']}", []).append(r)
        groups.setdefault(f"{r['source']}/{r['category']}", []).append(r)
    return {
        "thresholds": thresholds,
        "groups": {k: classify(v, thresholds) for k, v in groups.items()},
    }


# Precision the verified label must reach on the dev split, per source.
TARGETS = {"docs": 0.95, "squad": 0.95}


def precision_floor(right: int, verified: int, z: float = 1.96) -> float:
    """The lower end of the 95% Wilson interval of ``right / verified``: what precision
    the label can be trusted to keep on items it has not seen. 14 right of 14 and 31 of
    32 both look like 95% or more; the second is the surer (0.84 against 0.78)."""
    return wilson_interval(right, verified, z)[0] if verified else 0.0


def choose_thresholds(
    records: Sequence[dict[str, Any]], targets: dict[str, float] = TARGETS
) -> Thresholds:
    """Per answer form, of the thresholds at which the verified label reaches its target
    precision on every source, the one whose precision has the highest floor
    (``precision_floor``), not the lowest: the lowest has no margin (an earlier default
    chosen that way fell from 86% on dev to 78% on test). 1.0 if none reaches it."""
    chosen: Thresholds = {}
    for form in FORMS:
        mine = [r for r in records if r["form"] == form]
        candidates = sorted({r["confidence"] for r in mine if r["confidence"] is not None})
        meeting = [t for t in candidates if _meets(mine, form, t, targets)]
        chosen[form] = max(meeting, key=lambda t: _floor(mine, form, t), default=1.0)
    return chosen


def _floor(records: Sequence[dict[str, Any]], form: str, t: float) -> float:
    confusion = classify(records, {form: t})["confusion"]
    right = confusion["verified_right"]
    return precision_floor(right, right + confusion["verified_wrong"])


def _meets(
    records: Sequence[dict[str, Any]], form: str, t: float, targets: dict[str, float]
) -> bool:
    for source, target in targets.items():
        mine = [r for r in records if r["source"] == source]
        precision = classify(mine, {form: t})["precision"]
        if precision is not None and precision < target:
            return False
    return True


def run(
    items: Iterable[VerifierItem],
    check: Callable[[VerifierItem], dict[str, Any]],
    *,
    progress: Callable[[int, dict[str, Any]], None] | None = None,
) -> list[dict[str, Any]]:
    """One record per item: the verdict ``check`` gives, beside the item's label."""
    records = []
    for n, item in enumerate(items, 1):
        verdict = check(item)
        record = {
            **{k: v for k, v in asdict(item).items() if k not in ("passages",)},
            "confidence": verdict.get("confidence"),
            "form": verdict.get("form") or answer_form(item.question, item.answer),
            "claim_confidence": verdict.get("claim_confidence"),
            "literal_choice": verdict.get("literal_choice"),
            "unsupported": verdict.get("unsupported", []),
            "error": verdict.get("error"),
        }
        records.append(record)
        if progress:
            progress(n, record)
    return records


def markdown(result: dict[str, Any]) -> str:
    thresholds = result["thresholds"]
    lines = [
        "thresholds: " + ", ".join(f"{form} {thresholds[form]}" for form in FORMS),
        "",
        "| group | items | right | precision | recall | accuracy | AUC | verified wrong |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, g in result["groups"].items():
        lines.append(
            f"| {name} | {g['items']} | {g['right']} | {g['precision']} | {g['recall']} | "
            f"{g['accuracy']} | {g['auc']} | {g['confusion']['verified_wrong']} |"
        )
    return "\n".join(lines)
