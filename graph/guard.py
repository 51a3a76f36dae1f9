"""The topic guard's decision: is a question one the operator wants answered?

The seeds put a guardrail in front of the whole pipeline: questions that stray into
topics the operator does not want answered are stopped before retrieval and
generation, politely. Two checks, cheapest first: a question with no passage of the
collection within ``guard_max_distance`` is off-topic (the small local query model
said "allowed" to 34 of 36 questions it should have refused; the distance separated
them); otherwise the query model judges it against the operator's domain and blocked
topics (``guard_domain``, ``guard_blocked``), its reply decoded as JSON. ``rag eval
guard`` measures the decision on labelled questions (evaluation/guard.py).
"""

from __future__ import annotations

from typing import Any, Literal

from langchain_core.embeddings import Embeddings
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import HumanMessage
from langchain_core.runnables import RunnableConfig
from pydantic import BaseModel, Field

from graph import prompts
from tools.config import Settings
from tools.store.collection import Collection
from tools.structured import invoke_structured

Verdict = Literal["allowed", "off_topic", "blocked"]


class _Decision(BaseModel):
    verdict: Verdict
    reason: str = Field(max_length=300)


def topic_decision(
    model: BaseChatModel,
    settings: Settings,
    question: str,
    config: RunnableConfig | None = None,
) -> dict[str, str]:
    """``{"mode", "verdict", "reason"}``; raises ModelError when the model cannot decide."""
    prompt = prompts.GUARD.text.format(
        domain=settings.guard_domain.strip(),
        blocked=settings.guard_blocked.strip() or "nothing in particular",
        question=question,
    )
    decided = invoke_structured(
        model, _Decision, [HumanMessage(prompt)], retries=settings.llm_max_retries, config=config
    )
    return {"mode": settings.guard, "verdict": decided.verdict, "reason": decided.reason}


def nearest_distance(collection: Collection, embedder: Embeddings, question: str) -> float | None:
    """Cosine distance from the question to the collection's closest passage (None when
    the collection is empty)."""
    hits = collection.dense_search(embedder.embed_query(question), 1)
    return round(hits[0][1], 4) if hits else None


def decide(
    model: BaseChatModel,
    settings: Settings,
    question: str,
    distance: float | None,
    config: RunnableConfig | None = None,
) -> dict[str, Any]:
    """The guard's decision, with the distance it saw; raises ModelError when the model
    is asked and cannot decide."""
    if distance is not None and distance > settings.guard_max_distance:
        reason = (
            f"no passage of the collection is close to it (closest at cosine distance "
            f"{distance:.2f}, above guard_max_distance {settings.guard_max_distance})"
        )
        return {
            "mode": settings.guard,
            "verdict": "off_topic",
            "reason": reason,
            "distance": distance,
        }
    return {**topic_decision(model, settings, question, config), "distance": distance}


def refusal(settings: Settings) -> str:
    return settings.guard_message.replace("{domain}", settings.guard_domain.strip())
