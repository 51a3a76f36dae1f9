"""The topic guard's decision: is a question one the operator wants answered?

The seeds put a guardrail in front of the whole pipeline: questions that stray into
topics the operator does not want answered are stopped before retrieval and
generation, politely. The operator describes the collection's domain and the blocked
topics in settings (``guard_domain``, ``guard_blocked``); the query model decides, its
reply decoded as JSON (grammar-constrained with the local model). ``rag eval guard``
measures the decision on labelled questions (evaluation/guard.py).
"""

from __future__ import annotations

from typing import Literal

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import HumanMessage
from langchain_core.runnables import RunnableConfig
from pydantic import BaseModel, Field

from graph import prompts
from tools.config import Settings
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


def refusal(settings: Settings) -> str:
    return settings.guard_message.replace("{domain}", settings.guard_domain.strip())
