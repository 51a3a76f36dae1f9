"""Markdown, chart and comparison rendering of retrieval reports (built by hand here)."""

from __future__ import annotations

import json

import pytest

from evaluation.report import (
    compare,
    compare_markdown,
    load_report,
    markdown_report,
    write_outputs,
)


def _run(label: str, ndcgs: dict[str, float], threshold: float = 0.75) -> dict:
    queries = [
        {
            "id": qid,
            "metrics": {"ndcg@10": v, "map": v / 2, "recall@100": 1.0},
            "results": 100 if v else 4,
            "over_threshold": 0 if v else 30,
            "seconds": 0.01 * (i + 1),
            "top": [],
        }
        for i, (qid, v) in enumerate(ndcgs.items())
    ]
    n = len(queries)
    return {
        "label": label,
        "mode": label.split()[0],
        "settings": {"distance_threshold": threshold, "fetch_k": 100},
        "metrics": {
            "ndcg@10": sum(ndcgs.values()) / n,
            "map": sum(ndcgs.values()) / n / 2,
            "recall@100": 1.0,
        },
        "latency": {"p50_ms": 20.0, "p95_ms": 29.0},
        "under_10_results": sum(1 for v in ndcgs.values() if not v),
        "under_10_by_threshold": sum(1 for v in ndcgs.values() if not v),
        "under_depth_results": 0,
        "queries": queries,
    }


def _report(*runs: dict) -> dict:
    return {
        "kind": "retrieval",
        "created": "2026-11-22T12:00:00+00:00",
        "dataset": {
            "name": "tiny",
            "corpus": "tiny/corpus.jsonl",
            "queries": 4,
            "judged_queries": 3,
            "unjudged_skipped": 1,
            "qrels_without_query": 0,
            "evaluated": 3,
        },
        "depth": 100,
        "notes": ["Ranked 100 documents deep per query."],
        "collection": {"name": "eval-x", "reused": True, "documents": 5, "chunks": 7, "seconds": 0},
        "queries": {"q1": "first | query", "q2": "second query", "q3": "third query"},
        "runs": list(runs),
    }


A = _report(_run("hybrid", {"q1": 0.5, "q2": 1.0, "q3": 0.0}), _run("bm25", {"q1": 0.2}))


def test_markdown_report_has_the_table_notes_settings_and_hardest_queries():
    text = markdown_report(A)
    assert text.startswith("# Retrieval evaluation: tiny\n")
    assert "| run | nDCG@10 | MAP | Recall@100 | p50 ms | p95 ms | <10 results |" in text
    # hybrid mean nDCG@10 = (0.5 + 1.0 + 0.0) / 3 = 0.5, MAP half of it
    assert "| `hybrid` | 0.500 | 0.250 | 1.000 | 20.0 | 29.0 | 1 |" in text
    assert "3 of 4 queries evaluated (1 without relevant judgments skipped)" in text
    assert "- Ranked 100 documents deep per query." in text
    assert "1 queries got fewer than 10 documents, 1 of them because candidates were beyond" in text
    assert "| distance_threshold | `0.75` |" in text
    assert "![metrics and latency](chart.png)" in text
    hardest = text.split("## Hardest queries")[1]
    # lowest nDCG first; the '|' in a query text cannot break the table
    assert hardest.index("| q3 | 0.000 |") < hardest.index("| q1 | 0.500 |")
    assert "first / query" in hardest
    assert "chart.png" not in markdown_report(A, chart=None)


def test_write_outputs_writes_json_markdown_and_a_png(tmp_path):
    paths = write_outputs(A, tmp_path / "out")
    assert [p.name for p in paths] == ["report.json", "report.md", "chart.png"]
    assert json.loads(paths[0].read_text()) == A
    assert paths[1].read_text() == markdown_report(A)
    png = paths[2].read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 5000
    assert load_report(paths[0]) == A


def test_compare_pairs_runs_by_label_and_counts_per_query_wins():
    b = _report(_run("hybrid", {"q1": 0.7, "q2": 1.0, "q3": 0.0, "q9": 1.0}))
    result = compare(A, b)
    (pair,) = result["pairs"]  # bm25 is only in A: not paired
    assert (pair["a"], pair["b"]) == ("hybrid", "hybrid")
    # q1 0.5 -> 0.7 is a win, q2 and q3 are unchanged; q9 is only in B
    assert (pair["wins"], pair["losses"], pair["ties"]) == (1, 0, 2)
    assert (pair["shared_queries"], pair["only_a"], pair["only_b"]) == (3, 0, 1)
    assert pair["metrics"]["ndcg@10"] == [pytest.approx(0.5), pytest.approx(2.7 / 4)]
    text = compare_markdown(result, A["queries"], ("old.json", "new.json"))
    assert "| nDCG@10 | 0.500 | 0.675 | +0.175 |" in text
    assert "new.json wins 1, loses 0, ties 2" in text
    assert "| q1 | +0.200 | first / query |" in text
    assert "Not compared: 0 queries only in old.json, 1 only in new.json." in text


def test_compare_single_runs_with_different_labels_and_reports_losses():
    a = _report(_run("hybrid distance_threshold=0.75", {"q1": 1.0, "q2": 0.5}))
    b = _report(_run("hybrid distance_threshold=2.0", {"q1": 0.25, "q2": 0.5}))
    (pair,) = compare(a, b)["pairs"]
    assert (pair["wins"], pair["losses"], pair["ties"]) == (0, 1, 1)
    text = compare_markdown(compare(a, b), a["queries"])
    assert "B's largest losses" in text and "| q1 | -0.750 |" in text
    with pytest.raises(ValueError, match="share no run label"):
        compare(A, _report(_run("dense", {"q1": 1.0}), _run("bm25 x=1", {"q1": 1.0})))


def test_load_report_rejects_other_json(tmp_path):
    path = tmp_path / "other.json"
    path.write_text('{"answer": 1}')
    with pytest.raises(ValueError, match="not an evaluation report"):
        load_report(path)
    path.write_text("{")
    with pytest.raises(ValueError, match="not a readable JSON report"):
        load_report(path)
