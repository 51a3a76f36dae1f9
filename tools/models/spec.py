"""Model spec strings: one setting picks a model and where it runs.

local                              the embedded default (Qwen2.5-Coder-1.5B / all-MiniLM-L6-v2)
local:smollm2                      a named local asset (see tools.models.local_assets)
local:/path/model.gguf             your own GGUF file (chat) or sentence-transformers dir
openai:gpt-4o-mini                 OpenAI, or any OpenAI-compatible server with
openai:qwen@http://host:8000/v1    ...a base URL (vLLM, Ollama, llama.cpp server)
litellm:anthropic/claude-3-5-haiku any litellm provider/model
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from tools.redact import redacted_url

PROVIDERS = ("local", "openai", "litellm")
ACCEPTED = (
    "'local', 'local:<asset name or path>', 'openai:<model>[@<base_url>]', "
    "'litellm:<provider>/<model>'"
)


@dataclass(frozen=True)
class ModelSpec:
    provider: Literal["local", "openai", "litellm"]
    name: str  # empty for the default local model
    base_url: str | None = None

    def __str__(self) -> str:
        """For display: a password in the base URL is shown as *** (compare specs, not
        their strings)."""
        text = self.provider + (f":{self.name}" if self.name else "")
        return text + (f"@{redacted_url(self.base_url)}" if self.base_url else "")


def parse_model_spec(spec: str, *, kind: Literal["chat", "embedding"]) -> ModelSpec:
    """Parse and check a spec; raises ValueError whose message lists accepted forms."""
    text = (spec or "").strip()
    provider, _, rest = text.partition(":")
    if provider not in PROVIDERS:
        raise ValueError(f"unknown model provider {provider!r} for a {kind} model; use {ACCEPTED}")
    if provider == "local":
        return ModelSpec("local", rest)
    base_url = None
    if "@" in rest:
        rest, _, base_url = rest.partition("@")
        if not base_url.startswith(("http://", "https://")):
            raise ValueError(f"base URL {base_url!r} must start with http:// or https://")
    if not rest:
        raise ValueError(f"{provider!r} needs a model name, e.g. {ACCEPTED}")
    if provider == "litellm" and "/" not in rest:
        raise ValueError(f"litellm models are '<provider>/<model>', got {rest!r}")
    return ModelSpec(provider, rest, base_url)  # type: ignore[arg-type]
