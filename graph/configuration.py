"""How a run finds its settings: the shared ``Settings`` plus per-run overrides.

Server assistants and runs pass overrides as ``config["configurable"]`` (any
``Settings`` field, e.g. ``{"k": 4, "rerank": "llm"}``); the input may also carry
``collection``, ``k`` and ``rerank`` for one question. Everything else comes from
defaults, ``rag.toml`` and ``RAG_*`` variables, validated exactly as for the CLI.
"""

from __future__ import annotations

import os
from functools import lru_cache
from typing import Any

from langchain_core.runnables import RunnableConfig

from tools.config import Settings, load_settings

PER_QUESTION_FIELDS = ("collection", "k", "rerank")


@lru_cache(maxsize=64)
def _settings(overrides: tuple[tuple[str, Any], ...], env: tuple[tuple[str, str], ...]) -> Settings:
    return load_settings(dict(overrides), environ=dict(env))


def settings_for(config: RunnableConfig | None, state: dict[str, Any] | None = None) -> Settings:
    configurable = (config or {}).get("configurable") or {}
    overrides = {k: v for k, v in configurable.items() if k in Settings.model_fields}
    for key in PER_QUESTION_FIELDS:
        if (state or {}).get(key) is not None:
            overrides[key] = state[key]
    env = tuple(sorted((k, v) for k, v in os.environ.items() if k.startswith("RAG_")))
    return _settings(tuple(sorted(overrides.items(), key=lambda kv: kv[0])), env)
