"""How sure a model is that an answer is right: P(yes) of a yes/no check.

A small model's yes/no verdict says yes to a plausible answer copied from a passage
about something close to, but not, what was asked. The probability it gives to "yes"
against "no" for its first reply token is a graded confidence that ranks right answers
above such near misses, so a threshold on it (``verify_threshold``, chosen on the
verifier benchmark, evaluation/verifier.py) trades coverage for precision at a known
rate. graph/verification.py is its caller.

Read from the first reply token's log-probabilities, in OpenAI's ``logprobs`` shape:
OpenAI-compatible servers return them when asked, and so does the local model.

Also here: how far two short answers say the same thing (``token_overlap``, the
official SQuAD F1), which both scores SQuAD answers and compares a short answer with
the generator's second opinion.
"""

from __future__ import annotations

import collections
import math
import re
import string
from collections.abc import Sequence

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage
from langchain_core.runnables import RunnableConfig

from tools.errors import ModelOutputError
from tools.resilient import with_retries

TOP_TOKENS = 10


def _shares(reply_metadata: dict, model: str, words: Sequence[str]) -> dict[str, float]:
    """Each of ``words``' share of their summed probability as the first reply token."""
    content = (reply_metadata.get("logprobs") or {}).get("content") or []
    if not content:
        raise ModelOutputError(
            f"{model} returned no token log-probabilities; use a verifier_model whose "
            "provider returns logprobs (OpenAI, vLLM, llama.cpp's server, the local models)"
        )
    wanted = {w.lower(): w for w in words}
    mass = dict.fromkeys(words, 0.0)
    for alternative in content[0].get("top_logprobs") or []:
        word = wanted.get(str(alternative.get("token", "")).strip().lower())
        if word is not None:
            mass[word] += math.exp(float(alternative["logprob"]))
    total = sum(mass.values())
    if total == 0:
        raise ModelOutputError(
            f"{model}: none of {', '.join(words)} among its likeliest first tokens"
        )
    return {w: p / total for w, p in mass.items()}


def first_token_shares(
    model: BaseChatModel,
    messages: list[BaseMessage],
    words: Sequence[str],
    *,
    retries: int,
    config: RunnableConfig | None = None,
) -> dict[str, float]:
    """How the model's first reply token to ``messages`` divides between ``words``
    (case-insensitive), from its top log-probabilities."""
    bound = model.bind(logprobs=True, top_logprobs=TOP_TOKENS, max_tokens=1, stream=False)
    name = getattr(model, "model_name", None) or type(model).__name__

    def call() -> dict[str, float]:
        return _shares(bound.invoke(messages, config).response_metadata or {}, str(name), words)

    return with_retries(call, retries=retries, what="verifier")


def yes_probability(
    model: BaseChatModel,
    messages: list[BaseMessage],
    *,
    retries: int,
    config: RunnableConfig | None = None,
) -> float:
    """P(yes) / (P(yes) + P(no)) for the model's first reply token to ``messages``."""
    return first_token_shares(model, messages, ("yes", "no"), retries=retries, config=config)["yes"]


# The token F1 at which two short answers count as the same answer: SQuAD-style scoring
# counts an answer right at it against the gold one, and a short answer's second
# opinion must reach it (graph.verification).
SAME_ANSWER_F1 = 0.5
_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCTUATION = set(string.punctuation)


def normalize_answer(text: str) -> str:
    """The official SQuAD normalisation: lower case, no punctuation, no articles."""
    text = "".join(ch for ch in text.lower() if ch not in _PUNCTUATION)
    return " ".join(_ARTICLES.sub(" ", text).split())


def token_overlap(answer: str, other: str) -> float:
    """The F1 of the two answers' normalised words (SQuAD's token F1): 1.0 for the same
    phrase, 0.5 for "Three-dimensional" against a 3-word clause starting with it."""
    mine, theirs = normalize_answer(answer).split(), normalize_answer(other).split()
    if not mine or not theirs:
        return float(mine == theirs)
    same = sum((collections.Counter(mine) & collections.Counter(theirs)).values())
    if same == 0:
        return 0.0
    precision, recall = same / len(mine), same / len(theirs)
    return 2 * precision * recall / (precision + recall)
