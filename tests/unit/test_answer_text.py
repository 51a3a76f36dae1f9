"""A draft that names nothing, and sentences about the passages (graph/answer_text.py)."""

from __future__ import annotations

from graph.checks.repairs import adds_nothing, without_source_talk

PORT = (
    "One UDP input listens on three ports, and my rules need to know which one a message "
    "came in on. Which input parameter adds the port number to the inputname property?"
)


def test_the_question_written_back_around_a_marker_adds_nothing():
    assert adds_nothing(
        PORT, "The input parameter that adds the port number to the inputname property is [1]."
    )
    assert adds_nothing(PORT, "The input parameter that adds the port number is [1] [2].")


def test_an_answer_that_names_something_or_says_yes_or_no_adds_something():
    named = "The input parameter that adds the port number is Name.appendPort [1]."
    assert not adds_nothing(PORT, named)
    # a literal the question offered, picked: it does not end in a marker slot
    assert not adds_nothing("Does it print Assertion failed or nothing?", "Assertion failed [1]")
    assert not adds_nothing("Does basename ignore case?", "No, basename does not ignore case [1].")
    assert not adds_nothing("Which flag, [OR] or [NC]?", "The flag is [OR]. [1]")


def test_sentences_naming_the_passages_are_dropped_and_nothing_else():
    question = "Which imfile input parameter recognises where a new message starts?"
    draft = (
        "The imfile input parameter is startmsg.regex. This parameter is defined in the "
        "rsyslog/imfile.html document, lines 342-342. [1]"
    )
    location = "rsyslog/imfile.html, lines 342-342"
    assert without_source_talk(draft, question, [location]) == (
        "The imfile input parameter is startmsg.regex."
    )
    spaced = "Indent it:\n    run  it\nas shown [1].  This is supported by passage [1]."
    assert without_source_talk(spaced, "How?", []) == "Indent it:\n    run  it\nas shown [1]."
    # naming again what another sentence of the answer said adds nothing either
    repeated = (
        "The startmsg.regex parameter recognises where a new message starts. The "
        "startmsg.regex parameter is defined in the rsyslog/imfile.html document, lines "
        "322-342. [1]"
    )
    assert (
        without_source_talk(repeated, "Which parameter?", ["rsyslog/imfile.html, lines 322-342"])
        == "The startmsg.regex parameter recognises where a new message starts."
    )
    # a sentence about a document that says something else stays
    kept = "The document says the limit is 20,000 messages [1]."
    assert without_source_talk(kept, "What is the limit?", []) == kept
    # an answer that is only about the passages is left whole: nothing else would remain
    only = "This is supported by passage [1]."
    assert without_source_talk(only, "Where?", []) == only
