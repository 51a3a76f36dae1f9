"""How sure a model is that an answer answers the question: P(yes) of a yes/no check.

The statement verifier asks "is each statement supported?", and a small model says
yes to a plausible span copied from a passage that is about something close to,
but not, what was asked (SQuAD 2.0's unanswerable questions are built that way).
A graded signal helps where a yes/no verdict does not: the probability the model
gives to "yes" ranks right answers above such near misses (measured on SQuAD 2.0,
see docs_corpus/answering-and-verification.md), so a threshold on it turns
near misses into abstentions at a known cost in right answers.

Read from the first reply token's log-probabilities, in OpenAI's ``logprobs`` shape:
OpenAI-compatible servers return them when asked, and so does the local model.
"""

from __future__ import annotations

import math

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage
from langchain_core.runnables import RunnableConfig

from tools.errors import ModelOutputError
from tools.resilient import with_retries

TOP_TOKENS = 10


def _share(reply_metadata: dict, model: str) -> float:
    content = (reply_metadata.get("logprobs") or {}).get("content") or []
    if not content:
        raise ModelOutputError(
            f"{model} returned no token log-probabilities; use a verifier_model whose "
            "provider returns logprobs, or set answer_check_threshold=0"
        )
    yes = no = 0.0
    for alternative in content[0].get("top_logprobs") or []:
        word = str(alternative.get("token", "")).strip().lower()
        if word in ("yes", "no"):
            p = math.exp(float(alternative["logprob"]))
            yes, no = (yes + p, no) if word == "yes" else (yes, no + p)
    if yes + no == 0:
        raise ModelOutputError(f"{model}: neither yes nor no among its likeliest first tokens")
    return yes / (yes + no)


def yes_probability(
    model: BaseChatModel,
    messages: list[BaseMessage],
    *,
    retries: int,
    config: RunnableConfig | None = None,
) -> float:
    """P(yes) / (P(yes) + P(no)) for the model's first reply token to ``messages``."""
    bound = model.bind(logprobs=True, top_logprobs=TOP_TOKENS, max_tokens=1, stream=False)
    name = getattr(model, "model_name", None) or type(model).__name__

    def call() -> float:
        return _share(bound.invoke(messages, config).response_metadata or {}, str(name))

    return with_retries(call, retries=retries, what="answer check")
