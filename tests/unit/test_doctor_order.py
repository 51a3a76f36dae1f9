"""`rag doctor` answers what a user runs it for first: do the models work, does the store
answer, where does data go. The settings table (about eighty lines) only with --settings.

The model checks run in real child processes; only what they run is a stand-in probe."""

from __future__ import annotations

import argparse

from rag_cli import doctor
from rag_cli.main import build_parser
from tools.config import load_settings


def instant_probe(settings, kind, spec, roles) -> doctor.ModelCheck:
    return doctor.ModelCheck(kind, spec, roles, loaded=True, load_s=0.0, first_call_s=0.0)


def report(tmp_path, capsys, **flags) -> list[str]:
    settings = load_settings({"data_dir": tmp_path})
    args = argparse.Namespace(json=False, **flags)
    assert doctor.run(args, settings, probe=instant_probe) == 0
    return capsys.readouterr().out.splitlines()


def test_models_store_and_outbound_come_first_and_no_settings_table(tmp_path, capsys):
    lines = report(tmp_path, capsys, settings=False)
    heads = [line for line in lines if not line.startswith(" ")]
    assert heads[:3] == [
        "models (loading each and making one call):",
        "store:",
        "outbound (every address this configuration sends data to):",
    ]
    assert "configuration:" not in heads and len(lines) < 20
    assert "rag doctor --settings" in "\n".join(lines)
    assert lines[-1] == "doctor: all models working"


def test_settings_adds_the_table_after_them(tmp_path, capsys):
    lines = report(tmp_path, capsys, settings=True)
    heads = [line for line in lines if not line.startswith(" ")]
    assert heads.index("configuration:") > heads.index("store:")
    assert ["k", "5"] in [line.split() for line in lines]  # the default k, under [retrieval]
    assert lines[-1] == "doctor: all models working"


def test_verbose_is_the_same_flag():
    for flag in ("--settings", "--verbose"):
        assert build_parser().parse_args(["doctor", flag]).settings is True
    assert build_parser().parse_args(["doctor"]).settings is False
