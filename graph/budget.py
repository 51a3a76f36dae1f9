"""How many model calls one question can cost with given settings: the graph's own count.

A server request chooses ``k``, ``rerank``, ``multi_query`` and ``max_regenerations``;
together they decide how long the one shared model is busy with it (a default run makes
at most 7 calls, the largest settings over 100). The server refuses a request whose
worst case is above ``max_model_calls`` before it is queued (server/app.py).
"""

from __future__ import annotations

from tools.config import Settings

# the grounding question, then the literal-choice reading (at or above the threshold) or
# the verifier's own answer (below it): graph/verification.py
VERIFIER_CALLS = 2


def takes_second_look(settings: Settings) -> bool:
    """Whether a first answer of NOT_FOUND gets a second look (graph/nodes.py): full
    answers only; a regeneration that gives up had its first answer rejected already."""
    return settings.second_look and settings.answer_style == "full"


def most_model_calls(settings: Settings) -> dict[str, int]:
    """The worst case per step, by the node that makes the calls; ``sum(...values())``
    is the total. A follow-up's rephrasing is counted: a thread may have history."""
    answers = 1 + settings.max_regenerations
    # after NOT_FOUND, the second look and the copy (graph/nodes.py) are the second and
    # third calls of the first attempt, never followed by a regeneration
    second_look = takes_second_look(settings)
    second_opinion = settings.answer_style == "short" and settings.second_opinion
    calls = {
        "generate_queries": 1 + (settings.multi_query > 1),
        "guard": int(settings.guard != "off"),
        "rerank": max(2 * settings.k, settings.rerank_keep) if settings.rerank == "llm" else 0,
        "generate_answer": max(answers, 3) if second_look else answers,
        "verify": answers * (VERIFIER_CALLS + second_opinion),
    }
    return {node: n for node, n in calls.items() if n}


def budget_problem(settings: Settings) -> str | None:
    """Why a request's settings cost too much, or None."""
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
