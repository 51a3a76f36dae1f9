"""The answer benchmarks' strict scorer (evaluation/scoring.py) on real items, and the
re-scoring of stored reports (evaluation/rescore.py)."""

from __future__ import annotations

import json

import pytest

from evaluation.answers import _score_item, summarize
from evaluation.lab import REPORTS
from evaluation.rescore import is_full_answers, rescore
from evaluation.scoring import answer_is_right
from evaluation.squad import QAItem, contains_answer, load_questions, newdocs_questions
from tools.text import strip_markers


def _item(name: str, item_id: str) -> QAItem:
    return next(i for i in load_questions(newdocs_questions(name)) if i.id == item_id)


def test_a_gold_the_question_holds_does_not_count_where_the_answer_only_repeats_it():
    # privoxy-actions-5, labelled verified in 2026-11-27-privoxy-test-defaults: the page
    # says a request tag pattern line starts with TAG:, the answer says CLIENT-TAG, and the
    # old scorer found "tag" in the words the answer copied from the question
    item = _item("privoxy", "privoxy-actions-5")
    assert item.answers == ("TAG:", "TAG")
    wrong = (
        "To apply an actions section to requests carrying a specific tag, the request tag "
        'pattern line must start with the prefix "CLIENT-TAG".'
    )
    assert contains_answer(wrong, item.answers)  # what the old scorer counted right
    assert not answer_is_right(item.question, wrong, item.answers)
    assert not answer_is_right(item.question, "It must start with CLIENT-TAG.", item.answers)
    # the gold, given as the answer, still counts
    right = "A request tag pattern line must start with `TAG:`, followed by a regular expression."
    assert answer_is_right(item.question, right, item.answers)
    assert answer_is_right(item.question, "The prefix is TAG:", item.answers)


def test_the_first_words_of_a_longer_gold_do_not_count_for_another_command():
    # dovecot-mail_crypt-5, labelled verified in 2026-11-27-dovecot-test-defaults: -pubout
    # writes the public key, not the private key in the pkey format that was asked for
    item = _item("dovecot", "dovecot-mail_crypt-5")
    assert item.answers == ("openssl pkey -in oldkey.pem -out newkey.pem", "openssl pkey")
    wrong = "openssl pkey -in ecprivkey.pem -pubout -out ecpubkey.pem"
    assert contains_answer(wrong, item.answers)  # what the old scorer counted right
    assert not answer_is_right(item.question, wrong, item.answers)
    assert not answer_is_right(item.question, f"Run `{wrong}`.", item.answers)
    # the command the page gives counts, with other file names, or named alone
    for right in (
        "openssl pkey -in oldkey.pem -out newkey.pem",
        "Convert it with `openssl pkey -in ec.pem -out ec-pkey.pem`.",
        "Use openssl pkey to convert it.",
        "Run `openssl pkey -in old.pem -out new.pem`, then point the plugin at new.pem.",
    ):
        assert answer_is_right(item.question, right, item.answers), right


def test_a_gold_matches_whole():
    q = "With what prefix must a line start?"
    assert not answer_is_right(q, "It starts with CLIENT-TAG.", ("TAG",))
    assert answer_is_right(q, "It starts with TAG: and a pattern.", ("TAG",))
    q = "What should I use from psql instead?"
    assert not answer_is_right(q, "Use the COPY statement.", ("\\copy",))
    assert answer_is_right(q, "Use `\\copy` from psql.", ("\\copy",))
    q = "How do I write that password line?"
    assert not answer_is_right(q, "password = 123=123", ("123\\=123",))
    assert answer_is_right(q, "Write `password = 123\\=123`.", ("123\\=123",))
    assert not answer_is_right(q, "Use `git clean -X`.", ("-x",))
    assert not answer_is_right(q, "It took 1250 ms.", ("125",))
    assert answer_is_right(q, "The key is \\0x4E545030+u.", ("0x4E545030+u",))  # stray "\"


