"""One run's settings and services, resolved in one place and handed to every node and
edge.

Nodes and edges never resolve settings themselves: ``build_graph`` wraps each of them
(``as_node``, ``as_edge``), and the wrapper asks ``run_of`` for the run's ``Run``.
``run_of`` is the only caller of ``run_settings``, so the client's limits
(graph/configuration.py) hold for every node, and a node added later cannot forget them.
Resolution is memoised on the request's values, so every node of a run gets the same
``Settings`` object without re-validating it.

Each node's model calls go through a ``CallMeter`` (tools/models/metered.py) made here
for that node, starting from the calls the question has made so far (its ``calls``):
the calls are counted against the question's ceiling (graph/budget.py) and appended
to ``calls``, the answer's account of them.

Services come from LangGraph's runtime context when the caller passed a ``Services``
(the CLI, the chat page, evaluation, tests with fakes); otherwise from the graph's own,
given to ``build_graph`` by its entry point (the server's graph factory). A JSON
``context`` from a request is never a ``Services``, so it is ignored.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.runtime import Runtime

from graph.budget import call_ceiling
from graph.configuration import run_client, run_settings
from graph.draft import STEP
from graph.services import Services
from graph.state import State
from tools.config import Settings
from tools.models.metered import CallMeter


@dataclass(frozen=True)
class Run:
    """What a node needs besides the state: the run's checked settings, its services,
    and its config (model calls pass it on, so their traces nest under the node's)."""

    settings: Settings
    services: Services
    config: RunnableConfig


Node = Callable[[State, Run], dict[str, Any]]
Edge = Callable[[State, Run], str]


def run_of(
    state: dict[str, Any], config: RunnableConfig, runtime: Runtime[Any] | None, default: Services
) -> Run:
    """The run's settings (checked against its client) and services."""
    context = runtime.context if runtime is not None else None
    services = context if isinstance(context, Services) else default
    return Run(run_settings(config, state), services, config)


def as_node(name: str, node: Node, default: Services) -> Callable[..., dict[str, Any]]:
    """``node`` as LangGraph calls it: given its ``Run`` with metered services,
    announced on the ``custom`` stream, timed into ``timings`` (seconds, added up over
    regenerations) and its model calls appended to ``calls``."""

    def run(
        state: State, config: RunnableConfig, runtime: Runtime[Any] | None = None
    ) -> dict[str, Any]:
        if runtime is not None:
            runtime.stream_writer({"kind": STEP, "node": name})
        started = time.perf_counter()
        given = run_of(state, config, runtime, default)
        client = run_client(config.get("configurable") or {})
        made = list(state.get("calls") or [])
        meter = CallMeter(name, call_ceiling(given.settings, client), len(made))
        update = node(state, replace(given, services=given.services.metered(meter)))
        timings = dict(update.get("timings", state.get("timings")) or {})
        timings[name] = round(timings.get(name, 0.0) + time.perf_counter() - started, 4)
        calls = list(update.get("calls", made)) + meter.calls
        return {**update, "timings": timings, "calls": calls}

    # not functools.wraps: LangGraph reads the signature to inject ``runtime``, and
    # ``__wrapped__`` would show it the node's own
    run.__name__, run.__qualname__, run.__doc__ = node.__name__, node.__qualname__, node.__doc__
    return run


def as_edge(edge: Edge, default: Services) -> Callable[..., str]:
    """``edge`` as LangGraph calls a routing function, given its ``Run``."""

    def route(state: State, config: RunnableConfig, runtime: Runtime[Any] | None = None) -> str:
        return edge(state, run_of(state, config, runtime, default))

    route.__name__, route.__qualname__, route.__doc__ = (
        edge.__name__,
        edge.__qualname__,
        edge.__doc__,
    )
    return route
