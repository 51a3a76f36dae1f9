"""The evidence selector (tools/retrieval/evidence.py): units, selection, citations."""

from __future__ import annotations

from graph import build_graph
from graph.services import Services
from tests.fakes import HashEmbeddings
from tools.resilient import ResilientEmbeddings
from tools.retrieval import evidence
from tools.retrieval.hybrid import Passage

PASSAGES = {"evidence": "passages"}
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
        "# Bisect" + evidence.GAP + "The special exit code 125 should be used when the "
        "current source code\ncannot be tested." + evidence.GAP + "- `git bisect reset` ends it"
    )
    # the citation points at the lines kept: the heading (10) to the item (17)
    assert (kept.start_line, kept.end_line) == (10, 17)


def test_past_the_floor_only_units_near_the_best_score_are_read():
    p = passage()
    units = evidence.units_of([p])
    scores = [0.1] * len(units)
    scores[6], scores[3], scores[5] = 1.0, 0.85, 0.7  # reset, exit code, start

    def read(budget: int, floor: int, ratio: float) -> str:
        [kept] = evidence.select([p], units, scores, budget, 0, floor, ratio)
        return kept.text

    # the floor reached with the best unit, only the one scoring 0.8 of it or more follows
    assert read(1000, 20, 0.8) == read(100, None, 0.0)
    assert "git bisect start" not in read(1000, 20, 0.8)
    # below the floor the next best are read whatever their score; the budget still caps
    assert "git bisect start" in read(1000, 150, 0.8)
    assert read(30, 20, 0.0) == "# Bisect" + evidence.GAP + "- `git bisect reset` ends it"
    # ratio 0 is the fixed budget: every unit until the budget is used, below 0 too
    assert read(1000, 20, 0.0) == read(1000, None, 0.0) == p.text.strip()
    scores[:] = [-0.5] * len(units)
    assert read(1000, 20, 0.0) == p.text.strip()


def test_a_unit_comes_with_its_neighbours_as_the_file_separates_them():
    p = passage()
    units = evidence.units_of([p])
    scores = [0.0] * len(units)
    scores[4] = 1.0  # "Any other code...": its neighbours are a sentence and a list item
    [kept] = evidence.select([p], units, scores, budget_chars=1, neighbours=1)
    assert kept.text == (
        "# Bisect" + evidence.GAP + "The special exit code 125 should be used when the "
        "current source code\ncannot be tested. Any other code above 0 marks the commit bad.\n\n"
        "- `git bisect start` begins a session"
    )


REFERENCE = (
    "## Parameters\n"
    "\n"
    "#### TCP_FrameDelimiter\n"
    "\n"
    "| type | default |\n"
    "|---|---|\n"
    "| integer | 10 |\n"
    "\n"
    "Sets a custom frame delimiter for TCP transmission. It is used in traditional mode.\n"
    "\n"
    "#### KeepAlive\n"
    "\n"
    "Enable keep-alive packets.\n"
)


def test_a_unit_comes_with_the_heading_that_names_what_it_describes():
    p = passage(REFERENCE, 1)
    units = evidence.units_of([p])
    described = next(i for i, u in enumerate(units) if u.text([p]).startswith("Sets a"))
    assert units[units[described].heading].text([p]) == "#### TCP_FrameDelimiter"
    assert units[0].heading is None and units[1].heading is None  # headings carry none
    scores = [0.0] * len(units)
    scores[described] = 1.0
    [kept] = evidence.select([p], units, scores, budget_chars=1, neighbours=0)
    assert kept.text == (
        "#### TCP_FrameDelimiter" + evidence.GAP + "Sets a custom frame delimiter for TCP "
        "transmission."
    )
    # the next section's unit comes with its own heading, not the one before
    keep_alive = units[-1]
    assert units[keep_alive.heading].text([p]) == "#### KeepAlive"


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


TABLE = (
    "Each splitter has a default size:\n"
    "\n"
    "| splitter | default size |\n"
    "|---|---|\n"
    "| `chars` | 1000 characters |\n"
    "| `lines` | 100 lines |\n"
    "| `tokens` | 256 tokens |\n"
)


def test_a_table_row_is_kept_with_its_header_and_without_other_rows():
    p = passage(TABLE, 1)
    units = evidence.units_of([p])
    assert [u.header for u in units] == [(), (), (), (1, 2), (1, 2), (1, 2)]
    scores = [0.0] * len(units)
    scores[4] = 1.0  # the `lines` row; its neighbours are rows, not its context
    [kept] = evidence.select([p], units, scores, budget_chars=1, neighbours=1)
    assert kept.text == (
        "| splitter | default size |\n|---|---|" + evidence.GAP + "| `lines` | 100 lines |"
    )


def test_a_row_is_scored_with_its_header_and_a_header_scores_nothing_alone():
    p = passage(TABLE, 1)
    units = evidence.units_of([p])
    scores = evidence.score_units(units, [p], ["default size of lines"], HashEmbeddings(), 1.0)
    header, separator, chars, lines = scores[1:5]
    assert header == separator == 0.0
    assert lines > chars > 0.0  # the row's own words decide between rows


def test_a_unit_quoting_the_question_gets_no_credit_for_the_quotation():
    question = "How do I switch the generator to a server?"
    quoting = passage(f'The demo asks "{question}" and prints the answer.', 1)
    answering = passage("Set the generator spec to openai:NAME@URL to use a server.", 5)
    units = evidence.units_of([quoting, answering])
    scores = evidence.score_units(units, [quoting, answering], [question], HashEmbeddings(), 1.0)
    # the quoting sentence ranks first in retrieval and shares every word of the question
    assert scores[1] > scores[0]


def test_of_equal_units_the_one_from_the_passage_ranked_higher_wins():
    first, second = passage("Tags mark releases.", 1), passage("Tags mark releases.", 5)
    units = evidence.units_of([first, second])
    scores = evidence.score_units(units, [first, second], ["tags"], HashEmbeddings(), 1.0)
    assert abs(scores[0] - scores[1] - evidence.RANK_WEIGHT / 2) < 1e-9


def test_the_graph_reads_evidence_by_default_and_whole_passages_when_asked(corpus_env, models):
    app = build_graph()
    question = {"question": "How do I install the service?"}
    out = app.invoke(question, {}, context=models.services)
    assert "select_evidence" in out["timings"]
    assert (
        out["retrieval"]["evidence"]["chars_read"]
        <= out["retrieval"]["evidence"]["chars_retrieved"]
    )
    whole = app.invoke(question, {"configurable": PASSAGES}, context=models.services)
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
    out = build_graph().invoke({"question": "How do I install the service?"}, {}, context=services)
    assert "embedding server down" in out["retrieval"]["evidence_error"]
    assert out["outcome"] == "verified"  # answered from the whole passages
