"""Answer evaluation: SQuAD scores by hand, the sampler on the real file, a run on fakes."""

from __future__ import annotations

import json

import pytest

from evaluation import answer_report
from evaluation.answers import by_threshold, evaluate_answers
from evaluation.datasets import DatasetError
from evaluation.splits import side_of
from evaluation.squad import (
    NEWDOCS,
    QAItem,
    exact_match,
    load_questions,
    load_squad,
    newdocs_questions,
    newdocs_sets,
    normalize_answer,
    token_f1,
)
from graph import prompts
from ingest.extract import extract_file
from tests.shared_data import SQUAD_FILE
from tools import tracing
from tools.config import load_settings

NEWDOCS_SETS = newdocs_sets()  # every folder of pages is a set, and is checked below


def test_the_new_documents_sets_are_found():
    assert "git" in NEWDOCS_SETS and "nut" in NEWDOCS_SETS


def test_normalization_drops_case_punctuation_and_articles():
    assert normalize_answer("The  Normans, of  France!") == "normans of france"


def test_exact_match_takes_the_best_gold():
    assert exact_match("the Normans.", ("Vikings", "Normans")) == 1.0
    assert exact_match("Normans of France", ("Normans",)) == 0.0


def test_token_f1_by_hand():
    # pred [in, 10th, century] vs gold [10th, century]: 2 shared, P 2/3, R 1 -> 2*(2/3)/(5/3)=0.8
    assert token_f1("in the 10th century", ("10th century",)) == pytest.approx(0.8)
    # best over golds: "1066" matches the second exactly
    assert token_f1("1066", ("in 1066 AD", "1066")) == 1.0
    assert token_f1("Paris", ("London",)) == 0.0
    assert token_f1("", ("London",)) == 0.0


def test_real_squad_dev_sample_is_seeded_and_balanced():
    a = load_squad(SQUAD_FILE, answerable=5, unanswerable=5, seed=3)
    b = load_squad(SQUAD_FILE, answerable=5, unanswerable=5, seed=3)
    assert [i.id for i in a.items] == [i.id for i in b.items]
    assert sum(i.answerable for i in a.items) == 5 and len(a.items) == 10
    assert all(i.answers for i in a.items if i.answerable)
    assert all(not i.answers for i in a.items if not i.answerable)
    articles = json.loads(SQUAD_FILE.read_text())["data"]
    dev = [x for x in articles if side_of("squad", x["title"]) == "dev"]
    assert len(a.paragraphs) == sum(len(x["paragraphs"]) for x in dev)  # all of dev's
    assert all(i.context_id in a.paragraphs for i in a.items)
    other = load_squad(SQUAD_FILE, answerable=5, unanswerable=5, seed=4)
    assert [i.id for i in other.items] != [i.id for i in a.items]


def test_asking_for_more_questions_than_exist_fails(tmp_path):
    path = tmp_path / "tiny.json"
    qa = {"id": "q1", "question": "Who?", "answers": [{"text": "Ann"}], "is_impossible": False}
    path.write_text(
        json.dumps(
            {"data": [{"title": "Force", "paragraphs": [{"context": "Ann did.", "qas": [qa]}]}]}
        )
    )
    assert len(load_squad(path, answerable=1, unanswerable=0).items) == 1
    with pytest.raises(DatasetError, match="only 0 available"):
        load_squad(path, answerable=1, unanswerable=1)


def test_question_set_loader_reports_the_bad_line(tmp_path):
    path = tmp_path / "q.jsonl"
    path.write_text('{"question": "A?", "answers": ["x"]}\n{"question": "B?"}\n')
    items = load_questions(path)
    assert [(i.answerable, i.answers) for i in items] == [(True, ("x",)), (None, ())]
    path.write_text('{"question": "A?"}\n{"text": "B?"}\n')
    with pytest.raises(DatasetError, match=r"q\.jsonl:2"):
        load_questions(path)


ITEMS = [
    QAItem("1", "How do I install the service?", ("make demo",), True),
    QAItem("2", "What is the capital of France?", (), False),
]


@pytest.fixture
def judge(models):
    return models.chats["judge"]


def test_run_scores_each_item_and_summarises(corpus_env, models, judge, tmp_path):
    # the second question: not found, and again at the second look
    models.answer = ["Run make demo to install the service [1].", *[prompts.NOT_FOUND] * 2]
    report = evaluate_answers(
        corpus_env, ITEMS, judge=True, progress=False, services=models.services
    )
    first, second = report["items"]
    # "run make demo to install service" vs "make demo": 2 of 6 tokens, all of gold: F1 0.5
    assert first["scores"] == {
        "exact_match": 0.0,
        "f1": 0.5,
        "grounded": True,
        "citation_recall": 1.0,
        "citation_precision": 1.0,
        "right": True,
        "completeness": 4,
        "contextual_accuracy": 5,
    }
    assert second["abstained"] is True and second["scores"] == {"correct_abstention": True}
    assert len(judge.calls) == 1  # the abstention is not judged
    assert "Run make demo" in judge.calls[0][0].text  # the judge sees the passages first
    s = report["summary"]
    assert (s["f1"], s["exact_match"], s["abstention_accuracy"]) == (0.5, 0.0, 1.0)
    assert (s["grounded_rate"], s["completeness"], s["errors"]) == (1.0, 4.0, 0)
    assert s["latency"]["p50_ms"] > 0

    report |= {
        "dataset": "tiny",
        "collection": "docs",
        "created": "now",
        "settings": corpus_env.model_dump(mode="json"),
    }
    _, md, png = answer_report.write_outputs(report, tmp_path / "out")
    assert "| token F1 (answerable) | 0.500 |" in md.read_text()
    assert s["verified_by_threshold"][0]["threshold"] == 0.65  # none below the run's own
    assert "| threshold | verified | right | verified precision | floor |" in md.read_text()
    assert png.read_bytes()[:4] == b"\x89PNG"


