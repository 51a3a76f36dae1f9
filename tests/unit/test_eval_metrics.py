"""Ranking metrics against values computed by hand (the arithmetic is in the comments)."""

from __future__ import annotations

import math

import pytest

from evaluation.metrics import (
    average_precision,
    hit_rate,
    latency_summary,
    mean_metrics,
    ndcg_at_k,
    percentile,
    query_metrics,
    recall_at_k,
    reciprocal_rank,
)

# graded judgments: a is highly relevant, c fairly, b marginally; x was judged not relevant
QRELS = {"a": 3, "b": 1, "c": 2, "x": 0}
RANKING = ["b", "x", "a", "y", "c"]  # y was never judged


def test_ndcg_uses_grades_as_gains_and_log2_discounts():
    # DCG@3 = 1/log2(2) + 0/log2(3) + 3/log2(4) = 1 + 0 + 1.5 = 2.5
    # ideal gains 3, 2, 1: IDCG@3 = 3/1 + 2/log2(3) + 1/2 = 3 + 1.261860 + 0.5 = 4.761860
    assert ndcg_at_k(RANKING, QRELS, 3) == pytest.approx(0.525005, abs=1e-6)  # 2.5 / 4.761860
    assert ndcg_at_k(RANKING, QRELS, 3) == pytest.approx(2.5 / (3 + 2 / math.log2(3) + 0.5))
    # DCG@5 adds 0/log2(5) + 2/log2(6) = 0.773706 -> 3.273706; IDCG@5 = IDCG@3 (3 gains)
    assert ndcg_at_k(RANKING, QRELS, 5) == pytest.approx(0.687485, abs=1e-6)  # 3.273706 / 4.761860
    assert ndcg_at_k(["a", "c", "b"], QRELS, 10) == pytest.approx(1.0)  # the ideal order
    assert ndcg_at_k(RANKING, {"x": 0}, 10) == 0.0  # nothing relevant: defined as 0


def test_ndcg_binary_case_and_order_sensitivity():
    binary = {"r1": 1, "r2": 1}
    # relevant at ranks 2 and 3: (1/log2(3) + 1/log2(4)) / (1 + 1/log2(3)) = 1.130930 / 1.630930
    assert ndcg_at_k(["n", "r1", "r2"], binary, 10) == pytest.approx(0.693426, abs=1e-6)
    assert ndcg_at_k(["r1", "r2", "n"], binary, 10) == pytest.approx(1.0)


def test_average_precision_divides_by_all_relevant_documents():
    # relevant b@1, a@3, c@5: precisions 1/1, 2/3, 3/5 -> (1 + 0.6667 + 0.6) / 3 = 34/45
    assert average_precision(RANKING, QRELS) == pytest.approx(34 / 45)
    # only b found (at rank 1) of 3 relevant: 1/3, not 1
    assert average_precision(["b", "x"], QRELS) == pytest.approx(1 / 3)
    assert average_precision([], QRELS) == 0.0


def test_reciprocal_rank_recall_and_hit_rate_at_cutoffs():
    assert reciprocal_rank(RANKING, QRELS, 10) == 1.0  # b is relevant, rank 1
    assert reciprocal_rank(["x", "y", "c"], QRELS, 10) == pytest.approx(1 / 3)
    assert reciprocal_rank(["x", "y", "c"], QRELS, 2) == 0.0  # c is beyond the cut-off
    # top 3 = b, x, a: 2 of the 3 relevant documents
    assert recall_at_k(RANKING, QRELS, 3) == pytest.approx(2 / 3)
    assert recall_at_k(RANKING, QRELS, 1) == pytest.approx(1 / 3)
    assert hit_rate(["x", "a"], QRELS, 1) == 0.0
    assert hit_rate(["x", "a"], QRELS, 2) == 1.0


def test_query_metrics_leaves_out_cutoffs_deeper_than_the_ranking():
    deep = query_metrics(RANKING, QRELS, depth=100)
    assert set(deep) == {"ndcg@10", "map", "mrr@10", "recall@10", "recall@100", "hit@10"}
    assert deep["map"] == pytest.approx(34 / 45)
    assert deep["recall@10"] == deep["recall@100"] == 1.0
    shallow = query_metrics(RANKING, QRELS, depth=3)
    assert "recall@100" not in shallow
    assert shallow["map"] == pytest.approx((1 + 2 / 3) / 3)  # ranking cut at depth 3


def test_means_and_latency_percentiles():
    assert mean_metrics([{"m": 1.0, "n": 0.0}, {"m": 0.5, "n": 1.0}]) == {"m": 0.75, "n": 0.5}
    assert mean_metrics([]) == {}
    values = [40.0, 10.0, 30.0, 20.0]  # sorted 10, 20, 30, 40
    assert percentile(values, 50) == pytest.approx(25.0)  # position 1.5 -> 20 + 0.5 * 10
    assert percentile(values, 90) == pytest.approx(37.0)  # position 2.7 -> 30 + 0.7 * 10
    assert (percentile(values, 0), percentile(values, 100)) == (10.0, 40.0)
    with pytest.raises(ValueError):
        percentile([], 50)
    summary = latency_summary([0.01, 0.02, 0.03, 0.04])  # seconds in, milliseconds out
    assert summary["mean_ms"] == pytest.approx(25.0)
    assert summary["p50_ms"] == pytest.approx(25.0)
    assert summary["max_ms"] == pytest.approx(40.0)
