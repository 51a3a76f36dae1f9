"""Reports of a retrieval evaluation: JSON (the record), Markdown (to read), a PNG chart,
and the comparison of two JSON reports.

The JSON report is the source of truth; Markdown and chart are rendered from it, so two
reports made months apart can still be compared (``compare``) without re-running anything.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

METRICS = {
    "ndcg@10": "nDCG@10",
    "map": "MAP",
    "mrr@10": "MRR@10",
    "recall@10": "Recall@10",
    "recall@100": "Recall@100",
    "hit@10": "Hit@10",
}
CHART = "chart.png"
WORST_LISTED = 10
CHANGES_LISTED = 5
TIE = 1e-9  # per-query nDCG differences below this are ties, not wins


def _metric_names(runs: Sequence[Mapping[str, Any]]) -> list[str]:
    present = set().union(*(run["metrics"] for run in runs)) if runs else set()
    return [m for m in METRICS if m in present]


def _table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return lines


def _fmt(value: float) -> str:
    return f"{value:.3f}"


def metrics_table(runs: Sequence[Mapping[str, Any]]) -> list[str]:
    """One row per run: the mean metrics, latency, and how often results ran short."""
    names = _metric_names(runs)
    header = ["run", *(METRICS[m] for m in names), "p50 ms", "p95 ms", "<10 results"]
    rows = [
        [
            f"`{run['label']}`",
            *(_fmt(run["metrics"][m]) for m in names),
            f"{run['latency']['p50_ms']:.1f}",
            f"{run['latency']['p95_ms']:.1f}",
            run["under_10_results"],
        ]
        for run in runs
    ]
    return _table(header, rows)


def markdown_report(report: Mapping[str, Any], chart: str | None = CHART) -> str:
    data, col = report["dataset"], report["collection"]
    first = report["runs"][0]
    settings = first["settings"]
    lines = [
        f"# Retrieval evaluation: {data['name']}",
        "",
        f"{report['created']}. Corpus `{data['corpus']}`: {col['documents']} documents in "
        f"{col['chunks']} chunks (collection `{col['name']}`, "
        + ("reused" if col["reused"] else f"ingested in {col['seconds']:.0f} s")
        + f"). {data['evaluated']} of {data['queries']} queries evaluated "
        f"({data['unjudged_skipped']} without relevant judgments skipped).",
        "",
        *metrics_table(report["runs"]),
        "",
        *(f"- {note}" for note in report["notes"]),
    ]
    for run in report["runs"]:
        if run["under_10_results"]:
            lines.append(
                f"- `{run['label']}`: {run['under_10_results']} queries got fewer than 10 "
                f"documents, {run['under_10_by_threshold']} of them because candidates were "
                f"beyond distance_threshold {run['settings']['distance_threshold']}."
            )
    lines += [
        "- MAP is over the whole ranking; metrics are means over queries (trec_eval "
        "conventions, graded gain for nDCG).",
        "",
        "## Settings",
        "",
        *_table(["setting", "value"], [[k, f"`{v}`"] for k, v in settings.items()]),
    ]
    if chart:
        lines += ["", f"![metrics and latency]({chart})"]
    lines += ["", f"## Hardest queries (`{first['label']}`, lowest nDCG@10)", ""]
    worst = sorted(first["queries"], key=lambda q: (q["metrics"]["ndcg@10"], q["id"]))
    lines += _table(
        ["query", "nDCG@10", "results", "text"],
        [
            [
                q["id"],
                _fmt(q["metrics"]["ndcg@10"]),
                q["results"],
                clip(report["queries"].get(q["id"], "")),
            ]
            for q in worst[:WORST_LISTED]
        ],
    )
    return "\n".join(lines) + "\n"


def write_chart(report: Mapping[str, Any], path: Path) -> None:
    """Mean metrics per run as grouped bars, and each run's latency distribution."""
    import matplotlib

    matplotlib.use("Agg")  # no display on servers and in CI
    import matplotlib.pyplot as plt

    runs = report["runs"]
    names = _metric_names(runs)
    fig, (bars, hist) = plt.subplots(1, 2, figsize=(13, 4.5), width_ratios=[2, 1])
    width = 0.8 / len(runs)
    for i, run in enumerate(runs):
        xs = [m + (i - (len(runs) - 1) / 2) * width for m in range(len(names))]
        bars.bar(xs, [run["metrics"][n] for n in names], width, label=run["label"])
        latencies = [q["seconds"] * 1000 for q in run["queries"]]
        hist.hist(latencies, bins=20, histtype="step", linewidth=1.5, label=run["label"])
    bars.set_xticks(range(len(names)), [METRICS[n] for n in names])
    bars.set_ylim(0, 1)
    bars.set_title(
        f"{report['dataset']['name']}: mean over {report['dataset']['evaluated']} queries"
    )
    bars.legend(fontsize="small")
    hist.set_xlabel("latency per query (ms)")
    hist.set_ylabel("queries")
    hist.set_title("retrieval latency")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def write_files(
    report: Mapping[str, Any],
    folder: Path,
    stem: str,
    render: Callable[[Mapping[str, Any]], str],
    chart: tuple[str, Callable[[Mapping[str, Any], Path], None]],
) -> list[Path]:
    """``stem``.json (the record), ``stem``.md and the chart, in ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = [folder / f"{stem}.json", folder / f"{stem}.md", folder / chart[0]]
    paths[0].write_text(json.dumps(report, indent=2) + "\n")
    paths[1].write_text(render(report))
    chart[1](report, paths[2])
    return paths


def write_outputs(report: Mapping[str, Any], folder: Path) -> list[Path]:
    return write_files(report, folder, "report", markdown_report, (CHART, write_chart))


# --- comparison --------------------------------------------------------------------------------


def load_report(path: Path) -> dict[str, Any]:
    try:
        report = json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise ValueError(f"{path}: not a readable JSON report ({exc})") from None
    if not isinstance(report, dict) or report.get("kind") not in ("retrieval", "answers"):
        raise ValueError(
            f"{path}: not an evaluation report (made by `rag eval retrieval/answers --out`)"
        )
    return report


def _pairs(a: Mapping[str, Any], b: Mapping[str, Any]) -> list[tuple[dict, dict]]:
    """Runs with the same label; two single-run reports are paired whatever their labels."""
    by_label = {run["label"]: run for run in b["runs"]}
    pairs = [(run, by_label[run["label"]]) for run in a["runs"] if run["label"] in by_label]
    if not pairs and len(a["runs"]) == len(b["runs"]) == 1:
        pairs = [(a["runs"][0], b["runs"][0])]
    if not pairs:
        raise ValueError(
            "the reports share no run label (A: "
            + ", ".join(r["label"] for r in a["runs"])
            + "; B: "
            + ", ".join(r["label"] for r in b["runs"])
            + ")"
        )
    return pairs


def compare(a: Mapping[str, Any], b: Mapping[str, Any]) -> dict[str, Any]:
    """Per paired run: mean metrics of A and B, and per-query nDCG@10 wins/losses of B."""
    out = []
    for run_a, run_b in _pairs(a, b):
        ndcg_a = {q["id"]: q["metrics"]["ndcg@10"] for q in run_a["queries"]}
        ndcg_b = {q["id"]: q["metrics"]["ndcg@10"] for q in run_b["queries"]}
        shared = [q for q in ndcg_a if q in ndcg_b]
        deltas = {q: ndcg_b[q] - ndcg_a[q] for q in shared}
        names = [m for m in _metric_names([run_a, run_b]) if m in run_a["metrics"]]
        out.append(
            {
                "a": run_a["label"],
                "b": run_b["label"],
                "metrics": {m: [run_a["metrics"][m], run_b["metrics"].get(m)] for m in names},
                "p50_ms": [run_a["latency"]["p50_ms"], run_b["latency"]["p50_ms"]],
                "shared_queries": len(shared),
                "only_a": len(ndcg_a) - len(shared),
                "only_b": len(ndcg_b) - len(shared),
                "wins": sum(1 for d in deltas.values() if d > TIE),
                "losses": sum(1 for d in deltas.values() if d < -TIE),
                "ties": sum(1 for d in deltas.values() if abs(d) <= TIE),
                "deltas": dict(sorted(deltas.items(), key=lambda kv: (kv[1], kv[0]))),
            }
        )
    return {"a": a["dataset"]["name"], "b": b["dataset"]["name"], "pairs": out}


def compare_markdown(
    result: Mapping[str, Any], texts: Mapping[str, str], labels: Sequence[str] = ("A", "B")
) -> str:
    a, b = labels
    lines = [f"# Retrieval comparison: {a} vs {b}", ""]
    if result["a"] != result["b"]:
        lines += [f"Different datasets: {result['a']} vs {result['b']}.", ""]
    for pair in result["pairs"]:
        lines += [f"## `{pair['a']}` vs `{pair['b']}`", ""]
        rows = [
            [METRICS[m], _fmt(va), "-" if vb is None else _fmt(vb), _delta(va, vb)]
            for m, (va, vb) in pair["metrics"].items()
        ]
        pa, pb = pair["p50_ms"]
        rows.append(["p50 latency ms", f"{pa:.1f}", f"{pb:.1f}", f"{pb - pa:+.1f}"])
        lines += [*_table(["metric", a, b, f"{b} - {a}"], rows), ""]
        lines.append(
            f"Per query nDCG@10 over {pair['shared_queries']} shared queries: {b} wins "
            f"{pair['wins']}, loses {pair['losses']}, ties {pair['ties']}."
        )
        if pair["only_a"] or pair["only_b"]:
            lines.append(
                f"Not compared: {pair['only_a']} queries only in {a}, {pair['only_b']} only in {b}."
            )
        changes = list(pair["deltas"].items())
        losses = [(q, d) for q, d in changes if d < -TIE][:CHANGES_LISTED]
        wins = [(q, d) for q, d in reversed(changes) if d > TIE][:CHANGES_LISTED]
        for title, items in ((f"{b}'s largest wins", wins), (f"{b}'s largest losses", losses)):
            if items:
                lines += ["", f"{title}:", ""]
                lines += _table(
                    ["query", "nDCG@10 change", "text"],
                    [[q, f"{d:+.3f}", clip(texts.get(q, ""))] for q, d in items],
                )
        lines.append("")
    return "\n".join(lines)


def _delta(a: float, b: float | None) -> str:
    return "-" if b is None else f"{b - a:+.3f}"


def clip(text: str, width: int = 80) -> str:
    """One line of at most ``width`` characters, safe inside a Markdown table."""
    text = " ".join(text.split()).replace("|", "/")
    return text if len(text) <= width else text[: width - 3] + "..."