@pytest.mark.parametrize(
    ("name", "item_id", "answer"),
    [  # answers stored in lab/reports that give a gold the question holds, in a new role
        ("git", "git-worktree-1", "Git checks out the branch named `hotfix` in the new worktree."),
        ("sqlite", "sqlite-datatype3-1", "NULL rows come first in the ORDER BY clause."),
        ("sqlite", "sqlite-rowvalue-2", "NULL"),
        ("python", "python-webbrowser-1", "Set the BROWSER environment variable."),
        (
            "ntpsec",
            "ntpsec-monopt-3",
            "The filegen option that creates a hard link from the current element to a file "
            "name without a suffix is link.",
        ),
    ],
)
def test_a_gold_the_question_holds_counts_in_a_new_role(name, item_id, answer):
    item = _item(name, item_id)
    assert contains_answer(item.question, item.answers)  # the question holds a gold
    assert answer_is_right(item.question, answer, item.answers)


def test_restating_the_question_around_its_own_word_is_not_an_answer():
    item = _item("apache", "apache-mod_auth_basic-2")  # the password sent is "password"
    said = "The password is sent with the username."
    assert not answer_is_right(item.question, said, item.answers)
    item = _item("ntpsec", "ntpsec-nts-1")
    said = (
        "The keyword appended to the end of a server line in ntp.conf to use NTS with that "
        'server is "ntps".'
    )
    assert not answer_is_right(item.question, said, item.answers)
    item = _item("sqlite", "sqlite-datatype3-1")  # a choice: both sides is no choice
    assert not answer_is_right(item.question, "NULLs come first or last.", item.answers)


def test_a_full_answer_is_scored_by_the_strict_rule():
    item = _item("privoxy", "privoxy-actions-5")
    out = {
        "answer": 'The line must start with the prefix "CLIENT-TAG" [1].',
        "abstained": False,
        "verdict": {"grounded": True},
    }
    assert _score_item(item, out, "full")["right"] is False
    out["answer"] = "The line must start with `TAG:` [1]."
    assert _score_item(item, out, "full")["right"] is True


def _report(answer: str) -> dict:
    item = _item("dovecot", "dovecot-mail_crypt-5")
    record = {
        "id": item.id,
        "question": item.question,
        "answerable": True,
        "gold": list(item.answers),
        "answer": answer,
        "abstained": False,
        "verdict": {"grounded": True, "confidence": 0.9, "threshold": 0.55},
        "attempts": 1,
        "seconds": 1.0,
        "scores": {"grounded": True, "right": True},
    }
    report = {"kind": "answers", "settings": {"answer_style": "full"}, "items": [record]}
    report["summary"] = summarize(report["items"])
    return report


def test_rescoring_a_report_keeps_what_it_replaces_and_changes_nothing_twice():
    report = _report("openssl pkey -in ecprivkey.pem -pubout -out ecpubkey.pem [1]")
    assert is_full_answers(report)
    assert report["summary"]["verified_wrong"] == 0
    assert rescore(report) == {"dovecot-mail_crypt-5": [True, False]}
    scores = report["items"][0]["scores"]
    assert (scores["right"], scores["right_v1"]) == (False, True)
    assert report["summary"]["verified_wrong"] == 1
    assert report["summary"]["verified_precision"] == 0.0
    assert report["rescored"]["summary_v1"]["verified_precision"] == 1.0
    assert report["rescored"]["changed"] == {"dovecot-mail_crypt-5": [True, False]}
    before = json.dumps(report)
    assert rescore(report) == {}
    assert json.dumps(report) == before
    right = _report("openssl pkey -in old.pem -out new.pem [1]")
    assert rescore(right) == {} and right["rescored"]["changed"] == {}


def test_the_stored_reports_are_rescored_and_strictly_stricter():
    """Every stored report of full answers holds the strict rule's judgement, and every
    answer it counts right, the old rule (``states``) counted right too."""
    for path in sorted(REPORTS.glob("*.json")):
        report = json.loads(path.read_text(encoding="utf-8"))
        if not is_full_answers(report):
            continue
        assert "rescored" in report, path.name
        for item in report["items"]:
            scores = item.get("scores") or {}
            if "right" not in scores or not item.get("answerable"):
                continue
            answer = strip_markers(item["answer"], set()).strip()
            strict = answer_is_right(item["question"], answer, item["gold"])
            assert scores["right"] == strict, (path.name, item["id"])
            assert not strict or contains_answer(answer, tuple(item["gold"])), item["id"]
