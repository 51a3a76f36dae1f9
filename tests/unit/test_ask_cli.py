"""`rag ask` and `rag chat` end to end with fake models over a real (tmp) collection."""

from __future__ import annotations

import json

import pytest

from graph import prompts
from graph.checks.explain import reason
from graph.services import Services
from rag_cli.main import main


def test_ask_json_prints_the_answer_object(corpus_env, models, capsys):
    assert main(["ask", "How do I install the service?", "--json"], services=models.services) == 0
    out = json.loads(capsys.readouterr().out)
    assert set(out) >= {
        "answer",
        "citations",
        "verdict",
        "abstained",
        "queries",
        "timings",
        "trace_id",
        "references",
    }
    assert out["citations"][0]["source"] == "docs/install.md"
    # what the generator read (an abstention is diagnosed from it), and from which version
    assert out["passages"][0]["source"] == "docs/install.md" and out["passages"][0]["text"]
    assert out["retrieval"]["version"] == 1


def test_ask_thread_keeps_history_between_calls(corpus_env, models, capsys):
    assert (
        main(["ask", "How do I enable tracing?", "--thread", "t1"], services=models.services) == 0
    )
    assert models.chats["query"].calls == []
    capsys.readouterr()
    assert (
        main(
            ["ask", "and how do I turn it off?", "--thread", "t1", "--json"],
            services=models.services,
        )
        == 0
    )
    out = json.loads(capsys.readouterr().out)
    assert out["queries"] == [models.rephrased]  # rephrased from the saved history
    assert "Last question: and how do I turn it off?" in models.chats["query"].calls[0][-1].text


def test_a_thread_saved_by_an_older_version_is_read_once_then_checkpointed(
    corpus_env, models, capsys
):
    """Threads were JSON files under <data_dir>/threads; the checkpointer takes them over."""
    from langchain_core.messages import AIMessage, HumanMessage, messages_to_dict

    old = corpus_env.data_dir / "threads" / "t2.json"
    old.parent.mkdir(parents=True)
    turn = [HumanMessage("How do I enable tracing?"), AIMessage("Set the Langfuse keys.")]
    old.write_text(json.dumps(messages_to_dict(turn)))
    for question in ("and how do I turn it off?", "and on again?"):
        assert main(["ask", question, "--thread", "t2"], services=models.services) == 0
    capsys.readouterr()
    # both follow-ups were rephrased with everything before them, the file's turn first
    first, second = (calls[-1].text for calls in models.chats["query"].calls)
    assert "How do I enable tracing?" in first and "How do I enable tracing?" in second
    assert "and how do I turn it off?" in second
    assert (corpus_env.data_dir / "threads.sqlite").exists()


def test_ask_rejects_a_bad_thread_id_and_empty_question(corpus_env, models, capsys):
    assert main(["ask", "hi", "--thread", "../escape"], services=models.services) == 2
    assert main(["ask", "   "], services=models.services) == 2
    assert "question must be a non-empty string" in capsys.readouterr().err


def test_chat_answers_shows_passages_and_starts_over(corpus_env, models, capsys, monkeypatch):
    lines = iter(
        [
            "How do I install the service?",
            "/passages",
            "/prompt",
            "/new",
            "How do I install the service?",
            "/quit",
        ]
    )
    monkeypatch.setattr("builtins.input", lambda _prompt="": next(lines))
    assert main(["chat"], services=models.services) == 0
    out = capsys.readouterr().out
    assert out.count("Run make demo to install the service [1].") == 2
    assert "[1] docs/install.md score=" in out
    assert "--- system ---" in out and "Question: How do I install the service?" in out
    assert models.chats["query"].calls == []  # /new started a fresh conversation


def test_ask_streams_the_answer_once_then_references_and_verdict(corpus_env, models, capsys):
    assert main(["ask", "How do I install the service?"], services=models.services) == 0
    captured = capsys.readouterr()
    assert captured.out.count("Run make demo to install the service [1].") == 1  # not twice
    assert captured.out.index("Run make demo") < captured.out.index("References:")
    assert "Verified: the quoted lines state this answer." in captured.out
    assert "verify: checking the answer" in captured.err


def test_a_regenerated_answer_prints_once_and_its_rejected_draft_never_in_a_pipe(
    corpus_env, models, capsys
):
    models.answer = ["Install with `pip` [1].", "Run make demo to install the service [1]."]
    assert main(["ask", "How do I install the service?"], services=models.services) == 0
    captured = capsys.readouterr()
    assert "Install with `pip`" not in captured.out
    assert captured.out.count("Run make demo to install the service [1].") == 1
    assert "Verified" in captured.out
    assert "generate_answer (attempt 2)" in captured.err  # its own time, not the sum


