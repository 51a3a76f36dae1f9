"""Answer quality: the full graph over a question set, scored per item and in aggregate.

Every item runs through the same compiled graph a user's question does (rephrasing,
retrieval, generation, verification, regeneration), each as its own trace, so a bad
score can be opened in Langfuse (or ``rag trace show``) next to the exact prompts.
Scores per item: SQuAD exact match and token F1 when gold answers exist, correct
abstention when the question has no answer, the verifier's verdict, the LLM judge's
completeness and contextual accuracy (``--judge``), and wall time.
"""

from __future__ import annotations

import json
import statistics
import sys
import time
import uuid
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from langgraph.checkpoint.memory import InMemorySaver

from evaluation.judge import JUDGE, judge_answer
from evaluation.metrics import latency_summary
from evaluation.scoring import answer_is_right
from evaluation.squad import QAItem, contains_answer, exact_match, token_f1
from evaluation.verifier import precision_floor
from graph import build_graph
from graph.builder import config_for
from graph.checks.tuning import SAME_ANSWER_F1
from graph.prompts import versions
from graph.results import Verdict
from graph.services import Services
from tools import tracing
from tools.config import Settings
from tools.errors import ModelError
from tools.text import strip_markers

# what a report keeps of each verdict (graph/results.py's Verdict), all but what the run
# states once (its thresholds and verifier) or that other reports measure: with the
# confidence, one run shows what any other verify_threshold would have labelled verified
VERDICT_LEFT_OUT = frozenset(
    {"cited", "obeyed_passage", "planted_words", "confidence_method", "thresholds"}
    | {"checked_by", "error", "checks"}
)
VERDICT_KEYS = tuple(k for k in Verdict.__annotations__ if k not in VERDICT_LEFT_OUT)


def _score_item(item: QAItem, out: dict[str, Any], style: str) -> dict[str, Any]:
    """``style`` short: SQuAD's scores, right at token F1 >= SAME_ANSWER_F1; full: right
    when the answer gives a gold answer whole, and one the question already holds in a
    new role (evaluation/scoring.py)."""
    answer = strip_markers(out["answer"], set()).strip()
    abstained = bool(out["abstained"])
    scores: dict[str, Any] = {}
    if item.answerable:
        scores["exact_match"] = 0.0 if abstained else exact_match(answer, item.answers)
        scores["f1"] = 0.0 if abstained else token_f1(answer, item.answers)
    elif item.answerable is False:
        scores["correct_abstention"] = abstained
    verdict = out.get("verdict") or {}
    if not abstained and "grounded" in verdict:  # a failed check counts as not grounded
        scores["grounded"] = bool(verdict.get("grounded"))
        if verdict.get("statements"):  # ALCE's citation recall, by the literal check
            unsupported = len(verdict.get("unsupported") or [])
            scores["citation_recall"] = round(1 - unsupported / verdict["statements"], 4)
        if verdict.get("citations"):  # ALCE's citation precision: each [n] holds its clause
            scores["citation_precision"] = round(
                verdict["citations_needed"] / verdict["citations"], 4
            )
        if item.answerable is not None:  # known gold: was the answer right?
            scores["right"] = _right(item, answer, style)
    withheld = (out.get("judgement") or {}).get("withheld")
    if withheld and item.answerable is not None:  # a draft never shown: would it have been?
        scores["withheld_right"] = _right(item, strip_markers(withheld, set()).strip(), style)
    return scores


def _right(item: QAItem, answer: str, style: str) -> bool:
    """Whether ``answer`` is right for ``item`` (see ``_score_item``)."""
    return bool(item.answerable) and (
        token_f1(answer, item.answers) >= SAME_ANSWER_F1
        if style == "short"
        else answer_is_right(item.question, answer, item.answers)
    )


def answer_found(item: QAItem, out: dict[str, Any]) -> str:
    """Where a gold answer was, for diagnosing an answer that missed it: ``read`` (in what
    the generator read), ``cut`` (in a candidate cut before it: by rank, distance or the
    evidence step; judged on the cut's 200-character snippet), or ``not_retrieved``.
    A locator, not a judge: a passage does not restate the question, so it is read with
    ``contains_answer`` rather than the answer's strict rule."""
    read = " ".join(p["text"] for p in out.get("passages") or [])
    if contains_answer(read, item.answers):
        return "read"
    dropped = ((out.get("retrieval") or {}).get("dropped")) or []
    if contains_answer(" ".join(d["snippet"] for d in dropped), item.answers):
        return "cut"
    return "not_retrieved"


