"""`rag eval guard`: the labelled questions and the scores (fake query model)."""

from __future__ import annotations

import json

from evaluation import guard as bench
from graph.services import Services
from rag_cli.main import main
from tests.fakes import RuleChat


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


def test_rag_eval_guard_asks_the_query_model_with_the_benchmarks_domain(tmp_path, capsys):
    def decide(messages) -> str:
        prompt = messages[-1].text
        assert bench.DOMAIN in prompt and bench.BLOCKED in prompt
        off = "boil" in prompt or "capital" in prompt
        return json.dumps({"verdict": "off_topic" if off else "allowed", "reason": "r"})

    model = RuleChat(respond=decide)
    services = Services(chat=lambda settings, role: model)
    out = tmp_path / "guard.json"
    argv = ["eval", "guard", "--json", "--out", str(out), "--set", f"data_dir={tmp_path}"]
    assert main(argv, services=services) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["items"] >= 60 and report["refusal_precision"] == 1.0
    assert report["refused_but_allowed"] == 0 and report["allowed_but_should_refuse"] > 0
    assert len(json.loads(out.read_text())["records"]) == report["items"]
