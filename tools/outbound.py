"""Where the service sends data, and the telemetry nobody asked for, kept off.

An operator must be able to list every host the service talks to. The configured ones
are the remote models, a Chroma server and Langfuse. LangSmith is the unasked one: with
``LANGSMITH_API_KEY`` in its environment, LangChain traces to it and the LangGraph server
reports usage metadata (versions, the app's path) every 5 minutes. Unless the operator
sets ``langsmith``, its variables are removed from this process and from the server's.
"""

from __future__ import annotations

import os
from collections.abc import MutableMapping

from tools import tracing
from tools.config import Settings, redacted_url
from tools.models.factory import ROLES, chat_spec, key_base_url
from tools.models.spec import parse_model_spec
from tools.store.backends import backend

# LangSmith's variables, under both of its names: every one of them is removed (new
# ones, such as LANGSMITH_RUNS_ENDPOINTS, keep appearing), never a list kept by hand
LANGSMITH_PREFIXES = ("LANGSMITH_", "LANGCHAIN_")


def without_unasked_telemetry(settings: Settings, env: MutableMapping[str, str]) -> None:
    """Remove LangSmith's variables from ``env`` (os.environ, or a server's) unless asked."""
    if settings.langsmith:
        return
    for name in [n for n in env if n.startswith(LANGSMITH_PREFIXES)]:
        env.pop(name, None)
    env["LANGSMITH_TRACING"] = "false"


def destinations(settings: Settings) -> list[str]:
    """Every outside address this configuration sends data to, with what goes there."""
    found: dict[str, list[str]] = {}
    specs = [(chat_spec(settings, role), f"{role} model") for role in ROLES]
    specs.append((parse_model_spec(settings.embedding_model, kind="embedding"), "embedding model"))
    for spec, what in specs:
        if spec.provider != "local":
            # an openai spec with no base URL goes where OPENAI_API_KEY belongs
            default = key_base_url() if spec.provider == "openai" else f"litellm: {spec.name}"
            where = spec.base_url or default
            found.setdefault(where, []).append(what)
    if sent := backend(settings).address(settings):
        found.setdefault(sent[0], []).append(sent[1])
    if tracing.mode(settings) == "langfuse":
        host = (
            os.environ.get("LANGFUSE_BASE_URL")
            or os.environ.get("LANGFUSE_HOST")  # the SDK's older name for it
            or "https://cloud.langfuse.com"
        )
        found.setdefault(host, []).append("traces (Langfuse)")
    if settings.langsmith:
        host = os.environ.get("LANGSMITH_ENDPOINT") or "https://api.smith.langchain.com"
        found.setdefault(host, []).append("traces and server usage (LangSmith)")
    return [f"{redacted_url(where)}: {', '.join(what)}" for where, what in found.items()]
