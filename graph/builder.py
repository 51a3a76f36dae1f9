"""The compiled agentic RAG graph.

start_question (every per-question field fresh: state.PER_QUESTION)
  -> generate_queries -> [guard (off-topic or blocked, guard=refuse: -> finalize)]
  -> retrieve -> [rerank] -> [select_evidence] -> generate_answer -> verify -> finalize
        |            |                                |  ^           |
        +------------+--> finalize                    |  +-----------+ (not grounded,
        (no passages: abstain)                        |   attempts <= max_regenerations)
                                                      +-> finalize (model says not found)
"""

from __future__ import annotations

from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph

from graph import nodes
from graph.configuration import SETTINGS_KEY
from graph.prompts import versions
from graph.run import Edge, as_edge, as_node
from graph.services import Services
from graph.state import InputState, OutputState, State
from tools import tracing
from tools.config import Settings, load_settings

GENERATOR_NODE = "generate_answer"  # the node whose tokens are the answer: what clients stream
# Every node by name, in the order a question runs through them.
NODES = {
    "start_question": nodes.start_question,  # resets the question's fields
    "generate_queries": nodes.generate_queries,
    "guard": nodes.guard,  # only with the topic guard on
    "retrieve": nodes.retrieve,
    "rerank": nodes.rerank_passages,  # only with a reranker
    "select_evidence": nodes.select_evidence,  # not with evidence=passages
    "generate_answer": nodes.generate_answer,
    "verify": nodes.verify,
    "finalize": nodes.finalize,
}
# the path of a question answered with the default settings (no guard, no reranker,
# evidence) and without a regeneration
DIRECT_PATH = tuple(name for name in NODES if name not in ("guard", "rerank"))


def build_graph(
    checkpointer: BaseCheckpointSaver | None = None, services: Services | None = None
) -> CompiledStateGraph:
    """The graph. ``services`` serve runs whose caller passes none as their runtime
    context (the server's); without it, the graph builds its own ``Services()``, whose
    models load on first use."""
    default = services if services is not None else Services()
    builder = StateGraph(State, input_schema=InputState, output_schema=OutputState)
    for name, node in NODES.items():
        builder.add_node(name, as_node(name, node, default))

    def branch(source: str, edge: Edge, targets: list[str]) -> None:
        builder.add_conditional_edges(source, as_edge(edge, default), targets)

    builder.add_edge(START, "start_question")
    builder.add_edge("start_question", "generate_queries")
    branch("generate_queries", nodes.after_queries, ["guard", "retrieve"])
    branch("guard", nodes.after_guard, ["retrieve", "finalize"])
    branch(
        "retrieve",
        nodes.after_retrieve,
        ["rerank", "select_evidence", "generate_answer", "finalize"],
    )
    branch("rerank", nodes.after_rerank, ["select_evidence", "generate_answer", "finalize"])
    builder.add_edge("select_evidence", "generate_answer")
    branch("generate_answer", nodes.after_answer, ["verify", "finalize"])
    branch("verify", nodes.after_verify, ["generate_answer", "finalize"])
    builder.add_edge("finalize", END)
    return builder.compile(checkpointer=checkpointer, name="agentic-rag")


def config_for(
    settings: Settings | None = None,
    /,
    *,
    thread_id: str | None = None,
    user_id: str | None = None,
    trace_seed: str | None = None,
    **changes: Any,
) -> RunnableConfig:
    """An operator's run config: ``settings`` (default: ``load_settings()``) with any
    ``changes``, validated now, plus one trace for the run.

    ``graph.invoke({"question": q}, config_for(k=4, user_id="ana"))``; the answer's
    ``trace_id`` then points at the run's trace. For in-process callers only: the
    settings travel as a ``Settings`` object, which no JSON request can forge.
    """
    validated = load_settings(changes, base=settings)
    configurable: dict[str, Any] = {SETTINGS_KEY: validated}
    if thread_id:
        configurable["thread_id"] = thread_id
    return {**traced(validated, thread_id, user_id, trace_seed), "configurable": configurable}


def traced(
    settings: Settings, thread_id: str | None, user_id: str | None, trace_seed: str | None
) -> RunnableConfig:
    return tracing.run_config(
        settings,
        trace_id=tracing.new_trace_id(seed=trace_seed),
        session_id=thread_id,
        user_id=user_id,
        metadata={"prompts": versions()},
    )
