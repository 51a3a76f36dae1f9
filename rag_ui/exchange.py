"""One question and everything behind its answer, as the page shows it and a flag stores it.

The prompt is recorded from the generator's actual model call (a callback), not
rebuilt from templates, so a regenerated answer's prompt includes the verifier's
feedback exactly as the model received it.
"""

from __future__ import annotations

from typing import Any

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import BaseMessage

from graph.builder import GENERATOR_NODE
from graph.checks.explain import not_verified
from graph.checks.support import where
from graph.context import header_location, numbers_by_location
from tools.retrieval.hybrid import Passage


class PromptRecorder(BaseCallbackHandler):
    """Keeps the messages of every call the answer generator receives in one run."""

    def __init__(self) -> None:
        self.prompts: list[list[dict[str, str]]] = []

    def on_chat_model_start(
        self,
        serialized: dict[str, Any],
        messages: list[list[BaseMessage]],
        *,
        metadata: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        if (metadata or {}).get("langgraph_node") == GENERATOR_NODE:
            self.prompts.append([as_turn(m) for m in messages[0]])


def as_turn(message: BaseMessage) -> dict[str, str]:
    return {"role": message.type, "content": message.text}


def prompt_note(prompt: list[dict[str, str]], passages: list[dict[str, Any]]) -> str:
    """What a reader of the recorded prompt needs to match its passage numbers with the
    answer's: the answer renumbers passages in the order it cites them. Empty when the
    numbers agree."""
    in_prompt: dict[str, int] = {}
    for turn in prompt:
        in_prompt |= numbers_by_location(turn["content"])
    moved = []
    for n, passage in enumerate(passages, 1):
        old = in_prompt.get(header_location(passage), n)
        if old != n:
            moved.append(f"[{old}] is the answer's [{n}]")
    if not moved:
        return ""
    said = ", ".join(moved)
    return f"The answer numbers passages in the order it cites them: in this prompt, {said}."


def passage_view(n: int, passage: dict[str, Any]) -> dict[str, Any]:
    """A passage given to the generator, numbered as its citations are."""
    return {
        "n": n,
        "source": passage["source"],
        "location": Passage(**passage).location(),
        "page": passage.get("page"),
        "start_line": passage.get("start_line"),
        "end_line": passage.get("end_line"),
        "heading": passage.get("heading") or "",
        "score": round(passage["score"], 4),
        "distance": round(passage["distance"], 4),
        "text": passage["text"],
    }


def _reason(state: dict[str, Any]) -> str:
    """The sentence `rag ask` prints after NOT VERIFIED (graph/checks/explain.py)."""
    judgement = state.get("judgement") or {}
    return not_verified(judgement) if judgement.get("outcome") == "not_verified" else ""


def _judged(judgement: dict[str, Any], passages: list[dict[str, Any]]) -> dict[str, Any]:
    """The judgement with each quote placed, as `rag ask` prints it."""
    statements = [
        {**s, "quotes": _placed(s["quotes"], passages)} for s in judgement.get("statements") or []
    ]
    return {**judgement, "statements": statements} if judgement else {}


def _placed(quotes: list[dict[str, Any]], passages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each quote with where it is, as `rag ask` prints it (graph/checks/support.py)."""
    return [{**q, "where": where(passages[q["n"] - 1], q["line"])} for q in quotes]


def build_exchange(
    exchange_id: str,
    question: str,
    history: list[BaseMessage],
    state: dict[str, Any],
    recorder: PromptRecorder,
    settings_used: dict[str, Any],
    timings: dict[str, float],
) -> dict[str, Any]:
    """The whole exchange as plain JSON data, from the thread's state after the run."""
    retrieval = dict(state.get("retrieval") or {})
    passages = state.get("passages") or []
    prompt = recorder.prompts[-1] if recorder.prompts else []
    return {
        "id": exchange_id,
        "question": question,
        "history": [as_turn(m) for m in history if m.type in ("human", "ai")],
        "queries": state.get("queries") or [],
        "answer": state.get("answer", ""),
        "abstained": bool(state.get("abstained")),
        "outcome": state.get("outcome"),
        # the label, each statement's support and the reason (graph/checks/judgement.py)
        "judgement": _judged(state.get("judgement") or {}, passages),
        "error": state.get("error"),
        "guard": state.get("guard"),
        "verdict": state.get("verdict") or {},
        # the same sentence `rag ask` prints after NOT VERIFIED (graph/checks/explain.py)
        "reason": _reason(state),
        "support": _placed(state.get("support") or [], passages),
        # when the documents do not say: the sentences nearest the question
        "closest": _placed(state.get("closest") or [], passages),
        "citations": state.get("citations") or [],
        "references": state.get("references") or [],
        "passages": [passage_view(n, p) for n, p in enumerate(passages, 1)],
        "dropped": retrieval.pop("dropped", []),
        "retrieval": retrieval,
        "prompt": prompt,
        "prompt_note": prompt_note(prompt, passages),
        "attempts": len(recorder.prompts),
        "timings": {**(state.get("timings") or {}), **timings},
        "trace_id": state.get("trace_id"),
        "settings": settings_used,
        "prompt_versions": state.get("prompts") or {},
    }