def test_verified_precision_coverage_and_verified_wrong(corpus_env, models):
    models.answer = ["Run make demo to install the service [1].", "It takes 4 minutes [1]."]
    items = [ITEMS[0], QAItem("9", "How long does it take?", ("12 minutes",), True)]
    summary = evaluate_answers(corpus_env, items, progress=False, services=models.services)[
        "summary"
    ]
    assert summary["verified_wrong"] == 1  # "4 minutes" verified, but the gold says 12
    assert summary["verified_precision"] == 0.5 and summary["coverage"] == 0.5


def test_answers_the_second_opinion_overruled_are_counted(corpus_env, models):
    short = corpus_env.model_copy(update={"answer_style": "short", "max_regenerations": 0})
    models.answer = ["make demo [1]", "4 minutes [1]", "4 minutes [1]", "4 minutes [1]"]
    items = [ITEMS[0], QAItem("9", "How long does it take?", ("4 minutes",), True)]
    summary = evaluate_answers(short, items, progress=False, services=models.services)["summary"]
    assert (summary["overruled"], summary["overruled_right"]) == (1, 1)  # "make demo" was right
    assert summary["verified_precision"] == 1.0 and summary["verified_wrong"] == 0


def test_citation_recall_counts_statements_their_citation_supports(corpus_env, models):
    models.answer = "Run `make setup` to install the service.\n\nIt takes 99 minutes [1]."
    report = evaluate_answers(corpus_env, ITEMS[:1], progress=False, services=models.services)
    assert report["items"][0]["abstained"]  # uncited; 99 not in [1]: the documents do not say
    models.answer = "Run make demo to install the service [1].\n\nIt takes 99 minutes [1]."
    report = evaluate_answers(corpus_env, ITEMS[:1], progress=False, services=models.services)
    assert report["items"][0]["scores"]["citation_recall"] == 0.5
    assert report["summary"]["citation_recall"] == 0.5


def test_a_failing_item_is_recorded_and_the_run_goes_on(corpus_env, models):
    corpus_env = corpus_env.model_copy(update={"verifier_confidence": "logprobs"})
    models.no_logprobs()  # the verifier fails: reported, not fatal
    broken = QAItem("3", "x" * 5000, (), None)  # over max_question_chars: a ValueError
    report = evaluate_answers(
        corpus_env, [broken, ITEMS[0]], progress=False, services=models.services
    )
    assert "max_question_chars" in report["items"][0]["error"]
    assert report["items"][1]["scores"]["f1"] == 0.5
    assert report["summary"]["errors"] == 1 and report["summary"]["model_faults"] == 1
    assert report["items"][1]["fault"].startswith("malformed_output in verify")
    assert report["summary"]["grounded_rate"] == 0.0  # an unchecked answer is not grounded


def test_scores_reach_each_items_trace(corpus_env, models, monkeypatch):
    monkeypatch.setenv("RAG_TRACING", "local")
    settings = load_settings()
    report = evaluate_answers(settings, ITEMS[:1], progress=False, services=models.services)
    trace_id = report["items"][0]["trace_id"]
    scores = {s["name"]: s["value"] for s in tracing.load_scores(settings, trace_id)}
    assert scores["f1"] == 0.5 and scores["grounded"] == 1.0


def test_citation_precision_counts_citations_whose_passage_holds_the_clause(corpus_env, models):
    # [1] holds "make demo"; a second marker for the same clause is not needed only if
    # its passage lacks the clause's facts
    models.answer = "Run `make demo` to install the service [1][1]."
    report = evaluate_answers(corpus_env, ITEMS[:1], progress=False, services=models.services)
    assert report["items"][0]["scores"]["citation_precision"] == 1.0
    models.answer = "Run `make demo` to install the service [1]. It takes 99 minutes [1]."
    report = evaluate_answers(corpus_env, ITEMS[:1], progress=False, services=models.services)
    assert report["items"][0]["scores"]["citation_precision"] == 0.5
    assert report["summary"]["verified_by_category"]["answerable"]["verified_wrong"] == 0


def _answer(confidence: float, grounded: bool, right: bool, threshold: float) -> dict:
    verdict = {"confidence": confidence, "threshold": threshold}
    return {"verdict": verdict, "scores": {"grounded": grounded, "right": right}}


