"""How a run finds its settings: the operator's ``Settings`` plus what a request may tune.

There are two ways in, and the difference is the trust boundary:

- In-process callers (the CLI, the chat page, ``rag eval``, Python code) are the
  operator. ``graph.config_for(k=4, generator_model=...)`` validates their settings
  once and puts the ``Settings`` object itself in ``configurable[SETTINGS_KEY]``. A
  JSON request can never produce a ``Settings`` instance, so no request can forge it.
- Everything else in ``configurable`` (a server run's config, an assistant's config,
  a ``checkpoint`` the server merged in, a cron, a batch item) is a request: it may
  only change ``REQUEST_SETTINGS``; any other setting raises ``ConfigError`` naming it,
  whatever route brought it. Its base is the service's own settings (defaults,
  ``rag.toml``, ``RAG_*`` variables).

The input may also carry ``collection``, ``k`` and ``rerank`` for one question.
"""

from __future__ import annotations

import os
from functools import lru_cache
from typing import Any

from langchain_core.runnables import RunnableConfig

from graph.state import InputState
from tools.config import ConfigError, Settings, load_settings, request_overrides

SETTINGS_KEY = "rag_settings"
# what an input may set for one question: InputState's fields beyond the question itself
PER_QUESTION_FIELDS = tuple(
    k for k in InputState.__annotations__ if k not in ("question", "messages")
)


@lru_cache(maxsize=8)
def _service_settings(env: tuple[tuple[str, str], ...]) -> Settings:
    return load_settings(environ=dict(env))


def service_settings() -> Settings:
    """The settings the service was started with (defaults < rag.toml < RAG_* variables)."""
    env = tuple(sorted((k, v) for k, v in os.environ.items() if k.startswith("RAG_")))
    return _service_settings(env)


@lru_cache(maxsize=64)
def _apply(base: Settings, overrides: tuple[tuple[str, Any], ...]) -> Settings:
    if not overrides:
        return base
    return load_settings({**base.model_dump(), **dict(overrides)}, environ={})


def settings_for(config: RunnableConfig | None, state: dict[str, Any] | None = None) -> Settings:
    configurable = (config or {}).get("configurable") or {}
    base = configurable.get(SETTINGS_KEY)
    if not isinstance(base, Settings):
        base = service_settings()
    overrides = request_overrides(configurable, "config.configurable")
    for key in PER_QUESTION_FIELDS:
        if (state or {}).get(key) is not None:
            overrides[key] = state[key]
    key = tuple(sorted(overrides.items()))
    try:
        return _apply(base, key)
    except TypeError:  # unhashable: a list or an object where a plain value belongs
        raise ConfigError(f"settings in a request must be plain values, got {overrides}") from None
