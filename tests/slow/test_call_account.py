"""The answer's account of its model calls against the real local model: the prompt
tokens it says the KV cache kept are the ones llama.cpp did not compute, by llama.cpp's
own counters (tools/models/local_llm.py, reused_tokens)."""

from __future__ import annotations

import pytest
from langchain_core.messages import HumanMessage, SystemMessage

from tools.config import load_settings
from tools.models.factory import chat_model
from tools.models.local_llm import shared_model

pytestmark = pytest.mark.slow

# a shared instruction block of a few hundred tokens, as the passages open every prompt
PREFIX = "\n".join(
    f"[{n}] Setting number {n} of the service is called option_{n} and defaults to {n * 7}."
    for n in range(1, 25)
)


def computed_by_llama(llm, messages, **bind) -> tuple[dict, int]:
    """The reply's usage and the prompt tokens llama.cpp evaluated for it."""
    from llama_cpp import llama_cpp

    loaded = shared_model(llm.model_path, llm.n_ctx, llm.n_threads)
    ctx = loaded.llama._ctx.ctx
    llama_cpp.llama_perf_context_reset(ctx)
    reply = llm.bind(**bind).invoke(messages)
    perf = llama_cpp.llama_perf_context(ctx)
    # a batch of several tokens counts in n_p_eval, one token in n_eval; both read 1
    # when nothing was counted
    return reply.usage_metadata, (perf.n_p_eval if perf.n_p_eval > 1 else 0)


def test_a_reading_after_another_computes_only_what_is_new():
    llm = chat_model(load_settings(), "verifier")
    reading = {"logprobs": True, "top_logprobs": 2, "max_tokens": 1}
    first = [SystemMessage(PREFIX), HumanMessage("Is option_3 set to 21? Reply yes or no.")]
    second = [SystemMessage(PREFIX), HumanMessage("Is option_4 set to 30? Reply yes or no.")]
    computed_by_llama(llm, first, **reading)
    usage, evaluated = computed_by_llama(llm, second, **reading)
    reused = usage["input_token_details"]["cache_read"]
    assert reused > 300  # the shared block was not read again
    # the reading stops at its one token before evaluating it: every token llama.cpp
    # evaluated was a prompt token
    assert usage["input_tokens"] - reused == evaluated > 0


def test_a_streamed_answer_reports_its_reuse():
    llm = chat_model(load_settings({"llm_max_tokens": 8}), "generator")
    ask = [SystemMessage(PREFIX), HumanMessage("What does option_5 default to?")]
    llm.invoke(ask)
    again = [SystemMessage(PREFIX), HumanMessage("What does option_6 default to?")]
    chunks = list(llm.stream(again))
    usage = next(c.usage_metadata for c in chunks if c.usage_metadata)
    reused = usage["input_token_details"]["cache_read"]
    assert 300 < reused < usage["input_tokens"]
    assert usage["output_tokens"] > 0


def test_a_context_another_call_overwrote_is_restored_with_the_same_reading():
    """The own answer's case: the generator's context, then the verifier's, then the
    generator's again (tools/models/kv_states.py). The reading is the one the model gives
    when nothing came between (it then reuses the same prefix from its live cache)."""
    llm = chat_model(load_settings(), "verifier")
    loaded = shared_model(llm.model_path, llm.n_ctx, llm.n_threads)
    reading = {"logprobs": True, "top_logprobs": 5, "max_tokens": 3}
    other = "\n".join(f"[{n}] Port {n} serves protocol p{n}." for n in range(1, 25))
    first = [SystemMessage(PREFIX), HumanMessage("What is option_2?")]
    again = [SystemMessage(PREFIX), HumanMessage("Which option defaults to 63? Name it.")]

    def read_again(*before: list) -> tuple[dict, int, dict]:
        with loaded.lock:  # an empty cache and no saved state
            loaded.llama.reset()
            loaded.states.saved.clear()
        for messages in before:
            llm.invoke(messages)
        from llama_cpp import llama_cpp

        llama_cpp.llama_perf_context_reset(loaded.llama._ctx.ctx)
        reply = llm.bind(**reading).invoke(again)
        perf = llama_cpp.llama_perf_context(loaded.llama._ctx.ctx)
        return reply.usage_metadata, perf.n_p_eval, reply.response_metadata["logprobs"]

    usage, evaluated, restored = read_again(first, [SystemMessage(other), HumanMessage("p3?")])
    reused = usage["input_token_details"]["cache_read"]
    assert reused > 300
    assert usage["input_tokens"] - reused == evaluated > 1
    assert read_again(first)[2] == restored
