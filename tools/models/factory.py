"""Model factories: a spec string in, a LangChain chat model or embeddings out.

Switching any role to a hosted or self-hosted model is a configuration change
(``RAG_GENERATOR_MODEL=openai:qwen@http://127.0.0.1:8000/v1``), never a code change.
"""

from __future__ import annotations

import os
import socket
import time
from typing import Any, Literal
from urllib.parse import urlsplit

from langchain_core.embeddings import Embeddings
from langchain_core.language_models import BaseChatModel

from tools.config import MODEL_SPECS, ConfigError, Settings, redacted_url, section_key
from tools.errors import ModelError
from tools.models.local_assets import DEFAULT_LLM, resolve_gguf
from tools.models.spec import ModelSpec, parse_model_spec

Role = Literal["generator", "query", "verifier", "judge"]
ROLES: tuple[Role, ...] = ("generator", "query", "verifier", "judge")

# litellm fetches a cost map from the internet at import unless told not to.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")


def chat_spec(settings: Settings, role: Role) -> ModelSpec:
    return parse_model_spec(getattr(settings, f"{role}_model"), kind="chat")


def check_models(settings: Settings, roles: tuple[Role, ...] = ROLES) -> None:
    """Fail now, in one line, for a remote chat model that lacks its key or whose server
    does not answer, so a command fails before retrieval runs, not after it. Local
    models are neither loaded nor called here."""
    reached: set[str] = set()
    for role in roles:
        spec = chat_spec(settings, role)
        if spec.provider != "openai":
            continue
        setting = f"RAG_{role.upper()}_MODEL"
        _openai_key(spec, setting)
        url = (spec.base_url or key_base_url()).rstrip("/")
        if url not in reached:
            _reach(url, role, setting, attempts=settings.llm_max_retries + 1)
            reached.add(url)


def _reach(url: str, role: str, setting: str, *, attempts: int) -> None:
    """Open (and close) a TCP connection to the server behind ``url``."""
    parts = urlsplit(url)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    for attempt in range(attempts):
        try:
            socket.create_connection((parts.hostname or "", port), timeout=5).close()
            return
        except OSError as exc:
            reason = exc.strerror or type(exc).__name__
            if attempt + 1 < attempts:
                time.sleep(0.5 * 2**attempt)
    raise ModelError(
        f"the {role} model's server at {redacted_url(url)} does not answer ({reason}; "
        f"{attempts} attempts): start it, or point {setting} at one that runs"
    )


def chat_model(settings: Settings, role: Role) -> BaseChatModel:
    """The chat model configured for ``role``; local models are shared, not reloaded."""
    spec = chat_spec(settings, role)
    if spec.provider == "local":
        from tools.models.local_llm import ChatLocalLlama

        path = resolve_gguf(spec.name, settings.resolved_cache_dir())
        return ChatLocalLlama(
            model_path=str(path),
            model_name=spec.name or DEFAULT_LLM.name,
            n_ctx=settings.llm_context_tokens,
            n_threads=settings.llm_threads,
            max_tokens=settings.llm_max_tokens,
            temperature=settings.llm_temperature,
            timeout_s=settings.llm_timeout_s,
        )
    # what every remote chat model is given; tools/resilient.py is the one retry layer
    shared = {
        "model": spec.name,
        "temperature": settings.llm_temperature,
        "max_tokens": settings.llm_max_tokens,
        "max_retries": 0,
    }
    setting = f"RAG_{role.upper()}_MODEL"
    if spec.provider == "openai":
        from langchain_openai import ChatOpenAI

        return ChatOpenAI(
            **shared,
            base_url=spec.base_url,
            api_key=_openai_key(spec, setting),
            timeout=settings.llm_timeout_s,
        )
    from langchain_litellm import ChatLiteLLM

    return ChatLiteLLM(
        **shared,
        api_base=spec.base_url,
        api_key=_litellm_key(spec, setting),
        request_timeout=settings.llm_timeout_s,
        # a provider without logprobs or seed then replies without them instead of
        # refusing the call, and the verifier switches to sampling (tools/answer_check.py)
        model_kwargs={"drop_params": True},
    )


