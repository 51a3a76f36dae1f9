"""How a run finds its settings: the operator's ``Settings`` plus what a request may tune.

There are two ways in, and the difference is the trust boundary:

- In-process callers (the CLI, the chat page, ``rag eval``, Python code) are the
  operator. ``graph.config_for(settings, k=4)`` (or ``config_for(k=4)``) validates their
  settings once and puts the ``Settings`` object itself in ``configurable[SETTINGS_KEY]``. A
  JSON request can never produce a ``Settings`` instance, so no request can forge it.
- Everything else in ``configurable`` (a server run's config, an assistant's config,
  a ``checkpoint`` the server merged in, a cron, a batch item) is a request: it may
  only change ``REQUEST_SETTINGS``; any other setting raises ``ConfigError`` naming it,
  whatever route brought it. Its base is the service's own settings
  (``tools.config.load_settings()``: defaults, ``rag.toml``, ``RAG_*`` variables).

The input may also carry ``collection``, ``k`` and ``rerank`` for one question.

Each client's limits hold here, where the run's settings are resolved, not only at the
server's door: a server run carries the client LangGraph's auth authenticated
(``langgraph_auth_user_id``, set by the server after any request value is merged, so a
request cannot forge it), and every resolution refuses a collection that client may
not read and settings over ``max_model_calls``, whatever the request, the thread's
saved state or an earlier turn said. Every node and edge gets its settings from
``run_settings`` (through graph/run.py, its one caller in the graph) before it opens a
collection or calls a model, so a routing mistake in front of the graph cannot widen
what a client reads or spends.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from langchain_core.runnables import RunnableConfig

from graph.budget import budget_problem
from graph.state import InputState
from tools.config import (
    ConfigError,
    Settings,
    load_settings,
    readable_collections,
    request_overrides,
)

SETTINGS_KEY = "rag_settings"
AUTH_USER_KEY = "langgraph_auth_user_id"  # the LangGraph server's authenticated identity
# keys the LangGraph server puts in every run's configurable: a run that has them and no
# authenticated identity is a server run nobody vouched for, held to the 'anyone' limits
SERVER_RUN_KEYS = ("langgraph_request_id", "assistant_id", "graph_id")


class AccessRefused(ConfigError):
    """A run asked for what its client may not read or spend: the run stops here."""


# what an input may set for one question: InputState's fields beyond the question itself
PER_QUESTION_FIELDS = tuple(
    k for k in InputState.__annotations__ if k not in ("question", "messages")
)


@lru_cache(maxsize=64)
def _apply(base: Settings, overrides: tuple[tuple[str, Any], ...]) -> Settings:
    return load_settings(dict(overrides), base=base)


def run_client(configurable: dict[str, Any]) -> str | None:
    """The server client a run is for, as LangGraph's auth named it ('operator' for the
    server's own ``api_key``); None for an in-process caller, who is the operator."""
    if isinstance(configurable.get(SETTINGS_KEY), Settings):
        return None  # a Settings object: only in-process code can make one
    client = configurable.get(AUTH_USER_KEY)
    if isinstance(client, str) and client:
        return client
    return "anyone" if any(k in configurable for k in SERVER_RUN_KEYS) else None


def client_problem(settings: Settings, client: str | None) -> str | None:
    """Why a server client may not run with these settings, or None. The door
    (server/app.py) says the same earlier and more kindly; this is the check that
    cannot be routed around. In-process callers (``client`` None) are the operator."""
    if client is None:
        return None
    readable = readable_collections(settings, client)
    if readable is not None and settings.collection not in readable:
        return f"unknown collection {settings.collection!r}"  # as a missing one reads
    return budget_problem(settings)


def run_settings(
    config: RunnableConfig | None,
    state: dict[str, Any] | None = None,
    *,
    check_client: bool = True,
) -> Settings:
    """A run's settings: the operator's base (an in-process caller's ``Settings``, else
    ``load_settings()``), the request's overrides, then the question's own fields,
    checked against the run's client every time.

    ``check_client=False`` leaves the client's limits out: only for what reads no
    collection and calls no model (the server's graph factory naming a run's trace,
    before the run's input, which may name the collection, is known)."""
    configurable = (config or {}).get("configurable") or {}
    base = configurable.get(SETTINGS_KEY)
    if not isinstance(base, Settings):
        base = load_settings()
    overrides = request_overrides(configurable, "config.configurable")
    for key in PER_QUESTION_FIELDS:
        if (state or {}).get(key) is not None:
            overrides[key] = state[key]
    try:
        settings = _apply(base, tuple(sorted(overrides.items())))
    except TypeError:  # unhashable: a list or an object where a plain value belongs
        raise ConfigError(f"settings in a request must be plain values, got {overrides}") from None
    if check_client and (problem := client_problem(settings, run_client(configurable))):
        raise AccessRefused(problem)
    return settings
