"""How sure a model is that an answer is right: P(yes) of a yes/no check.

A small model's yes/no verdict says yes to a plausible answer copied from a passage
about something close to, but not, what was asked. The probability it gives to "yes"
against "no" for its first reply token is a graded confidence that ranks right answers
above such near misses, so a threshold on it (``verify_threshold``, chosen on the
verifier benchmark, evaluation/verifier.py) trades coverage for precision at a known
rate. graph/checks/readings.py is its caller.

Two ways to read it (``verifier_confidence``):
- ``logprobs``: from the first reply token's log-probabilities, in OpenAI's ``logprobs``
  shape. OpenAI-compatible servers return them when asked, and so does the local model.
- ``sampled``: for providers that do not (Anthropic, several behind litellm): the share
  of "yes" among ``verifier_samples`` replies sampled at temperature 1, each with its
  own seed. It estimates the same quantity (the first token's distribution restricted to
  the words), so it is read against the same kind of threshold, with sampling noise.
- ``auto`` (the default) reads log-probabilities and switches to sampling, for good,
  the first time the model replies without them.

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
from dataclasses import dataclass, field, replace
from typing import Any, NamedTuple

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage, HumanMessage
from langchain_core.runnables import Runnable, RunnableConfig

from tools.config import Confidence, Settings
from tools.errors import ModelOutputError, NoLogprobsError
from tools.resilient import nonempty, with_retries

TOP_TOKENS = 10
SETTLE_PROBE = "Is 2 + 2 equal to 4? Reply with only yes or no."
# Enough tokens for the first word of a reply ("Yes", "Yes,", " B.").
_SAMPLE_TOKENS = 3
_FIRST_WORD = re.compile(r"[A-Za-z]+")


class Reading(NamedTuple):
    """Each word's share, and how it was read: "logprobs" or "sampled"."""

    shares: dict[str, float]
    method: str


class SureReply(NamedTuple):
    """A reply in a few words, and the probability the model gave its first word's
    first token (None when the reply came without log-probabilities): how sure it was
    of *which* value it copied, which the words themselves do not say."""

    text: str
    sure: float | None


def _model_name(model: BaseChatModel) -> str:
    return str(getattr(model, "model_name", None) or getattr(model, "model", None) or "model")


def _normalised(mass: dict[str, float], model: str, words: Sequence[str]) -> dict[str, float]:
    total = sum(mass.values())
    if total == 0:
        raise ModelOutputError(
            f"{model}: none of {', '.join(words)} among its first replies; the verifier_model "
            "must answer with one of them"
        )
    return {w: p / total for w, p in mass.items()}


def _field(part: Any, name: str) -> Any:
    """A field of a log-probabilities part: a dict from OpenAI's client and the local
    model, an object from litellm."""
    return part.get(name) if isinstance(part, dict) else getattr(part, name, None)


def _logprob_shares(reply_metadata: dict, model: str, words: Sequence[str]) -> dict[str, float]:
    """Each of ``words``' share of their summed probability as the first reply token."""
    content = _field(reply_metadata.get("logprobs"), "content") or []
    if not content:
        raise NoLogprobsError(
            f"{model} returned no token log-probabilities; set RAG_VERIFIER_CONFIDENCE="
            "sampled (or auto), or use a verifier_model whose provider returns logprobs "
            "(OpenAI, vLLM, llama.cpp's server, the local models)"
        )
    wanted = {w.lower(): w for w in words}
    mass = dict.fromkeys(words, 0.0)
    for alternative in _field(content[0], "top_logprobs") or []:
        word = wanted.get(str(_field(alternative, "token") or "").strip().lower())
        if word is not None:
            mass[word] += math.exp(float(_field(alternative, "logprob")))
    return _normalised(mass, model, words)


def first_word_probability(reply_metadata: dict) -> float | None:
    """The probability of the reply's first token that is not blank, or None without
    log-probabilities."""
    for part in _field(reply_metadata.get("logprobs"), "content") or []:
        if str(_field(part, "token") or "").strip():
            return math.exp(float(_field(part, "logprob")))
    return None


def first_reading(method: Confidence) -> str:
    """The reading a verifier configured with ``method`` makes before any call: only
    ``sampled`` samples from the start; ``auto`` tries log-probabilities first."""
    return "sampled" if method == "sampled" else "logprobs"


def judge_for(model: BaseChatModel, settings: Settings, *, retries: int) -> FirstTokenJudge:
    """The verifier ``model`` read as ``settings`` say (``verifier_confidence``,
    ``verifier_samples``): what answering, evaluation and the doctor all check with."""
    return FirstTokenJudge(
        model,
        retries=retries,
        method=settings.verifier_confidence,
        samples=settings.verifier_samples,
    )


def first_word(reply: str) -> str:
    found = _FIRST_WORD.search(reply)
    return found.group().lower() if found else ""


@dataclass
class _Learnt:
    """What ``auto`` learnt of the verifier model: shared by a judge and its views."""

    no_logprobs: bool = False
    settled: bool = False


