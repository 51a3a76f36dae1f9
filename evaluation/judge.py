"""The seeds' answer-quality scores, asked of an LLM judge (``judge_model``).

Answer completeness rates the answer against the question; contextual accuracy rates it
against the passages it was written from; both 1 (bad) to 5 (perfect). One call asks
for both, with the passages first so a local judge reuses the generator's cached prefix.
"""

from __future__ import annotations

from typing import Any, Literal

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import HumanMessage
from langchain_core.runnables import RunnableConfig
from pydantic import BaseModel

from graph.context import context_message
from graph.prompts import Prompt
from tools.config import Settings
from tools.structured import invoke_structured

JUDGE = Prompt(
    "judge",
    1,
    "Rate the answer below to the question below, using the passages above.\n"
    "completeness: how fully the answer answers the question (1 = not at all, 5 = "
    "completely).\ncontextual_accuracy: how well every part of the answer follows from the "
    "passages (1 = contradicts or invents, 5 = everything is in the passages).\n"
    'Reply with JSON: {{"completeness": 1-5, "contextual_accuracy": 1-5}}.\n\n'
    "Question: {question}\nAnswer: {answer}",
)

Grade = Literal[1, 2, 3, 4, 5]


class Scores(BaseModel):
    completeness: Grade
    contextual_accuracy: Grade


def judge_answer(
    model: BaseChatModel,
    settings: Settings,
    question: str,
    answer: str,
    passages: list[dict[str, Any]],
    config: RunnableConfig | None = None,
) -> Scores:
    return invoke_structured(
        model,
        Scores,
        [
            context_message(passages),
            HumanMessage(JUDGE.text.format(question=question, answer=answer)),
        ],
        retries=settings.llm_max_retries,
        config=config,
    )
