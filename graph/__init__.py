"""The agentic RAG LangGraph: ``from graph import build_graph`` or the compiled ``graph``."""

from graph.graph import build_graph, config_for, graph, make_graph

__all__ = ["build_graph", "config_for", "graph", "make_graph"]
