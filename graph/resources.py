"""Process-wide, lazily built resources the nodes share (collections, models).

Models are expensive to load and collections hold open database handles, so each
is built once per distinct configuration and reused by every run in the process.
"""

from __future__ import annotations

from functools import lru_cache

from langchain_core.embeddings import Embeddings
from langchain_core.language_models import BaseChatModel

from tools.collection import Collection
from tools.config import Settings
from tools.models import Role, chat_model, embeddings


@lru_cache(maxsize=16)
def collection(settings: Settings, name: str) -> Collection:
    return Collection(settings, name)


@lru_cache(maxsize=8)
def embedder(settings: Settings) -> Embeddings:
    return embeddings(settings)


@lru_cache(maxsize=16)
def llm(settings: Settings, role: Role) -> BaseChatModel:
    return chat_model(settings, role)
