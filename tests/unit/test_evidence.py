"""The evidence selector (tools/evidence.py): units, selection, what a citation points at."""

from __future__ import annotations

from graph import build_graph
from graph.services import Services
from tests.fakes import HashEmbeddings
from tools import evidence
from tools.resilient import ResilientEmbeddings
from tools.retrieval import Passage

SENTENCES = {"evidence": "sentences"}
DOC = (
    "# Bisect\n"
    "\n"
    "Bisect finds the commit that introduced a bug. It asks you to mark commits.\n"
    "The special exit code 125 should be used when the current source code\n"
    "cannot be tested. Any other code above 0 marks the commit bad.\n"
    "\n"
    "- `git bisect start` begins a session\n"
    "- `git bisect reset` ends it\n"
    "\n"
    "```\n"
    "git bisect run make test. It stops.\n"
    "```\n"
)


def passage(text: str = DOC, start_line: int | None = 10) -> Passage:
    end = None if start_line is None else start_line + text.count("\n")
    return Passage(text, "git-bisect.txt", ["c1"], 1.0, 0.2, start_line=start_line, end_line=end)


def texts(p: Passage) -> list[str]:
    return [u.text([p]) for u in evidence.units_of([p])]


def test_a_passage_is_cut_into_sentences_items_headings_and_whole_code_blocks():
    assert texts(passage()) == [
        "# Bisect",
        "Bisect finds the commit that introduced a bug.",
        "It asks you to mark commits.",
        "The special exit code 125 should be used when the current source code\ncannot be tested.",
        "Any other code above 0 marks the commit bad.",
        "- `git bisect start` begins a session",
        "- `git bisect reset` ends it",
        "```\ngit bisect run make test. It stops.\n```",
    ]


def test_the_best_units_are_kept_in_reading_order_with_a_gap_between():
    p = passage()
    units = evidence.units_of([p])
    scores = [0.0] * len(units)
    scores[6] = 1.0  # `git bisect reset`
    scores[3] = 0.9  # the exit-code sentence
    [kept] = evidence.select([p], units, scores, budget_chars=100, neighbours=0)
    assert kept.text == (
        "The special exit code 125 should be used when the current source code\n"
        "cannot be tested." + evidence.GAP + "- `git bisect reset` ends it"
    )
    # the citation points at the lines kept: the exit-code sentence (13) to the item (17)
    assert (kept.start_line, kept.end_line) == (13, 17)


def test_a_unit_comes_with_its_neighbours_as_the_file_separates_them():
    p = passage()
    units = evidence.units_of([p])
    scores = [0.0] * len(units)
    scores[4] = 1.0  # "Any other code...": its neighbours are a sentence and a list item
    [kept] = evidence.select([p], units, scores, budget_chars=1, neighbours=1)
    assert kept.text == (
        "The special exit code 125 should be used when the current source code\n"
        "cannot be tested. Any other code above 0 marks the commit bad.\n\n"
        "- `git bisect start` begins a session"
    )


def test_a_passage_with_no_chosen_unit_is_left_out_and_the_best_comes_first():
    first, second = passage(), passage("Unrelated text about tags. Nothing else.", 1)
    units = evidence.units_of([first, second])
    scores = [0.1] * len(units)
    scores[-1] = 2.0  # the second passage's last sentence is the best unit
    kept = evidence.select([first, second], units, scores, budget_chars=10, neighbours=0)
    assert [k.text for k in kept] == ["Nothing else."]


def test_a_passage_that_is_not_its_files_lines_keeps_its_range():
    p = passage(start_line=None)
    units = evidence.units_of([p])
    [kept] = evidence.select([p], units, [1.0] * len(units), 20, 0)
    assert kept.start_line is None


def test_keyword_overlap_weighs_rare_words_of_the_question():
    scores = evidence.keyword_overlap(
        ["which exit code skips a commit"],
        ["The exit code 125 skips it.", "Mark the commit bad.", "Nothing here."],
    )
    assert scores[0] > scores[1] > scores[2] == 0.0


def test_the_graph_reads_evidence_when_asked_and_whole_passages_by_default(corpus_env, models):
    app = build_graph()
    question = {"question": "How do I install the service?"}
    out = app.invoke(question, {"configurable": SENTENCES}, context=models.services)
    assert "select_evidence" in out["timings"]
    assert (
        out["retrieval"]["evidence"]["chars_read"]
        <= out["retrieval"]["evidence"]["chars_retrieved"]
    )
    whole = app.invoke(question, {}, context=models.services)
    assert "select_evidence" not in whole["timings"] and "evidence" not in whole["retrieval"]


def test_an_embedder_failure_reads_the_whole_passages(corpus_env, models):
    class FailsAfterRetrieval(HashEmbeddings):
        """Embeds the question for retrieval, then fails: the evidence step's call."""

        seen = 0

        def embed_documents(self, texts):
            self.seen += 1
            if self.seen > 1:
                raise ConnectionError("embedding server down")
            return super().embed_documents(texts)

    embedder = ResilientEmbeddings(FailsAfterRetrieval(), retries=0)  # as the factory wraps
    services = Services(
        chat=lambda settings, role: models.chats[role],
        embed=lambda _: embedder,
        embed_documents=lambda _: embedder,
    )
    out = build_graph().invoke(
        {"question": "How do I install the service?"}, {"configurable": SENTENCES}, context=services
    )
    assert "embedding server down" in out["retrieval"]["evidence_error"]
    assert out["outcome"] == "verified"  # answered from the whole passages
