"""The agentic RAG LangGraph: ``from graph import build_graph, config_for``."""

from graph.graph import build_graph, config_for

__all__ = ["build_graph", "config_for"]
