"""The agentic RAG LangGraph. Its public surface, and the only one (docs_corpus/python-api.md):

- ``graph``: the compiled graph, with services (models, collections) that load on first
  use; ``graph.invoke({"question": q}, {"configurable": {"k": 4}})``.
- ``build_graph(checkpointer=..., services=...)``: a new compiled graph, for a
  checkpointer or services of your own.
- ``config_for(**settings)``: an operator's run config (any setting, and a trace).

``graph`` is built on first access (module ``__getattr__``), so ``import graph`` and the
submodules stay cheap for callers that never use it.
"""

from __future__ import annotations

from typing import Any

from graph.builder import build_graph, config_for

__all__ = ["build_graph", "config_for", "graph"]


def __getattr__(name: str) -> Any:
    if name == "graph":
        compiled = build_graph()
        globals()["graph"] = compiled  # later lookups find it without coming here
        return compiled
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
