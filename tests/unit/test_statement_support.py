"""Support found statement by statement (graph/checks/support.py), the judgement built
from it (graph/checks/judgement.py), and the recipe for adding an answer check."""

from __future__ import annotations

from dataclasses import asdict

import pytest

from graph.checks.explain import reason
from graph.checks.judgement import judge
from graph.checks.pipeline import CHECKS, Bars, Case, Check, Finding, run_checks
from graph.checks.readings import asks_for_one
from graph.checks.support import quote_states, recited, statement_support
from tests.fakes import RuleChat
from tools.answer_check import FirstTokenJudge
from tools.retrieval.hybrid import Passage

SERVER = (
    "`rag serve` starts the LangGraph server; `rag ui` starts the chat page. "
    "The server listens on port 8123."
)
PASSAGES = [
    asdict(Passage("Ingestion reads Markdown and PDF files.", "ingest.md", ["i"], 0.0, 0.0)),
    asdict(Passage(SERVER, "server.md", ["s"], 0.0, 0.0)),
]


def test_a_quote_states_a_statement_only_with_its_literals_and_its_relation():
    assert quote_states("`rag serve` starts the LangGraph server", SERVER)
    # the literal is there, but its part of the sentence says something else of it
    assert not quote_states("`rag ui` starts the LangGraph server", SERVER)
    assert not quote_states("The server listens on port 9000", SERVER)  # another number
    # one shared word is not a statement's content
    assert not quote_states("The server restarts itself every night", SERVER)


SSEOF_Q = "Which input option works like -ss but relative to the end of file?"
SSEOF_A = "The -sseof option works like -ss but relative to the end of file."
RC_Q = "What line does the manual say to add to /etc/rc.conf?"


@pytest.mark.parametrize(
    ("question", "answer", "quote", "stated"),
    [
        # privoxy dev: a configuration example is not the default
        (
            "What is the default value of max-client-connections?",
            "The default value of max-client-connections is 256.",
            "max-client-connections 256",
            False,
        ),
        (
            "What is the default value of max-client-connections?",
            "The default value of max-client-connections is 256.",
            "The default value of max-client-connections is 256.",
            True,
        ),
        # kea dev: a list naming the variable does not say it is the one asked about
        (
            "Which environment variable sets that early logging output to a file?",
            "The variable that sets the early logging output to a file is KEA_LOCKFILE_DIR.",
            "These variables control logging during startup: KEA_LOCKFILE_DIR",
            False,
        ),
        # the relation may stand in another part of the sentence, not in a rival's part
        (
            SSEOF_Q,
            SSEOF_A,
            '-sseof position (input) Like the -ss option but relative to the "end of file".',
            True,
        ),
        (
            SSEOF_Q,
            SSEOF_A,
            "-sseof position (input). -ss position works like -to relative to the end of file.",
            False,
        ),
        # words about the source ("the manual says") are not the relation
        (
            RC_Q,
            "The manual says to add \"privoxy_enable='YES'\" to /etc/rc.conf.",
            "To start Privoxy upon booting, add \"privoxy_enable='YES'\" to /etc/rc.conf.",
            True,
        ),
    ],
)
def test_a_statement_restating_the_question_needs_its_relation_said_of_the_literal(
    question, answer, quote, stated
):
    assert quote_states(answer, quote, question) is stated


def test_light_words_around_a_statement_need_no_quote():
    question = "Which systemd service do we start to run the DHCPv4 server?"
    answer = "We start the isc-kea-dhcp4-server service using systemctl."
    assert quote_states(answer, "# systemctl start isc-kea-dhcp4-server", question)


def test_a_parenthesis_is_one_part_and_a_code_block_says_run_it():
    # the ";" inside the parentheses does not cut the sentence from its subject
    quote = "`make demo` builds it once (about four minutes; the wheel is kept), then answers."
    assert quote_states("`make demo` builds it once and then answers", quote)
    shown = "Start the server:\n\n```\nrag serve --port 8123\n```"
    assert quote_states("You would run `rag serve --port 8123`", shown)
    assert not quote_states("You would run `rag serve --port 8123`", shown.replace("```", ""))
    assert not quote_states("Run `rag serve --port 8123` to delete every collection", shown)


def test_support_is_found_in_any_passage_the_generator_read_and_re_cited_there():
    answer = "The server listens on port 8123 [1]."  # the model cited the wrong passage
    found = statement_support(answer, PASSAGES, "Which port does the server use?")
    assert found[0]["supported"] and found[0]["cited"] == [1]
    assert found[0]["quotes"][0]["n"] == 2 and "8123" in found[0]["quotes"][0]["quote"]
    assert recited(answer, found) == "The server listens on port 8123 [2]."


