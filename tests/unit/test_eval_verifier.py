"""The verifier benchmark's items, splits and scores (no model: the check is a function)."""

from __future__ import annotations

import json

import pytest

from evaluation import verifier as bench
from evaluation.datasets import DatasetError
from rag_cli.eval_verifier_cmd import passages_read
from rag_cli.main import main
from tests.fakes import HashEmbeddings
from tests.shared_data import SQUAD_FILE
from tools.config import load_settings


def rec(source, right, confidence, category="c", form="sentence"):
    return {
        "source": source,
        "category": category,
        "right": right,
        "confidence": confidence,
        "form": form,
    }


BOTH = {"sentence": 0.6, "phrase": 0.6}


def test_classify_counts_the_confusion_matrix_and_auc():
    records = [
        rec("docs", True, 0.9),
        rec("docs", False, 0.7),
        rec("docs", True, 0.4),
        rec("docs", False, None),
    ]
    c = bench.classify(records, BOTH)
    assert c["confusion"] == {
        "verified_right": 1,
        "verified_wrong": 1,
        "rejected_right": 1,
        "rejected_wrong": 1,
    }
    assert c["precision"] == 0.5 and c["recall"] == 0.5 and c["accuracy"] == 0.5
    assert c["auc"] == 0.5  # scored items only: 0.9 > 0.7 wins, 0.4 < 0.7 loses
    assert bench.roc_auc([0.1, 0.1], [True, False]) == 0.5  # a tie counts half
    assert bench.roc_auc([0.3], [True]) is None


def test_threshold_is_the_surest_reaching_every_sources_target_per_answer_form():
    records = [
        rec("docs", True, 0.9),
        rec("docs", False, 0.6),
        rec("docs", True, 0.7),
        rec("squad", True, 0.8),
        rec("squad", False, 0.65),
        rec("squad", True, 0.95, form="phrase"),
        rec("squad", False, 0.9, form="phrase"),
    ]
    targets = {"docs": 0.95, "squad": 0.85}
    assert bench.choose_thresholds(records, targets) == {"sentence": 0.7, "phrase": 0.95}
    assert bench.choose_thresholds([rec("docs", False, 0.9)], {"docs": 0.95}) == {
        "sentence": 1.0,
        "phrase": 1.0,
    }
    # 0.55 reaches 95% (20 of 21) but by one item; 19 of 19 is surer
    many = [rec("docs", True, 0.9)] * 19 + [rec("docs", False, 0.6), rec("docs", True, 0.55)]
    assert bench.choose_thresholds(many, {"docs": 0.95})["sentence"] == 0.9
    assert bench.precision_floor(19, 19) > bench.precision_floor(20, 21) > 0.75
    assert bench.precision_floor(0, 0) == 0.0
    # the phrase threshold labels a phrase, the sentence threshold a sentence
    split = {"sentence": 0.5, "phrase": 0.92}
    assert bench.classify(records, split)["confusion"]["verified_wrong"] == 2


def test_report_groups_by_source_and_category():
    records = [rec("docs", True, 0.9, "flag"), rec("squad", False, 0.9, "same_type_span")]
    groups = bench.report(records, BOTH)["groups"]
    assert set(groups) == {
        "all",
        "docs",
        "squad",
        "docs/sentence",
        "squad/sentence",
        "docs/flag",
        "squad/same_type_span",
    }
    assert groups["squad"]["confusion"]["verified_wrong"] == 1


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ("1945", "date"),
        ("March 3", "date"),
        ("3,000", "number"),
        ("45%", "number"),
        ("Denver Broncos", "name"),
        ("University of Chicago", "name"),
        ("the rain", "phrase"),
    ],
)
def test_answer_types(text, kind):
    assert bench.answer_type(text) == kind


def test_docs_items_are_pairs_of_right_and_wrong_with_real_passages():
    items = bench.docs_items()
    pairs: dict[str, list[bool]] = {}
    for item in items:
        pairs.setdefault(item.group, []).append(item.right)
        assert item.passages and "[" in item.answer
    assert len(pairs) >= 60 and all(sorted(v) == [False, True] for v in pairs.values())


def test_a_docs_file_missing_a_field_is_refused(tmp_path):
    bad = tmp_path / "items.jsonl"
    bad.write_text(json.dumps({"id": "x", "question": "q"}) + "\n")
    with pytest.raises(DatasetError, match="needs"):
        bench.docs_items(bad)


@pytest.mark.skipif(not SQUAD_FILE.is_file(), reason="needs ../shared/data")
def test_squad_items_are_balanced_and_wrong_spans_share_the_type():
    items = bench.squad_items(SQUAD_FILE, per_split=40, seed=0)
    kinds = {}
    for item in items:
        kinds[item.category] = kinds.get(item.category, 0) + 1
        assert item.answer.endswith(" [1]") and len(item.passages) == 1
    assert kinds == {"right_answer": 40, "same_type_span": 20, "plausible_unanswerable": 20}


def test_calibrating_on_the_test_split_is_refused(capsys):
    assert main(["eval", "verifier", "--split", "test", "--calibrate"]) == 2
    assert "dev only" in capsys.readouterr().err


def test_evidence_keeps_each_passage_in_the_slot_the_answer_cites():
    """A wrong-citation pair cites [1], a passage about another error; [2] states the
    claim. The selector ranks [2] first: read in its order, the answer's [1] pointed at
    the right passage and the wrong answer was verified (2026-11-26 test run)."""
    item = bench.VerifierItem(
        id="x-wrong",
        source="docs",
        category="wrong_citation",
        question="What should I do about the error no valid Verdict?",
        passages=(
            {"source": "t.md", "text": "Timeouts: an error when no reply came. " * 3},
            {"source": "t.md", "text": "No valid Verdict: raise the tokens. " + "Errors. " * 9},
            {"source": "u.md", "text": "Unrelated words about tags."},
        ),
        answer="Raise the tokens [1].",
        right=False,
        group="x",
    )
    settings = load_settings({"evidence_chars": 200, "evidence_neighbours": 0})
    read = passages_read(item, settings, HashEmbeddings())
    assert [p["text"][:9] for p in read[:2]] == ["Timeouts:", "No valid "]
    assert read[2]["text"] == "[...]"  # no sentence chosen from it: it keeps its number
    whole = passages_read(item, load_settings({"evidence": "passages"}), HashEmbeddings())
    assert [p["text"] for p in whole] == [p["text"] for p in item.passages]
