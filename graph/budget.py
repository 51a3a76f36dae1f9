"""How many model calls one question may make: the ceiling, and what settings plan.

A server request chooses ``k``, ``rerank``, ``multi_query`` and ``max_regenerations``;
together they decide how long the one shared model is busy with it (a default run makes
at most 11 calls, the largest settings over 100). Two places hold ``max_model_calls``
for a server client's run, counting the same thing, a call to a chat model:

- the ceiling, where models are called: every call a question makes is counted
  (tools/models/metered.py), retries and sampled readings included, and the one that
  would pass ``max_model_calls`` is refused; the answer then carries the error.
- the door's early refusal (``budget_problem``, server/app.py and every node's
  settings check): a request whose settings plan more calls than that, counting each
  planned call once, is refused before it is queued. What a run admitted there can
  still spend is ``max_model_calls`` less its plan: the room for retries.

In-process callers (the CLI, the chat page, evaluation) are the operator: their calls
are counted and accounted for, with no ceiling.
"""

from __future__ import annotations

from graph.checks.repairs import ATTEMPTS
from tools.config import Settings


def takes_second_look(settings: Settings) -> bool:
    """Whether a first answer of NOT_FOUND gets a second look (graph/nodes.py): full
    answers only; a regeneration that gives up had its first answer rejected already."""
    return settings.second_look and settings.answer_style == "full"


def calls_per_reading(settings: Settings) -> int:
    """The calls one verifier reading makes: one read from log-probabilities, or
    ``verifier_samples`` sampled replies. ``auto`` starts with log-probabilities; a
    provider found to give none then samples, and the ceiling holds what it spends."""
    return settings.verifier_samples if settings.verifier_confidence == "sampled" else 1


def verifier_calls(settings: Settings) -> int:
    """The most calls the checks make on one answer (graph/checks/pipeline.py): a full
    answer's verifier yes, its literal choice (both readings) and the verifier's own
    answer (one greedy reply); a short answer's yes and the generator's second opinion."""
    reading = calls_per_reading(settings)
    if settings.answer_style == "short":
        return reading + settings.second_opinion
    return 2 * reading + 1


def most_model_calls(settings: Settings) -> dict[str, int]:
    """The calls the settings plan per step, by the node that makes them, each counted
    once; ``sum(...values())`` is the total. A follow-up's rephrasing is counted: a
    thread may have history."""
    answers = 1 + settings.max_regenerations
    # after NOT_FOUND, the second look and the copy (graph/nodes.py) are the further
    # calls of the first attempt, never followed by a regeneration
    calls = {
        "generate_queries": 1 + (settings.multi_query > 1),
        "guard": int(settings.guard != "off"),
        "rerank": max(2 * settings.k, settings.rerank_keep) if settings.rerank == "llm" else 0,
        "generate_answer": max(answers, len(ATTEMPTS)) if takes_second_look(settings) else answers,
        # auto's one probe of whether the verifier gives log-probabilities (once a process)
        "verify": (settings.verifier_confidence == "auto") + answers * verifier_calls(settings),
    }
    return {node: n for node, n in calls.items() if n}


def call_ceiling(settings: Settings, client: str | None) -> int | None:
    """The most model calls a run's question may make: ``max_model_calls`` for a server
    client's run (``client`` as graph/configuration.run_client names it), none for the
    operator's own (``client`` None), as for ``budget_problem``."""
    return None if client is None else settings.max_model_calls


def budget_problem(settings: Settings) -> str | None:
    """Why a request's settings plan too many calls, or None."""
    calls = most_model_calls(settings)
    total = sum(calls.values())
    if total <= settings.max_model_calls:
        return None
    parts = ", ".join(f"{node} {n}" for node, n in calls.items())
    return (
        f"these settings can make {total} model calls for one question ({parts}), over "
        f"max_model_calls={settings.max_model_calls}: lower k, rerank, multi_query or "
        "max_regenerations"
    )