def evaluate_answers(
    settings: Settings,
    items: Sequence[QAItem],
    *,
    judge: bool = False,
    progress: bool = True,
    log: Path | None = None,
    services: Services,
) -> dict[str, Any]:
    """Run the graph on every item with ``settings`` (its collection must exist).

    With ``log``, each item's record is appended to it as soon as it is scored, so an
    interrupted run of an hour keeps what it measured (``summarize`` reads such records).
    """
    app = build_graph(checkpointer=InMemorySaver())  # to read each run's passages back
    judge_model = services.llm(settings, "judge") if judge else None
    run_id = uuid.uuid4().hex[:8]
    records: list[dict[str, Any]] = []
    for n, item in enumerate(items, 1):
        config = config_for(
            settings,
            thread_id=f"eval-{run_id}-{n}",
            trace_seed=f"eval-{run_id}-{item.id}",
        )
        record: dict[str, Any] = {
            "id": item.id,
            "question": item.question,
            "answerable": item.answerable,
            "gold": list(item.answers),
        }
        started = time.perf_counter()
        try:
            out = app.invoke({"question": item.question}, config, context=services)
        except (ModelError, ValueError) as exc:  # one broken item must not end the run
            record |= {"error": str(exc), "seconds": round(time.perf_counter() - started, 2)}
            _keep(record, records, log)
            continue
        record |= {
            "seconds": round(time.perf_counter() - started, 2),
            "answer": out["answer"],
            "abstained": out["abstained"],
            "outcome": out["outcome"],
            # the draft withheld (not shown), so right answers withheld are counted
            "withheld": (out.get("judgement") or {}).get("withheld"),
            "unstated": (out.get("judgement") or {}).get("unsupported") or [],
            "verdict": {k: out["verdict"][k] for k in VERDICT_KEYS if k in out["verdict"]},
            "attempts": out.get("attempts", 0),
            "queries": out["queries"],
            "sources": [c["source"] for c in out["citations"]],
            "trace_id": out.get("trace_id"),
            "scores": _score_item(item, out, settings.answer_style),
        }
        if item.answerable and item.answers and settings.answer_style == "full":
            record["answer_found"] = answer_found(item, out)
        if out.get("error"):  # a model fault the graph survived (abstained or unverified)
            record["fault"] = "{type} in {stage}: {message}".format(**out["error"])
        if judge_model is not None and not out["abstained"]:
            passages = app.get_state(config).values.get("passages") or []
            judged_config = (
                tracing.run_config(
                    settings, trace_id=out["trace_id"], metadata={"prompt": JUDGE.ref}
                )
                if out.get("trace_id")
                else None
            )
            try:
                grades = judge_answer(
                    judge_model, settings, item.question, out["answer"], passages, judged_config
                )
                record["scores"] |= grades.model_dump()
            except ModelError as exc:
                record["judge_error"] = str(exc)
        for name, value in record["scores"].items():
            tracing.score(settings, out.get("trace_id"), name, value)
        _keep(record, records, log)
        if progress:
            shown = ", ".join(
                f"{k}={v:.2f}" if isinstance(v, float) else f"{k}={v}"
                for k, v in record["scores"].items()
            )
            print(
                f"[{n}/{len(items)}] {record['seconds']:.1f}s {shown}",
                file=sys.stderr,
                flush=True,
            )
    tracing.flush()
    return {
        "kind": "answers",
        "run_id": run_id,
        "prompts": {**versions(), JUDGE.name: JUDGE.version} if judge else versions(),
        "summary": summarize(records),
        "items": records,
    }