def test_precision_by_threshold_counts_only_what_the_run_could_have_verified():
    run = [
        _answer(0.9, True, True, 0.45),
        _answer(0.7, True, False, 0.45),
        _answer(0.6, True, True, 0.45),
        _answer(0.8, False, True, 0.45),  # sure, but overruled: never verified at any t
    ]
    rows = {row["threshold"]: row for row in by_threshold(run, answerable=4)}
    assert min(rows) == 0.5  # at or above the run's own threshold only
    assert (rows[0.6]["verified"], rows[0.6]["right"]) == (3, 2)
    assert (rows[0.7]["verified"], rows[0.7]["right"], rows[0.7]["precision"]) == (2, 1, 0.5)
    assert rows[0.75]["precision"] == 1.0 and 0 < rows[0.75]["precision_floor"] < 1.0
    assert (rows[0.8]["verified"], rows[0.8]["right"]) == (1, 1)  # not the overruled 0.8
    assert rows[0.6]["coverage"] == 0.5 and rows[0.8]["coverage"] == 0.25  # right of 4
    pair = [_answer(0.7, True, True, 0.65), _answer(0.66, True, True, 0.62)]
    strict = by_threshold(pair, answerable=2)
    assert [row["threshold"] for row in strict] == [0.65, 0.7, 0.75, 0.8]
    assert strict[-1]["verified"] == 0 and strict[-1]["precision"] is None


def test_a_full_answer_is_right_when_it_states_a_gold_answer_as_tokens():
    from evaluation.squad import contains_answer

    assert contains_answer("Exit with code 125 [1].", ("125",))
    assert contains_answer("Run `git bisect start --term-old fast`.", ("--term-old",))
    assert not contains_answer("Use `git clean -X`.", ("-x",))  # -X is another option
    assert not contains_answer("It took 1250 ms.", ("125",))


def test_where_the_gold_answer_was_when_an_answer_missed_it():
    from evaluation.answers import answer_found
    from evaluation.squad import QAItem

    item = QAItem("q", "Which exit code skips?", ("125",), True)
    read = {"passages": [{"text": "Use exit code 125."}], "retrieval": {"dropped": []}}
    cut = {"passages": [{"text": "Bisect."}], "retrieval": {"dropped": [{"snippet": "125"}]}}
    assert answer_found(item, read) == "read"
    assert answer_found(item, cut) == "cut"
    assert answer_found(item, {"passages": [], "retrieval": {}}) == "not_retrieved"


@pytest.mark.parametrize("pages", NEWDOCS_SETS)
def test_the_new_documents_set_keeps_each_page_on_one_side(tmp_path, pages):
    from evaluation.splits import sources_on_both_sides
    from evaluation.squad import load_questions

    items = load_questions(newdocs_questions(pages))
    assert sources_on_both_sides(items) == set()
    for split in ("dev", "test"):
        asked = [i for i in items if i.split == split]
        assert sum(bool(i.answerable) for i in asked) >= 24
        assert sum(i.answerable is False for i in asked) >= 6
        # every answerable question's page is in the set's own folder, and its text as
        # ingestion extracts it (HTML without its tags) holds the answer
        for item in asked:
            if item.answerable:
                docs = extract_file(NEWDOCS / pages / item.context_id, item.context_id)
                text = " ".join(section.text for doc in docs for section in doc.sections)
                page = " ".join(text.split()).lower()
                assert any(" ".join(a.lower().split()) in page for a in item.answers), item.id
    # the folder is what gets ingested: it holds the pages questions come from and
    # nothing else (a provenance note beside the pages named the answers to the
    # unanswerable questions, and an eval answered them from it)
    asked_of = {item.context_id for item in items}
    assert {f.name for f in (NEWDOCS / pages).iterdir()} <= asked_of
    assert (NEWDOCS / f"{pages}_source.md").is_file()
    bad = tmp_path / "bad.jsonl"  # an injected overlap is seen
    bad.write_text(
        '{"question": "a", "answers": ["x"], "source": "p.txt", "split": "dev"}\n'
        '{"question": "b", "answers": ["y"], "source": "p.txt", "split": "test"}\n'
    )
    assert sources_on_both_sides(load_questions(bad)) == {"p.txt"}


def test_comparing_two_runs_counts_questions_whose_outcome_flipped():
    def run(outcomes):
        items = [
            {
                "id": f"q{i}",
                "abstained": o == "abstained",
                "scores": {"grounded": o == "verified"},
            }
            for i, o in enumerate(outcomes)
        ]
        return {"dataset": "d", "items": items, "summary": {"latency": None}}

    result = answer_report.compare(
        run(["verified", "abstained", "not_verified", "verified"]),
        run(["verified", "not_verified", "not_verified", "abstained"]),
    )
    assert result["outcome_flips"] == ["q1", "q3"] and result["outcome_flip_rate"] == 0.5
    assert "differs for 2 questions (50%)" in answer_report.compare_markdown(result)