def test_an_abstention_never_shows_its_draft_or_the_marker_in_a_pipe(corpus_env, models, capsys):
    models.answer = f"The capital of Australia is Canberra [2][3]. {prompts.NOT_FOUND}"
    assert main(["ask", "What is the capital of Australia?"], services=models.services) == 0
    captured = capsys.readouterr()
    assert "Canberra" not in captured.out
    assert prompts.NOT_FOUND not in captured.out + captured.err
    assert "The documents do not say" in captured.out and "(abstained)" not in captured.out


def test_not_verified_says_why(corpus_env, models, capsys):
    models.confidence = 0.1
    assert (
        main(
            ["ask", "How do I install the service?", "--set", "max_regenerations=0"],
            services=models.services,
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "NOT VERIFIED: The checking model could not confirm that [1] (docs/install.md" in out
    assert "confidence" not in out and "threshold" not in out  # no internal readings
    assert "Quoted support:" in out and "[1] docs/install.md" in out


def test_verbose_shows_the_readings_and_quiet_hides_the_quotes(corpus_env, models, capsys):
    models.confidence = 0.1
    base = ["ask", "How do I install the service?", "--set", "max_regenerations=0"]
    assert main([*base, "--verbose"], services=models.services) == 0
    out = capsys.readouterr().out
    assert "checks: literals passed, planted passed, stated passed, qualifiers passed, " in out
    assert "verifier_yes failed" in out
    assert "confidence 0.1 against threshold" in out
    assert main([*base, "--quiet"], services=models.services) == 0
    assert "Quoted support:" not in capsys.readouterr().out


def test_not_verified_by_the_second_opinion_says_what_it_answered(corpus_env, models, capsys):
    models.answer = ["make demo [1]", "4 minutes [1]"]
    short = ["--set", "answer_style=short", "--set", "max_regenerations=0"]
    assert main(["ask", "How do I install the service?", *short], services=models.services) == 0
    out = capsys.readouterr().out
    said = 'Asked again with the sources in another order, the model answered "4 minutes".'
    assert f"NOT VERIFIED: {said}" in out


def test_ctrl_c_in_chat_cancels_the_answer_and_keeps_the_chat(
    corpus_env, models, capsys, monkeypatch
):
    def interrupted(messages):
        raise KeyboardInterrupt

    answers = iter([interrupted, lambda m: "Run make demo to install the service [1]."])
    models.chats["generator"].respond = lambda m: next(answers)(m)
    lines = iter(["How do I install the service?", "How do I install the service?", "/quit"])
    monkeypatch.setattr("builtins.input", lambda _prompt="": next(lines))
    assert main(["chat"], services=models.services) == 0
    out = capsys.readouterr().out
    assert "(answer cancelled" in out and "Run make demo to install the service [1]." in out


class NoRetrieval(Services):
    def read_collection(self, *args, **kwargs):
        pytest.fail("retrieval ran")


def test_a_missing_key_is_reported_before_retrieval(corpus_env, models, capsys, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    argv = ["ask", "How do I install?", "--verifier-model", "openai:gpt-4o-mini"]
    assert main(argv, services=NoRetrieval(chat=lambda s, role: models.chats[role])) == 2
    err = capsys.readouterr().err
    assert "RAG_VERIFIER_MODEL=openai:gpt-4o-mini needs OPENAI_API_KEY" in err


def test_chat_thread_is_saved_and_resumed(corpus_env, models, capsys, monkeypatch):
    def chat(*lines: str) -> str:
        feed = iter([*lines, "/quit"])
        monkeypatch.setattr("builtins.input", lambda _prompt="": next(feed))
        assert main(["chat", "--thread", "work"], services=models.services) == 0
        return capsys.readouterr().out

    chat("How do I install the service?")
    assert models.chats["query"].calls == []  # a first question needs no rephrasing
    out = chat("And how long does it take?")
    assert "(conversation 'work' resumed: 1 earlier turns)" in out
    assert len(models.chats["query"].calls) == 1  # the follow-up was rephrased with history
    history = models.chats["query"].calls[0]
    assert any("How do I install the service?" in m.text for m in history)
    out = chat("/new", "How do I install the service?")
    assert "not saved under --thread" in out


PASSAGES = [
    {
        "text": "Start the server with `rag serve`.\nOpen the chat page with `rag ui`.",
        "source": "docs/server.md",
        "start_line": 10,
        "end_line": 11,
        "page": None,
    }
]


def test_the_reading_question_is_told_with_the_source_and_its_line():
    choice = {
        "literal": "rag ui",
        "options": ["rag serve", "rag ui"],
        "picked": "rag serve",
        "rival": "rag serve",
        "overruled": True,
    }
    verdict = {"confidence": 0.2, "threshold": 0.64, "literal_choice": choice, "cited": [1]}
    said = reason(verdict, PASSAGES)
    assert said.startswith("[1] (docs/server.md, line 10) names rag serve where the answer")
    assert "0.2" not in said and "0.64" not in said
    tie = {**choice, "picked": "rag ui"}  # won, but not by the margin
    assert "names both rag ui and rag serve" in reason({**verdict, "literal_choice": tie}, PASSAGES)


def test_the_verifiers_own_reading_is_told_without_the_internal_marker():
    from graph.prompts import NOT_FOUND

    unfound = {"answer": NOT_FOUND, "agrees": False, "found": False}
    said = reason(
        {"confidence": 0.63, "threshold": 0.66, "own_answer": unfound, "cited": [1]}, PASSAGES
    )
    assert NOT_FOUND not in said and "0.63" not in said
    assert said.endswith("it found no answer in the sources.")
    other = {"answer": "20", "agrees": False, "found": True}
    assert 'it answered "20".' in reason({"own_answer": other}, PASSAGES)
    unsure = {"answer": "20", "agrees": True, "found": True, "sure": 0.42, "sure_enough": False}
    assert reason({"own_answer": unsure}, PASSAGES).endswith("but was not sure of it.")
    copied = reason({"confidence": 0.62, "threshold": 0.72, "copied": True, "cited": [1]}, PASSAGES)
    assert copied.startswith("The answer copies words of [1] (docs/server.md, lines 10-11)")


def test_a_missing_literal_is_told_with_the_statement_and_its_source():
    statement = "Open the chat page with `rag chat` [1]."
    verdict = {"missing": {statement: ["rag chat"]}, "unsupported": [statement], "cited": [1]}
    assert reason(verdict, PASSAGES) == (
        '"Open the chat page with `rag chat`." names rag chat, which [1] (docs/server.md, '
        'lines 10-11) does not name. It says: "Open the chat page with `rag ui`."'
    )
    uncited = "It also runs on Windows."
    verdict = {"missing": {uncited: ["cites no passage"]}, "unsupported": [uncited]}
    assert reason(verdict, PASSAGES).startswith('"It also runs on Windows." cites no source')


def test_chat_prompt_says_which_passage_number_the_answer_gave_each(
    corpus_env, models, capsys, monkeypatch
):
    models.answer = "Set LANGFUSE_TRACING_ENABLED=false to turn tracing off [2]."
    lines = iter(["How do I install the service?", "/prompt", "/quit"])
    monkeypatch.setattr("builtins.input", lambda _prompt="": next(lines))
    assert main(["chat"], services=models.services) == 0
    out = capsys.readouterr().out
    assert "to turn tracing off [1]." in out  # shown renumbered...
    assert "in this prompt, [2] is the answer's [1]" in out  # ...and the prompt says so


def test_the_cli_and_the_chat_page_give_the_same_reason(capsys):
    """One function writes why an answer is not verified (graph/explain.py): the CLI
    prints it, and the chat page's server sends the same sentence to the page."""
    from rag_cli.ask_cmd import print_answer
    from rag_ui.exchange import _reason

    choice = {"literal": "rag ui", "options": ["rag serve", "rag ui"], "picked": "rag serve"}
    verdict = {
        "grounded": False,
        "confidence": 0.2,
        "threshold": 0.62,
        "literal_choice": {**choice, "overruled": True},
    }
    judgement = {"outcome": "not_verified", "reason": "Why.", "statements": []}
    state = {"answer": "Run rag ui [1].", "abstained": False, "verdict": verdict}
    state["judgement"] = judgement
    print_answer({**state, "references": ["[1] a.md"], "streamed": ""})
    printed = capsys.readouterr().out
    assert f"NOT VERIFIED: {_reason(state)}" in printed
    assert _reason({**state, "judgement": {**judgement, "outcome": "verified"}}) == ""


def test_the_documents_do_not_say_shows_the_closest_passages(corpus_env, models, capsys):
    # the answer states nothing its cited passage says: withheld, with what is nearest
    models.answer = "The service needs 16 GB of memory [1]."
    base = ["ask", "How much memory does the service need?", "--set", "max_regenerations=0"]
    assert main(base, services=models.services) == 0
    out = capsys.readouterr().out
    assert "16 GB" not in out and prompts.ABSTAIN_NOT_STATED in out
    assert "Closest passages (none states the answer):" in out and "docs/" in out
    assert "NOT VERIFIED" not in out and "(abstained)" not in out
    assert main([*base, "--json"], services=models.services) == 0
    answer = json.loads(capsys.readouterr().out)
    assert answer["outcome"] == "not_in_documents" and answer["closest"]
    assert answer["closest"][0]["quote"] and answer["verdict"]["documents_say"] is False
