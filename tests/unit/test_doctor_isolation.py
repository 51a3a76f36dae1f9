"""A model that crashes natively or hangs fails its doctor check; the doctor goes on.

The children here are real spawned processes; only what they run is a stand-in for a
model (a process that kills itself with SIGSEGV, as llama.cpp's AMX path did).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import time

from rag_cli import doctor
from tools.config import load_settings
from tools.isolated import run_isolated


def segfault_on_chat(settings, kind, spec, roles) -> doctor.ModelCheck:
    if kind == "chat":
        os.kill(os.getpid(), signal.SIGSEGV)
    return doctor.ModelCheck(kind, spec, roles, loaded=True, load_s=0.0, first_call_s=0.0)


def sleep_forever(seconds: float) -> None:
    time.sleep(seconds)


def raise_value_error(message: str) -> None:
    raise ValueError(message)


def test_a_segfaulting_model_is_a_failed_check_and_the_doctor_goes_on(tmp_path, capsys):
    settings = load_settings({"data_dir": tmp_path})
    code = doctor.run(argparse.Namespace(json=True), settings, probe=segfault_on_chat)
    report = json.loads(capsys.readouterr().out)
    chat, embedding = report["models"]
    assert code == 1 and report["ok"] is False
    assert "SIGSEGV" in chat["error"] and "LLAMA_CMAKE_ARGS" in chat["error"]
    assert embedding["error"] is None and embedding["loaded"]  # checked after the crash


def test_the_text_report_names_the_signal_per_model(tmp_path, capsys):
    settings = load_settings({"data_dir": tmp_path})
    code = doctor.run(argparse.Namespace(json=False), settings, probe=segfault_on_chat)
    out = capsys.readouterr().out
    assert code == 1
    assert "FAIL chat" in out and "died of SIGSEGV" in out
    assert "ok   embedding" in out and out.rstrip().endswith("doctor: problems found")


def test_a_hang_past_the_timeout_is_stopped_and_named():
    result = run_isolated(sleep_forever, 60.0, timeout_s=3)
    assert result.timed_out and not result.ok
    assert result.reason(3) == "no answer after 3s: the process was stopped"


def test_an_exception_in_the_child_comes_back_as_an_error():
    result = run_isolated(raise_value_error, "bad reply", timeout_s=60)
    assert not result.ok and result.signal is None
    assert result.error.startswith("ValueError: bad reply")


def test_a_value_comes_back():
    assert run_isolated(divmod, 7, 2, timeout_s=60).value == (3, 1)