def test_a_statement_repeating_the_question_carries_no_fact():
    found = statement_support(
        "The server uses a port [2].", PASSAGES, "Which port does the server use?"
    )
    assert not found[0]["facts"] and not found[0]["supported"]


def test_a_statement_saying_only_where_it_is_stated_carries_no_fact():
    answer = "The server listens on port 8123 [2]. This is stated in [2]."
    found = statement_support(answer, PASSAGES, "Which port does the server use?")
    assert [s["facts"] for s in found] == [True, False] and found[0]["supported"]


def test_the_embedder_ranks_the_quotes_it_never_decides():
    calls: list[list[str]] = []

    def embed(texts: list[str]) -> list[list[float]]:
        calls.append(texts)
        return [[1.0, 0.0] for _ in texts]

    found = statement_support("`rag ui` starts the LangGraph server [2].", PASSAGES, "", embed)
    assert not found[0]["supported"] and not calls  # no quote stated it: nothing to rank
    found = statement_support("`rag serve` starts the LangGraph server [2].", PASSAGES, "", embed)
    assert found[0]["found_by"] == ["embedding", "text"]


def test_only_a_question_asking_for_one_thing_gets_the_reading_question():
    assert asks_for_one("Which setting controls how long a model call may take?")
    assert asks_for_one("What is the default port?") and asks_for_one("How many passages?")
    assert not asks_for_one("How do I switch the answer generator to an OpenAI server?")
    assert not asks_for_one("What does rag ingest do with a file it cannot read?")


def _case(draft: str, question: str = "Which port does the server listen on?") -> Case:
    judge_model = RuleChat(respond=lambda _m: "yes", first_token=lambda _m: {"yes": 0.9, "no": 0.1})
    return Case(FirstTokenJudge(judge_model, retries=1), question, draft, PASSAGES, Bars(0.6, 0.7))


def test_the_judgement_names_the_statement_nothing_states():
    draft = "The server listens on port 8123 [2]. It restarts every night [2]."
    verdict = dict(run_checks(_case(draft)))
    judged, shown = judge(question="q", draft=draft, verdict=verdict, passages=PASSAGES)
    assert judged["outcome"] == "not_verified" and shown == draft
    assert judged["unsupported"] == ["It restarts every night."]
    assert judged["reason"].startswith('No passage the answer was written from states "It restarts')
    nothing = "The server restarts every night [2]."
    verdict = dict(run_checks(_case(nothing)))
    judged, shown = judge(question="q", draft=nothing, verdict=verdict, passages=PASSAGES)
    assert judged["outcome"] == "not_in_documents" and judged["withheld"] == nothing
    assert nothing not in shown


def test_a_check_added_by_the_recipe_runs_is_reported_and_explained():
    """docs_corpus/architecture.md, "Adding an answer check": one function from the case
    and what the checks before found to a Finding, and one entry in the list."""

    def not_8123(case: Case, so_far) -> Finding:
        """The toy check: an answer naming port 8123 is never verified (say, the port
        this deployment moved away from)."""
        bad = "8123" in case.draft
        why = "The answer names port 8123, which this deployment no longer uses."
        return Finding(passed=not bad, sets={"vetoed": True} if bad else {}, reason=why)

    checks = (*CHECKS, Check("not_8123", lambda case, so_far: True, not_8123))
    command = "`rag serve` starts the LangGraph server [2]."
    verdict = run_checks(_case(command, "Which command starts the LangGraph server?"), checks)
    assert verdict["grounded"] and verdict["checks"][-1]["check"] == "not_8123"
    verdict = run_checks(_case("The server listens on port 8123 [2]."), checks)
    assert verdict["checks"][-1] == {
        "check": "not_8123",
        "passed": False,
        "facts": {"reason": "The answer names port 8123, which this deployment no longer uses."},
    }
    assert not verdict["grounded"]
    assert reason(dict(verdict), PASSAGES).startswith("The answer names port 8123")


def test_one_list_item_or_table_row_says_all_it_says_of_its_head_term():
    question = "How many milliseconds does the CGI servlet wait for stderr to finish?"
    clause = "The CGI servlet waits for stderr reading to complete for 2000 milliseconds."
    item = (
        "- stderrTimeout - The time (in milliseconds) to wait for the reading of stderr to "
        "complete before terminating the CGI process. Default is 2000."
    )
    assert quote_states(clause, item, question)
    row = "stderrTimeout | The time to wait for the reading of stderr to complete | 2000"
    assert quote_states(clause, row, question)
    # two sentences that are not one item are still two subjects: the one naming 2000
    # says nothing of completing
    prose = "The time to wait for the reading of stderr to complete. Default is 2000."
    assert not quote_states(clause, prose, question)
