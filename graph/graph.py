"""The compiled agentic RAG graph.

generate_queries -> retrieve -> [rerank] -> generate_answer -> verify -> finalize
                       |            |              |  ^           |
                       +------------+--> finalize  |  +-----------+ (not grounded,
                       (no passages: abstain)      |   attempts <= max_regenerations)
                                                   +-> finalize (model says not found)
"""

from __future__ import annotations

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph

from graph import nodes
from graph.state import InputState, OutputState, State

NODE_NAMES = ("generate_queries", "retrieve", "rerank", "generate_answer", "verify", "finalize")


def build_graph(checkpointer: BaseCheckpointSaver | None = None) -> CompiledStateGraph:
    builder = StateGraph(State, input_schema=InputState, output_schema=OutputState)
    builder.add_node("generate_queries", nodes.generate_queries)
    builder.add_node("retrieve", nodes.retrieve)
    builder.add_node("rerank", nodes.rerank_passages)
    builder.add_node("generate_answer", nodes.generate_answer)
    builder.add_node("verify", nodes.verify)
    builder.add_node("finalize", nodes.finalize)

    builder.add_edge(START, "generate_queries")
    builder.add_edge("generate_queries", "retrieve")
    builder.add_conditional_edges(
        "retrieve", nodes.after_retrieve, ["rerank", "generate_answer", "finalize"]
    )
    builder.add_conditional_edges("rerank", nodes.after_rerank, ["generate_answer", "finalize"])
    builder.add_conditional_edges("generate_answer", nodes.after_answer, ["verify", "finalize"])
    builder.add_conditional_edges("verify", nodes.after_verify, ["generate_answer", "finalize"])
    builder.add_edge("finalize", END)
    return builder.compile(checkpointer=checkpointer, name="agentic-rag")


graph = build_graph()
