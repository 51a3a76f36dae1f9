"""The LangGraph server's graph factory (``langgraph.json`` names it): the server
process's services, and one trace per run.

The server is the process that owns its models and collection handles, so it holds one
``Services`` for every run; runs cannot pass their own (a request's ``context`` is JSON).
"""

from __future__ import annotations

from functools import lru_cache

from langchain_core.runnables import RunnableConfig
from langgraph.graph.state import CompiledStateGraph

from graph.builder import build_graph, traced
from graph.configuration import run_settings
from graph.services import Services


@lru_cache(maxsize=1)
def server_services() -> Services:
    """Built on the first run: models load once and serve every later run."""
    return Services()


def make_graph(config: RunnableConfig) -> CompiledStateGraph:
    """Each run gets its own trace, the thread becomes the Langfuse session, and
    ``configurable.user_id`` the user.

    The run's config is a request, whatever route brought it (runs, batch, crons,
    assistants, a merged ``checkpoint``): ``run_settings`` refuses any operator-only
    setting in it here, and every node's run refuses it again with the client's limits
    (graph/run.py), once the input that may name the collection is known.
    """
    configurable = config.get("configurable") or {}
    settings = run_settings(config, check_client=False)
    run_id = str(config.get("run_id") or configurable.get("run_id") or "") or None
    user_id = configurable.get("user_id")
    trace = traced(
        settings,
        configurable.get("thread_id"),
        user_id if isinstance(user_id, str) else None,
        run_id,
    )
    return build_graph(services=server_services()).with_config(trace)
