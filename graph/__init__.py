"""The agentic RAG LangGraph: ``from graph import build_graph`` or the compiled ``graph``."""

from graph.graph import build_graph, graph

__all__ = ["build_graph", "graph"]
