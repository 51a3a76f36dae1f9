"""`rag eval guard`: the labelled questions and the scores (fake query model)."""

from __future__ import annotations

import json

from evaluation import guard as bench
from graph.services import Services
from rag_cli.main import main
from tests.fakes import RuleChat
from tests.unit.conftest import EMB


def test_the_labelled_set_covers_every_kind_with_enough_questions():
    items = bench.load()
    kinds = {i["kind"] for i in items}
    assert len(items) >= 60 and kinds == {"on_topic", "off_topic", "blocked", "near_miss"}
    assert len({i["id"] for i in items}) == len(items)


def test_score_counts_refusals_against_labels():
    rows = [
        {"kind": "on_topic", "label": "allowed", "verdict": "allowed", "seconds": 1.0},
        {"kind": "on_topic", "label": "allowed", "verdict": "off_topic", "seconds": 1.0},
        {"kind": "blocked", "label": "blocked", "verdict": "off_topic", "seconds": 2.0},
        {"kind": "off_topic", "label": "off_topic", "verdict": "allowed", "seconds": 1.0},
    ]
    s = bench.score(rows)
    assert (s["refusal_precision"], s["refusal_recall"]) == (0.5, 0.5)
    assert s["verdict_accuracy"] == 0.25  # "blocked" called off-topic is refused, not exact
    assert s["by_kind"]["blocked"] == {"items": 1, "right_decision": 1}


def test_rag_eval_guard_asks_the_query_model_with_the_benchmarks_domain(
    corpus_env, tmp_path, capsys
):
    def decide(messages) -> str:
        prompt = messages[-1].text
        assert bench.DOMAIN in prompt and bench.BLOCKED in prompt
        off = "boil" in prompt or "capital" in prompt
        return json.dumps({"verdict": "off_topic" if off else "allowed", "reason": "r"})

    model = RuleChat(respond=decide)
    services = Services(chat=lambda settings, role: model, embed=lambda _: EMB)
    out = tmp_path / "guard.json"
    # every question near enough (the fake embedder's distances mean nothing here)
    argv = ["eval", "guard", "--json", "--out", str(out), "--set", "guard_max_distance=2"]
    assert main([*argv, "--calibrate"], services=services) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["items"] >= 60 and report["refusal_precision"] == 1.0
    assert report["refused_but_allowed"] == 0 and report["allowed_but_should_refuse"] > 0
    records = json.loads(out.read_text())["records"]
    assert len(records) == report["items"] and all("distance" in r for r in records)
    halves = report["by_split"]
    assert halves["dev"]["items"] + halves["test"]["items"] == report["items"]
    assert 0 <= report["calibrated_max_distance"] <= 2


def test_the_distance_is_chosen_on_the_dev_half_at_the_recall_asked_for():
    rows = [  # dev: the refusals sit at .7 and .9, the allowed questions at .3 and .8
        {"id": "g001", "label": "allowed", "distance": 0.3},
        {"id": "g003", "label": "off_topic", "distance": 0.7},
        {"id": "g005", "label": "allowed", "distance": 0.8},
        {"id": "g007", "label": "blocked", "distance": 0.9},
    ]
    assert [bench.split_of(r) for r in rows] == ["dev"] * 4
    assert bench.split_of({"id": "g002"}) == "test"
    # all refusals: below .7, halfway between .3 and the next distance
    assert bench.choose_distance(rows, recall=1.0) == 0.5
    # half of them is enough: below .9, halfway between .8 and .9
    assert bench.choose_distance(rows, recall=0.5) == 0.85
