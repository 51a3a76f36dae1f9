"""The helper every real-model graph test runs through fails on a model fault.

A failing model is handed to the graph through the runtime context, as any service is;
the product answers honestly (an abstention, or "not verified"), and the test helper
must turn that into a failure rather than a pass.
"""

from __future__ import annotations

import pytest

from graph import config_for
from tests.graph_runs import run_graph
from tools.errors import LLMTimeoutError


def _timeout(messages) -> str:
    raise LLMTimeoutError("no reply in 30 s")


QUESTION = {"question": "How do I install the service?"}


def test_a_healthy_run_passes(corpus_env, models):
    out = run_graph(QUESTION, config_for(), context=models.services)
    assert out["outcome"] == "verified"


def test_a_generator_that_times_out_fails_the_run(corpus_env, models):
    models.chats["generator"].respond = _timeout
    with pytest.raises(AssertionError, match=r"run: .*timeout"):
        run_graph(QUESTION, config_for(llm_max_retries=0), context=models.services)


def test_a_verifier_that_fails_fails_the_run_though_the_answer_is_kept(corpus_env, models):
    models.no_logprobs()
    with pytest.raises(AssertionError, match=r"verifier: verifier failed"):
        run_graph(
            QUESTION,
            config_for(llm_max_retries=0, verifier_confidence="logprobs"),
            context=models.services,
        )


def test_a_failing_second_opinion_fails_the_run(corpus_env, models):
    calls = []

    def first_only(messages) -> str:
        calls.append(messages)
        if len(calls) > 1:
            raise LLMTimeoutError("no reply in 30 s")
        return "make demo [1]"

    models.chats["generator"].respond = first_only
    with pytest.raises(AssertionError, match=r"second opinion: .*no reply"):
        run_graph(QUESTION, config_for(answer_style="short"), context=models.services)
