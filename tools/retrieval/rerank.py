"""Rerankers: reorder retrieved passages by relevance to the question, and cut the tail.

Three implementations behind one small interface:
- ``llm``: the configured query model grades each passage 0-3 (pointwise, JSON-constrained).
  Works offline; costs one short LLM call per passage. The instructions and question
  come first and the passage last, so the local model reuses the cached prefix.
- ``cross-encoder``: a sentence-transformers CrossEncoder loaded from ``rerank_model``
  (a local directory: none ships in a wheel, so users bring their own).
- ``litellm``: a hosted rerank API (Cohere, Voyage, Jina...) via ``litellm.rerank``.
The seeds report a reranker that sometimes made ordering worse, so it is off by default.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import HumanMessage, SystemMessage
from langchain_core.runnables import RunnableConfig
from pydantic import BaseModel, Field

from tools.config import ConfigError, Settings
from tools.resilient import as_model_error
from tools.retrieval.hybrid import Passage
from tools.structured import invoke_structured

GRADE_PROMPT = (
    "Grade how useful a passage is for answering a question. "
    "3 = answers it directly, 2 = partly, 1 = related topic only, 0 = unrelated. "
    'Reply with JSON: {"grade": <0-3>}.'
)


class Grade(BaseModel):
    grade: int = Field(ge=0, le=3)


class Reranker(Protocol):
    def scores(
        self, question: str, passages: Sequence[Passage], config: RunnableConfig | None = None
    ) -> list[float]: ...


class LLMReranker:
    def __init__(self, llm: BaseChatModel, retries: int) -> None:
        self.llm = llm
        self.retries = retries

    def scores(
        self, question: str, passages: Sequence[Passage], config: RunnableConfig | None = None
    ) -> list[float]:
        out = []
        for passage in passages:
            grade = invoke_structured(
                self.llm,
                Grade,
                [
                    SystemMessage(GRADE_PROMPT),
                    HumanMessage(f"Question: {question}\n\nPassage:\n{passage.text[:2000]}"),
                ],
                retries=self.retries,
                config=config,
            )
            out.append(grade.grade / 3)
        return out


class CrossEncoderReranker:
    def __init__(self, model_path: str) -> None:
        if not model_path:
            raise ConfigError(
                "rerank=cross-encoder needs rerank_model set to a local CrossEncoder directory"
            )
        from sentence_transformers import CrossEncoder

        self.model = CrossEncoder(model_path, device="cpu")

    def scores(
        self, question: str, passages: Sequence[Passage], config: RunnableConfig | None = None
    ) -> list[float]:
        return [float(s) for s in self.model.predict([(question, p.text) for p in passages])]


class LiteLLMReranker:
    def __init__(self, model: str, timeout_s: float) -> None:
        if not model:
            raise ConfigError("rerank=litellm needs rerank_model, e.g. cohere/rerank-v3.5")
        self.model = model
        self.timeout_s = timeout_s

    def scores(
        self, question: str, passages: Sequence[Passage], config: RunnableConfig | None = None
    ) -> list[float]:
        import litellm

        try:
            response = litellm.rerank(
                model=self.model,
                query=question,
                documents=[p.text for p in passages],
                timeout=self.timeout_s,
            )
        except Exception as exc:  # a provider's own error types: typed for the graph
            raise as_model_error(exc, f"rerank with {self.model}") from exc
        scores = [0.0] * len(passages)
        for result in response.results:
            scores[result["index"]] = float(result["relevance_score"])
        return scores


def make_reranker(settings: Settings, llm: BaseChatModel | None) -> Reranker | None:
    if settings.rerank == "none":
        return None
    if settings.rerank == "llm":
        if llm is None:
            raise ConfigError("rerank=llm needs a query model")
        return LLMReranker(llm, settings.llm_max_retries)
    if settings.rerank == "cross-encoder":
        return CrossEncoderReranker(settings.rerank_model)
    return LiteLLMReranker(settings.rerank_model, settings.llm_timeout_s)


def rerank(
    reranker: Reranker,
    question: str,
    passages: list[Passage],
    keep: int,
    config: RunnableConfig | None = None,
) -> list[Passage]:
    """Reorder by the reranker's score (ties keep retrieval order) and keep the best ``keep``."""
    scores = reranker.scores(question, passages, config)
    order = sorted(range(len(passages)), key=lambda i: (-scores[i], i))
    kept = []
    for i in order[:keep]:
        passages[i].score = scores[i]
        kept.append(passages[i])
    return kept