def chat_key(settings: Settings, role: Role) -> tuple[Any, ...]:
    """What ``chat_model`` builds from: two settings with the same key get the same model.
    The role's spec, and the models and local runtime sections but the model specs, so a
    setting added to either section is in the key."""
    return (
        "chat",
        role,
        chat_spec(settings, role),  # the spec itself: its string hides the password
        section_key(settings, "models", "local_runtime", leave_out=MODEL_SPECS),
    )


def embeddings_key(settings: Settings) -> tuple[Any, ...]:
    """What ``embeddings`` (and its retry wrapper) builds from: the embedding spec and the
    models section's other settings."""
    return (
        "embedding",
        settings.embedding_model,
        section_key(settings, "models", leave_out=MODEL_SPECS),
    )


def embeddings(settings: Settings) -> Embeddings:
    spec = parse_model_spec(settings.embedding_model, kind="embedding")
    if spec.provider == "local":
        from tools.models.local_embeddings import LocalSentenceEmbeddings

        return LocalSentenceEmbeddings(spec.name or None, batch_size=settings.embedding_batch_size)
    if spec.provider == "openai":
        from langchain_openai import OpenAIEmbeddings

        return OpenAIEmbeddings(
            model=spec.name,
            base_url=spec.base_url,
            api_key=_openai_key(spec, "RAG_EMBEDDING_MODEL"),
            check_embedding_ctx_length=False,  # else it downloads a tokenizer file
            chunk_size=settings.embedding_batch_size,
            max_retries=0,  # tools/resilient.py is the one retry layer
            request_timeout=settings.llm_timeout_s,
        )
    from langchain_litellm import LiteLLMEmbeddings

    return LiteLLMEmbeddings(
        model=spec.name,
        api_base=spec.base_url,
        api_key=_litellm_key(spec, "RAG_EMBEDDING_MODEL"),
        request_timeout=settings.llm_timeout_s,
        max_retries=0,  # tools/resilient.py is the one retry layer
    )


OPENAI_DEFAULT_BASE_URL = "https://api.openai.com/v1"
# litellm routes that send OPENAI_API_KEY from the environment when no key is given
LITELLM_OPENAI_ROUTES = ("openai/", "custom_openai/", "text-completion-openai/")


def key_base_url() -> str:
    """The one base URL ``OPENAI_API_KEY`` belongs to: ``OPENAI_BASE_URL`` or OpenAI's."""
    return (os.environ.get("OPENAI_BASE_URL") or OPENAI_DEFAULT_BASE_URL).rstrip("/")


def _litellm_key(spec: ModelSpec, setting: str) -> str | None:
    """For litellm's ``openai/`` route to a server of one's own, the key ``_openai_key``
    gives: without it litellm refuses to call even a server that needs none, or sends
    ``OPENAI_API_KEY`` to whatever host the spec names. Other providers read their own
    keys from the environment, as litellm documents."""
    if spec.base_url and spec.name.startswith(LITELLM_OPENAI_ROUTES):
        return _openai_key(spec, setting)
    return None


def _openai_key(spec: ModelSpec, setting: str) -> str:
    """The key to send with ``spec``: ``OPENAI_API_KEY`` only to the base URL it was
    configured for, so a spec naming another host never receives it."""
    key = os.environ.get("OPENAI_API_KEY")
    own_host = (spec.base_url or key_base_url()).rstrip("/") == key_base_url()
    if key and own_host:
        return key
    if spec.base_url:  # self-hosted OpenAI-compatible servers usually ignore the key
        return "not-needed"
    raise ConfigError(
        f"{setting}={spec} needs OPENAI_API_KEY, or a base URL for an OpenAI-compatible "
        f"server: openai:{spec.name}@http://host:port/v1"
    )
