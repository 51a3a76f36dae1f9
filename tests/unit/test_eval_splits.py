"""The frozen splits (lab/data/splits/): nothing on both sides, and no seed moves an
item across. The overlap check is shown to catch an injected overlap."""

from __future__ import annotations

import json
import re

import pytest

from evaluation import splits
from evaluation import verifier as bench
from evaluation.datasets import DatasetError
from evaluation.squad import load_squad
from tests.shared_data import SQUAD_FILE


def _norm(text: str) -> str:
    return " ".join(re.sub(r"[^\w\s]", " ", text.lower()).split())


def keys(items) -> dict[str, set[str]]:
    """What must never be on both sides: the unit, each passage's text, each question."""
    return {
        "unit": {i.group for i in items},
        "passage": {_norm(p["text"]) for i in items for p in i.passages},
        "question": {_norm(i.question) for i in items if i.source == "squad"},
    }


def sides(seed: int = 0):
    return [
        bench.load_items(SQUAD_FILE, split=side, seed=seed, squad_per_split=300)
        for side in splits.SPLITS
    ]


def test_the_verifier_benchmark_has_nothing_on_both_sides():
    dev, test = sides()
    assert dev and test
    assert splits.overlaps(keys(dev), keys(test)) == {}


def test_the_overlap_check_catches_an_injected_overlap():
    dev, test = sides()
    leaked = [*test, dev[0]]  # one dev pair slipped into test
    found = splits.overlaps(keys(dev), keys(leaked))
    assert dev[0].group in found["unit"] and found["passage"]


def test_no_seed_brings_a_dev_item_into_a_test_run():
    frozen = splits.frozen("squad")
    for seed in range(6):
        dev, test = sides(seed)
        assert {i.group for i in test if i.source == "squad"} <= set(frozen["test"])
        assert splits.overlaps(keys(dev), keys(test)) == {}
        sample = load_squad(SQUAD_FILE, answerable=50, unanswerable=50, seed=seed, split="test")
        assert set(sample.titles.values()) <= {t.replace("_", " ") for t in frozen["test"]}
        assert not {i.id for i in sample.items} & splits.excluded_from_test("squad")


def test_questions_earlier_tuning_drew_are_never_in_a_test_run():
    burned = splits.excluded_from_test("squad")
    test = bench.load_items(SQUAD_FILE, split="test", squad_per_split=300)
    assert burned and not {i.id.split("-")[1] for i in test if i.source == "squad"} & burned


def test_a_unit_on_neither_side_is_an_error_not_a_guess(tmp_path):
    with pytest.raises(DatasetError, match="on neither side"):
        splits.side_of("squad", "An article nobody assigned")


def test_every_docs_pair_is_assigned():
    frozen = splits.frozen("verifier_docs")
    pairs = {i.group for i in bench.docs_items()}
    assert pairs == set(frozen["dev"]) | set(frozen["test"])
    assert not set(frozen["dev"]) & set(frozen["test"])
    assert json.loads((splits.SPLITS_DIR / "verifier_docs.json").read_text())["test"]


def test_cacm_topics_split_by_id_and_a_sweep_refuses_test(tmp_path):
    from evaluation.datasets import Dataset
    from evaluation.retrieval import EvalError, evaluate_retrieval, judged_queries
    from tools.config import load_settings

    queries = {str(i): f"query {i}" for i in range(1, 9)}
    qrels = {qid: {"d1": 1} for qid in queries}
    dataset = Dataset("cacm", tmp_path / "corpus.jsonl", queries, qrels)
    dev, _ = judged_queries(dataset, None, "dev")
    test, _ = judged_queries(dataset, None, "test")
    assert {q for q, _ in dev} == {"1", "3", "5", "7"} and {q for q, _ in test} == {
        "2",
        "4",
        "6",
        "8",
    }
    with pytest.raises(EvalError, match="never test"):
        evaluate_retrieval(dataset, load_settings(), None, sweep={"k": ["3"]}, topics="test")