@dataclass
class FirstTokenJudge:
    """How a model's first reply token divides between a few words, read as
    ``method`` says. One per verifier configuration (graph/services.py builds it), so
    ``auto``'s switch to sampling is made once per process, not once per answer."""

    model: BaseChatModel
    retries: int
    method: Confidence = "auto"
    samples: int = 10
    _learnt: _Learnt = field(default_factory=_Learnt, init=False)

    def over(self, model: BaseChatModel) -> FirstTokenJudge:
        """This judge calling ``model`` instead (a run's metered view of the same model),
        sharing what ``auto`` has learnt and will learn."""
        view = replace(self, model=model)
        view._learnt = self._learnt
        return view

    def settle(self, config: RunnableConfig | None = None) -> str:
        """For ``auto``, learn once (one short call) whether the model gives log-
        probabilities, so the thresholds for the right confidence are picked before the
        first check; the method the readings will use."""
        if self.method == "auto" and not self._learnt.settled:
            self.read([HumanMessage(SETTLE_PROBE)], ("yes", "no"), config)
        return self.method_in_use

    @property
    def method_in_use(self) -> str:
        """How the next reading will be made: "logprobs" or "sampled"."""
        return "sampled" if self._learnt.no_logprobs else first_reading(self.method)

    @property
    def name(self) -> str:
        return _model_name(self.model)

    def read(
        self,
        messages: list[BaseMessage],
        words: Sequence[str],
        config: RunnableConfig | None = None,
    ) -> Reading:
        """``words``' shares (case-insensitive) of the first reply token to ``messages``."""
        if self.method_in_use == "sampled":
            return Reading(self._sampled(messages, words, config), "sampled")
        try:
            reading = Reading(self._from_logprobs(messages, words, config), "logprobs")
        except NoLogprobsError:
            if self.method == "logprobs":
                raise
            self._learnt.no_logprobs = self._learnt.settled = True
            return Reading(self._sampled(messages, words, config), "sampled")
        self._learnt.settled = True
        return reading

    def yes(self, messages: list[BaseMessage], config: RunnableConfig | None = None) -> Reading:
        """P(yes) / (P(yes) + P(no)) for the first reply token, as ``shares["yes"]``."""
        return self.read(messages, ("yes", "no"), config)

    def reply(
        self,
        messages: list[BaseMessage],
        *,
        max_tokens: int,
        what: str,
        config: RunnableConfig | None = None,
    ) -> SureReply:
        """A short greedy reply and how sure the model was of its first word, read from
        log-probabilities when the verifier is read by them (a sampled verifier's
        provider gives none, and is not asked)."""
        asks = {"logprobs": True, "top_logprobs": 1} if self.method_in_use == "logprobs" else {}
        bound = self.model.bind(max_tokens=max_tokens, stream=False, **asks)

        def call() -> SureReply:
            reply = bound.invoke(messages, config)
            text = nonempty(reply.text, what)
            return SureReply(text, first_word_probability(reply.response_metadata or {}))

        return with_retries(call, retries=self.retries, what=what)

    def _from_logprobs(
        self, messages: list[BaseMessage], words: Sequence[str], config: RunnableConfig | None
    ) -> dict[str, float]:
        bound = self.model.bind(logprobs=True, top_logprobs=TOP_TOKENS, max_tokens=1, stream=False)

        def call() -> dict[str, float]:
            reply = bound.invoke(messages, config)
            return _logprob_shares(reply.response_metadata or {}, self.name, words)

        return with_retries(call, retries=self.retries, what="verifier")

    def _sampled(
        self, messages: list[BaseMessage], words: Sequence[str], config: RunnableConfig | None
    ) -> dict[str, float]:
        """Shares among ``samples`` replies, seeds 0..n-1: the same model gives the same
        reading for the same prompt, as the log-probability one does."""
        wanted = {w.lower(): w for w in words}
        counts = dict.fromkeys(words, 0.0)
        for seed in range(self.samples):
            bound = self.model.bind(
                temperature=1.0, max_tokens=_SAMPLE_TOKENS, seed=seed, stream=False
            )

            def call(bound: Runnable = bound) -> str:
                return bound.invoke(messages, config).text

            word = wanted.get(first_word(with_retries(call, retries=self.retries, what="verifier")))
            if word is not None:
                counts[word] += 1
        return _normalised(counts, self.name, words)


_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCTUATION = set(string.punctuation)


def normalize_answer(text: str) -> str:
    """The official SQuAD normalisation: lower case, no punctuation, no articles."""
    text = "".join(ch for ch in text.lower() if ch not in _PUNCTUATION)
    return " ".join(_ARTICLES.sub(" ", text).split())


# a word, number, command, option or path as a reader would match it: "-x" is neither
# "x" nor "-X", "125." is "125"
_ANSWER_TOKEN = re.compile(r"-{0,2}\w[\w./-]*")


def _answer_tokens(text: str) -> list[str]:
    """Words ignoring case; options keep theirs (``-x`` and ``-X`` differ)."""
    tokens = (t.rstrip(".-/") for t in _ANSWER_TOKEN.findall(text))
    return [t if t.startswith("-") else t.lower() for t in tokens]


def states(text: str, phrase: str) -> bool:
    """Whether ``text`` states ``phrase``: its tokens, in order and adjacent. How the
    benchmarks count a sentence right against a short gold answer, and how the verifier
    counts its own answer to a question as the answer's (graph/checks/pipeline.py)."""
    said, want = _answer_tokens(text), _answer_tokens(phrase)
    return bool(want) and any(said[i : i + len(want)] == want for i in range(len(said)))


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
