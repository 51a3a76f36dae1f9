"""Markdown and a PNG chart for an answer evaluation (``rag eval answers``).

As for retrieval, the JSON report is the record; this renders it for people.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from evaluation.answers import outcome_of
from evaluation.report import clip, write_files

CHART = "answers.png"
SHOWN = {
    "exact_match": "exact match (answerable)",
    "f1": "token F1 (answerable)",
    "abstention_accuracy": "correct abstention (unanswerable)",
    "false_abstention_rate": "abstained although answerable",
    "right_rate": "answered right, verified or not (answerable)",
    "grounded_rate": "labelled verified (answered)",
    "citation_recall": "statements whose cited passage holds their names, numbers, code "
    "(a short answer: its words)",
    "citation_precision": "citations whose passage alone holds their clause's facts "
    "(a short answer: its words)",
    "verified_precision": "verified precision: right among verified (short answers: F1 >= "
    "0.5; full answers: a gold answer given, evaluation/scoring.py)",
    "coverage": "coverage: answerable questions answered verified and right",
    "verified_wrong": "verified but wrong (count)",
    "overruled": "sure by the verifier, not verified by the second opinion (count)",
    "overruled_right": "of those, right (count)",
    "false_abstentions_by_cause": "abstained although answerable, by where the gold answer "
    "was (read: in what the generator read; cut: in a cut candidate; not_retrieved)",
    "withheld": "drafts withheld, never shown (count)",
    "withheld_right": "of those, right answers to answerable questions (count)",
    "outcomes": "outcomes (count)",
    "regeneration_rate": "regenerated after a failed check (answered)",
    "completeness": "answer completeness, judge 1-5",
    "contextual_accuracy": "contextual accuracy, judge 1-5",
}
WORST_LISTED = 10


def _cell(value: Any) -> str:
    if isinstance(value, dict):
        return ", ".join(f"{k} {v}" for k, v in sorted(value.items())) or "none"
    return "n/a" if value is None else f"{value:.3f}" if isinstance(value, float) else str(value)


def markdown(report: Mapping[str, Any], chart: str | None = CHART) -> str:
    s = report["summary"]
    lat = s["latency"] or {}
    lines = [
        f"# Answer evaluation: {report['dataset']}",
        "",
        f"{report['created']}. {s['items']} questions ({s['answerable']} answerable, "
        f"{s['unanswerable']} unanswerable), {s['errors']} failed with an error, "
        f"{s['model_faults']} met a model fault. Collection "
        f"`{report['collection']}` (version {report.get('collection_version')}); "
        f"answer style `{report['settings']['answer_style']}`, "
        f"k={report['settings']['k']}, distance_threshold="
        f"{report['settings']['distance_threshold']}, models: generator "
        f"`{report['settings']['generator_model']}`, verifier "
        f"`{report['settings']['verifier_model']}`.",
        "",
        "| measure | value |",
        "|---|---|",
        *(f"| {label} | {_cell(s.get(key))} |" for key, label in SHOWN.items()),
        f"| latency p50 / p95 (s) | {lat.get('p50_ms', 0) / 1000:.1f} / "
        f"{lat.get('p95_ms', 0) / 1000:.1f} |",
        "",
        "Prompts: " + ", ".join(f"`{k}@v{v}`" for k, v in report["prompts"].items()) + ".",
    ]
    if chart:
        lines += ["", f"![scores and latency]({chart})"]
    by_category = s.get("verified_by_category") or {}
    if by_category:
        lines += [
            "",
            "| category | verified precision | coverage | verified but wrong |",
            "|---|---|---|---|",
            *(
                f"| {name} | {_cell(v['verified_precision'])} | {_cell(v['coverage'])} | "
                f"{v['verified_wrong']} |"
                for name, v in by_category.items()
            ),
        ]
    thresholds = s.get("verified_by_threshold") or []
    if thresholds:
        lines += [
            "",
            "Had the threshold been higher (answers verified in this run whose confidence "
            "reaches it; the floor is the lower end of the precision's 95% interval):",
            "",
            "| threshold | verified | right | verified precision | floor | coverage |",
            "|---|---|---|---|---|---|",
            *(
                f"| {t['threshold']} | {t['verified']} | {t['right']} | "
                f"{_cell(t['precision'])} | {_cell(t['precision_floor'])} | "
                f"{_cell(t.get('coverage'))} |"
                for t in thresholds
            ),
        ]
    scored = [r for r in report["items"] if "f1" in r.get("scores", {})]
    if scored:
        lines += [
            "",
            "## Lowest F1 (answerable)",
            "",
            "| question | gold | answer | F1 |",
            "|---|---|---|---|",
        ]
        for r in sorted(scored, key=lambda r: (r["scores"]["f1"], r["id"]))[:WORST_LISTED]:
            lines.append(
                f"| {clip(r['question'])} | {clip(' / '.join(r['gold']))} | "
                f"{clip(r['answer'])} | {r['scores']['f1']:.2f} |"
            )
    missed = [r for r in report["items"] if r.get("scores", {}).get("correct_abstention") is False]
    if missed:
        lines += ["", "## Answered although unanswerable", ""]
        lines += [f"- {clip(r['question'])} -> {clip(r['answer'])}" for r in missed[:WORST_LISTED]]
    errors = [r for r in report["items"] if "error" in r]
    if errors:
        lines += ["", "## Errors", ""]
        lines += [f"- {r['id']}: {clip(r['error'], 200)}" for r in errors]
    return "\n".join(lines) + "\n"


def write_chart(report: Mapping[str, Any], path: Path) -> None:
    """Rates as bars, verified precision against coverage per threshold (the trade a
    threshold makes, with the precision's 95% floor), and the latency histogram."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    s = report["summary"]
    shares = list(SHOWN)[: list(SHOWN).index("verified_wrong")]  # the 0-1 rates come first
    rates = {k: s[k] for k in shares if s.get(k) is not None}
    fig, (bars, curve, hist) = plt.subplots(1, 3, figsize=(17, 4.5), width_ratios=[2, 1, 1])
    bars.barh(list(rates)[::-1], list(rates.values())[::-1], color="#4477aa")
    bars.set_xlim(0, 1)
    bars.set_title(f"{report['dataset']}: {s['items']} questions")
    points = [t for t in s.get("verified_by_threshold") or [] if t["precision"] is not None]
    if points:
        coverage = [t["coverage"] or 0.0 for t in points]
        curve.plot(coverage, [t["precision"] for t in points], marker="o", color="#4477aa")
        curve.fill_between(
            coverage,
            [t["precision_floor"] for t in points],
            [t["precision"] for t in points],
            alpha=0.2,
            color="#4477aa",
        )
        for t, x in zip(points, coverage, strict=True):
            curve.annotate(f"{t['threshold']:g}", (x, t["precision"]), fontsize=7)
    curve.set_xlim(0, 1)
    curve.set_ylim(0, 1.02)
    curve.set_xlabel("coverage (right and verified / answerable)")
    curve.set_ylabel("verified precision (band: 95% floor)")
    curve.set_title("by verify threshold")
    hist.hist([r["seconds"] for r in report["items"] if "error" not in r], bins=20)
    hist.set_xlabel("seconds per question")
    hist.set_ylabel("questions")
    hist.set_title("latency")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def write_outputs(report: Mapping[str, Any], folder: Path) -> list[Path]:
    return write_files(report, folder, "answers", markdown, (CHART, write_chart))


def _quality(record: Mapping[str, Any]) -> float | None:
    """One number per item to call a win or a loss: F1, correct abstention, or the judge."""
    scores = record.get("scores") or {}
    for name in ("f1", "correct_abstention", "completeness"):
        if name in scores:
            return float(scores[name])
    return None


def compare(a: Mapping[str, Any], b: Mapping[str, Any]) -> dict[str, Any]:
    """Summaries side by side and per-question wins/losses of B over A."""
    qa = {r["id"]: q for r in a["items"] if (q := _quality(r)) is not None}
    qb = {r["id"]: q for r in b["items"] if (q := _quality(r)) is not None}
    shared = [i for i in qa if i in qb]
    deltas = {i: qb[i] - qa[i] for i in shared}
    oa, ob = ({r["id"]: outcome_of(r) for r in x["items"] if "error" not in r} for x in (a, b))
    both = [i for i in oa if i in ob]
    return {
        "kind": "answers",
        "a": a["dataset"],
        "b": b["dataset"],
        "summary": {key: [a["summary"].get(key), b["summary"].get(key)] for key in SHOWN},
        "p50_s": [(x["summary"]["latency"] or {}).get("p50_ms", 0) / 1000 for x in (a, b)],
        "shared_items": len(shared),
        "wins": sum(d > 0 for d in deltas.values()),
        "losses": sum(d < 0 for d in deltas.values()),
        "ties": sum(d == 0 for d in deltas.values()),
        "deltas": dict(sorted(deltas.items(), key=lambda kv: (kv[1], kv[0]))),
        # robustness: questions whose outcome (abstained, verified, not verified) differs
        # between the runs, e.g. k and k+1 on the same questions
        "outcome_flips": sorted(i for i in both if oa[i] != ob[i]),
        "outcome_flip_rate": round(sum(oa[i] != ob[i] for i in both) / len(both), 4)
        if both
        else None,
    }


def compare_markdown(result: Mapping[str, Any], labels: tuple[str, str] = ("A", "B")) -> str:
    a, b = labels
    lines = [f"# Answer comparison: {a} vs {b}", ""]
    if result["a"] != result["b"]:
        lines += [f"Different question sets: {result['a']} vs {result['b']}.", ""]
    lines += [f"| measure | {a} | {b} |", "|---|---|---|"]
    lines += [
        f"| {SHOWN[k]} | {_cell(va)} | {_cell(vb)} |" for k, (va, vb) in result["summary"].items()
    ]
    pa, pb = result["p50_s"]
    lines += [f"| latency p50 (s) | {pa:.1f} | {pb:.1f} |", ""]
    lines.append(
        f"Per question (F1, correct abstention or judged completeness) over "
        f"{result['shared_items']} shared questions: {b} wins {result['wins']}, loses "
        f"{result['losses']}, ties {result['ties']}."
    )
    if result["outcome_flip_rate"] is not None:
        lines.append(
            f"Outcome (abstained, verified, not verified) differs for "
            f"{len(result['outcome_flips'])} questions ({result['outcome_flip_rate']:.0%}): "
            + (", ".join(result["outcome_flips"]) or "none")
            + "."
        )
    return "\n".join(lines) + "\n"
