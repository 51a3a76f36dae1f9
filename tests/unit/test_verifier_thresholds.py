"""Thresholds per verifier model and confidence (tools/verifier_thresholds.py)."""

from __future__ import annotations

import json

import pytest

from rag_cli.main import main
from tools.config import ConfigError, load_settings
from tools.verifier_thresholds import path_of, record, thresholds_for

OTHER = "openai:judge@http://127.0.0.1:9/v1"


def test_the_default_verifier_read_by_logprobs_uses_the_calibrated_defaults(settings):
    default = thresholds_for(settings, "logprobs")
    assert default.source == "default" and default.warning is None
    assert default.pair == (settings.verify_threshold, settings.verify_threshold_phrase)
    # the same model read by sampling has not been calibrated
    assert thresholds_for(settings, "sampled").source == "uncalibrated"


def test_another_verifier_inherits_the_defaults_with_a_warning():
    inherited = thresholds_for(load_settings({"verifier_model": OTHER}), "logprobs")
    assert inherited.source == "uncalibrated"
    assert "rag eval verifier --split dev --squad --calibrate" in inherited.warning
    assert inherited.as_dict()["warning"] == inherited.warning


def test_recorded_thresholds_belong_to_one_verifier_and_one_confidence():
    settings = load_settings({"verifier_model": OTHER})
    record(settings, "sampled", {"sentence": 0.7, "phrase": 0.8}, commit="abc")
    record(load_settings(), "logprobs", {"sentence": 0.61, "phrase": 0.66})
    sampled = thresholds_for(settings, "sampled")
    assert sampled.source == "calibrated" and sampled.pair == (0.7, 0.8)
    assert thresholds_for(settings, "logprobs").source == "uncalibrated"
    assert thresholds_for(load_settings(), "logprobs").pair == (0.61, 0.66)  # both kept
    saved = json.loads(path_of(settings).read_text())
    assert saved[f"{OTHER} (sampled)"]["commit"] == "abc"


def test_thresholds_the_operator_sets_win_over_recorded_ones():
    record(load_settings(), "logprobs", {"sentence": 0.61, "phrase": 0.66})
    mine = thresholds_for(load_settings({"verify_threshold": 0.9}), "logprobs")
    assert mine.source == "set" and mine.sentence == 0.9 and mine.warning is None


def test_an_unreadable_thresholds_file_names_itself_and_the_fix(settings):
    path_of(settings).parent.mkdir(parents=True, exist_ok=True)
    path_of(settings).write_text("{not json")
    with pytest.raises(ConfigError, match=r"verifier_thresholds.json is unreadable.*calibrate"):
        thresholds_for(settings, "logprobs")


def test_calibrating_records_the_thresholds_answering_then_uses(models, settings, capsys):
    argv = ["eval", "verifier", "--split", "dev", "--calibrate", "--limit", "6", "--json"]
    assert main(argv, services=models.services) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["verifier"] == {
        "model": "local",
        "confidence": "logprobs",
        "samples": None,
        "thresholds_recorded_in": str(path_of(settings)),
    }
    chosen = thresholds_for(settings, "logprobs")
    assert chosen.source == "calibrated"
    assert chosen.pair == (report["thresholds"]["sentence"], report["thresholds"]["phrase"])


def test_the_operator_can_name_the_thresholds_file(tmp_path):
    named = load_settings({"verifier_thresholds_file": tmp_path / "shared.json"})
    record(named, "logprobs", {"sentence": 0.7, "phrase": 0.7})
    assert (tmp_path / "shared.json").is_file() and not path_of(load_settings()).exists()
    assert thresholds_for(named, "logprobs").source == "calibrated"
