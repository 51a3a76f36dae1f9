"""The graph's state, and the explicit input and output schemas the server publishes.

On a server thread the state persists between questions, so the graph's first node
(``start_question``) sets every field of ``PER_QUESTION`` to its fresh value; only
``messages`` (the conversation) accumulates.
"""

from __future__ import annotations

from pathlib import Path
from types import UnionType
from typing import (
    Annotated,
    Any,
    Required,
    Union,
    get_args,
    get_origin,
    get_type_hints,
)

from langchain_core.messages import AnyMessage
from langgraph.graph.message import add_messages
from pydantic import TypeAdapter
from typing_extensions import TypedDict, is_typeddict

from graph.results import (
    Citation,
    Closest,
    GuardDecision,
    Judgement,
    ModelFault,
    Outcome,
    PassageRecord,
    RetrievalReport,
    Support,
    Verdict,
)
from tools.models.metered import ModelCall


class InputState(TypedDict, total=False):
    question: Required[str]
    messages: Annotated[list[AnyMessage], add_messages]  # earlier turns of the conversation
    collection: str
    k: int
    rerank: str


class OutputState(TypedDict, total=False):
    """The answer object (graph/results.py declares its parts; ``answer_schema`` is its
    JSON schema)."""

    answer: str
    # what the generator read, numbered as the answer cites them (its retrieval diagnosis)
    passages: list[PassageRecord]
    references: list[str]
    citations: list[Citation]
    support: list[Support]  # each statement's quoted support (graph/checks/support.py)
    # when the documents do not say: the passages' sentences nearest the question
    closest: list[Closest]
    # why a not_verified answer is not verified, in plain words (graph/checks/explain.py)
    reason: str | None
    verdict: Verdict
    abstained: bool
    # verified, not_verified (shown with a reason), not_in_documents (withheld, with the
    # closest passages) or abstained (graph/results.py, Outcome): judgement's outcome
    outcome: Outcome
    # the label, each statement's support, the reason and the withheld draft, built once
    # (graph/checks/judgement.py); every surface renders it
    judgement: Judgement
    queries: list[str]
    retrieval: RetrievalReport
    timings: dict[str, float]  # seconds per node, reset by the first node of each question
    # every model call of the question, in order, with its tokens (tools/models/metered.py)
    calls: list[ModelCall]
    prompts: dict[str, int]
    attempts: int  # answers generated for this question (1 + regenerations)
    error: ModelFault | None  # a model fault; None when every call succeeded
    # the topic guard's decision when it is on; None when it is off
    guard: GuardDecision | None
    trace_id: str | None


class State(InputState, OutputState, total=False):
    # the generator's answer with its own passage numbers; finalize renumbers `passages`
    # as `answer` cites them and leaves this as it was, so after finalize its markers
    # point at the wrong passages: pair `answer` with `passages`, not this
    draft: str
    feedback: list[str]  # unsupported statements (with missing literals) from the last check
    abstain_reason: str
    unsaid: bool  # ...set because the documents hold no answer (none retrieved or found)
    second_look: bool  # the draft was asked for after a NOT_FOUND: never regenerated
    copied: bool  # ...and, after a second NOT_FOUND, copied as own_answer asks (OWN_ANSWER)


# Carried from one question of a thread to the next: the conversation, and what the
# run's input itself sets (its question and its own settings, which finalize clears).
CARRIED = frozenset({"messages", *InputState.__annotations__})


def _fresh(annotation: Any) -> Any:
    """The value a field starts a question with, from its type: empty for containers
    (a TypedDict is a dict) and text, zero or False for numbers and flags, None for
    anything optional."""
    origin = get_origin(annotation) or annotation
    if origin in (Annotated, Required):
        return _fresh(get_args(annotation)[0])
    if origin in (Union, UnionType) and type(None) in get_args(annotation):
        return None
    if is_typeddict(origin):
        return {}
    return {list: [], dict: {}, str: "", bool: False, int: 0, float: 0.0}.get(origin)


# Fresh values of everything one question produces, derived from ``State``: a field
# added there is reset with the others, so a later question on the thread never shows
# an earlier one's (a guard refusal once returned the previous question's retrieval).
PER_QUESTION: dict[str, Any] = {
    name: _fresh(annotation)
    for name, annotation in get_type_hints(State, include_extras=True).items()
    if name not in CARRIED
}


# The published JSON schema of the answer object (``rag ask --json``, the server's run
# output): written from ``OutputState`` by ``answer_schema``; a test keeps them equal.
ANSWER_SCHEMA_FILE = Path(__file__).with_name("answer.schema.json")


def answer_schema() -> dict[str, Any]:
    """``OutputState`` as JSON schema, strict: an object holds only the keys its type
    declares, so a key added to the answer without its type fails validation."""
    schema = TypeAdapter(OutputState).json_schema()

    def strict(node: Any) -> None:
        if isinstance(node, dict):
            if node.get("type") == "object" and "properties" in node:
                node.setdefault("additionalProperties", False)
            for value in node.values():
                strict(value)
        elif isinstance(node, list):
            for value in node:
                strict(value)

    strict(schema)
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", **schema}