def _scored_verified(answered: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The answers labelled verified whose rightness is known (a gold answer, or none)."""
    return [r for r in answered if r["scores"].get("grounded") and "right" in r["scores"]]


def _verified(answered: Sequence[dict[str, Any]], answerable: int) -> dict[str, Any]:
    """What "verified" is worth: the share of verified answers that are right
    (precision), the share of answerable questions answered verified and right
    (coverage), and the count of verified wrong answers, the failure users must not see."""
    verified = _scored_verified(answered)
    right = sum(bool(r["scores"]["right"]) for r in verified)
    overruled = [r for r in answered if _overruled(r["verdict"]) and "right" in r["scores"]]
    return {
        "verified_precision": round(right / len(verified), 4) if verified else None,
        "coverage": round(right / answerable, 4) if answerable else None,
        "verified_wrong": len(verified) - right,
        "overruled": len(overruled),
        "overruled_right": sum(bool(r["scores"]["right"]) for r in overruled),
    }


# The thresholds a report shows verified precision at. End to end the generator picks the
# answer the verifier then judges, and with one model in both roles the verifier tends to
# like what it picked, so the verifier benchmark's precision overstates this one
# (docs_corpus/evaluation.md): choose a threshold on a dev run of your own questions.
REPORT_THRESHOLDS = (0.5, 0.55, 0.6, 0.65, 0.7, 0.75, 0.8)


def by_threshold(answered: Sequence[dict[str, Any]], answerable: int) -> list[dict[str, Any]]:
    """Verified precision had the threshold been each of ``REPORT_THRESHOLDS`` at or above
    every threshold the run used: an answer verified in the run counts at ``t`` when its
    confidence reaches ``t``. Below the run's own thresholds the second opinion was never
    asked, so what "verified" would have been there is unknown and not shown: lower them
    for a calibration run (``RAG_VERIFY_THRESHOLD_PHRASE=0.45``). ``coverage``: right and
    verified, of the ``answerable`` questions: what a user gets at that threshold."""
    used = max((r["verdict"].get("threshold") or 0.0 for r in answered), default=0.0)
    sure = _scored_verified(answered)
    rows = []
    for t in (t for t in REPORT_THRESHOLDS if t >= used):
        verified = [r for r in sure if (r["verdict"].get("confidence") or 0.0) >= t]
        right = sum(bool(r["scores"]["right"]) for r in verified)
        rows.append(
            {
                "threshold": t,
                "verified": len(verified),
                "right": right,
                "precision": round(right / len(verified), 4) if verified else None,
                "precision_floor": round(precision_floor(right, len(verified)), 4),
                "coverage": round(right / answerable, 4) if answerable else None,
            }
        )
    return rows


def _overruled(verdict: dict[str, Any]) -> bool:
    """The verifier was sure, but the second opinion took "verified" away."""
    return bool(verdict.get("second_opinion")) and not verdict.get("grounded")


def outcome_of(record: Mapping[str, Any]) -> str:
    """A record's outcome as the run judged it (a report written before records kept it:
    from its scores)."""
    if record.get("outcome"):
        return str(record["outcome"])
    if record["abstained"]:
        return "abstained"
    return "verified" if record["scores"].get("grounded") else "not_verified"


def _keep(record: dict[str, Any], records: list[dict[str, Any]], log: Path | None) -> None:
    records.append(record)
    if log is not None:
        with log.open("a", encoding="utf-8") as fh:
            fh.write(json.dumps(record) + "\n")


def _mean(values: list[float]) -> float | None:
    return round(statistics.fmean(values), 4) if values else None


def summarize(records: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Aggregates; a rate over no items is None, never a misleading 0 or 1."""
    ok = [r for r in records if "error" not in r]
    answerable = [r for r in ok if r["answerable"]]
    unanswerable = [r for r in ok if r["answerable"] is False]
    answered = [r for r in ok if not r["abstained"]]

    def collect(name: str, rows: Sequence[dict[str, Any]]) -> list[float]:
        return [float(r["scores"][name]) for r in rows if name in r["scores"]]

    return {
        "items": len(records),
        "errors": len(records) - len(ok),
        "model_faults": sum("fault" in r for r in ok),
        "answerable": len(answerable),
        "unanswerable": len(unanswerable),
        "exact_match": _mean(collect("exact_match", answerable)),
        "f1": _mean(collect("f1", answerable)),
        "abstention_accuracy": _mean(collect("correct_abstention", unanswerable)),
        "false_abstention_rate": _mean([float(r["abstained"]) for r in answerable]),
        # where the gold answer was when an answerable question was abstained on
        "false_abstentions_by_cause": dict(
            Counter(r["answer_found"] for r in answerable if r["abstained"] and "answer_found" in r)
        ),
        # answerable questions answered right, verified or not (None: no gold to judge by)
        "right_rate": _mean([float(bool(r["scores"].get("right"))) for r in answerable]),
        "grounded_rate": _mean(collect("grounded", answered)),
        "citation_recall": _mean(collect("citation_recall", answered)),
        "citation_precision": _mean(collect("citation_precision", answered)),
        **_verified(answered, len(answerable)),
        "verified_by_category": {
            "answerable": _verified([r for r in answered if r["answerable"]], len(answerable)),
            "unanswerable": _verified([r for r in answered if r["answerable"] is False], 0),
        },
        "verified_by_threshold": by_threshold(answered, len(answerable)),
        # drafts withheld (not shown: the documents do not say it, an obeyed instruction,
        # on_unverified=abstain) and, of the answerable questions, those that were right
        "withheld": sum(bool(r.get("withheld")) for r in ok),
        "withheld_right": sum(bool(r["scores"].get("withheld_right")) for r in answerable),
        "outcomes": dict(Counter(outcome_of(r) for r in ok)),
        "regeneration_rate": _mean([float(r["attempts"] > 1) for r in answered]),
        "completeness": _mean(collect("completeness", answered)),
        "contextual_accuracy": _mean(collect("contextual_accuracy", answered)),
        "latency": latency_summary([r["seconds"] for r in ok]),
    }
