"""Process-wide, lazily built resources the nodes share (collections, models).

Models are expensive to load and collections hold open database handles, so each
is built once per distinct configuration and reused by every run in the process.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from functools import lru_cache
from typing import TypeVar

from langchain_core.embeddings import Embeddings
from langchain_core.language_models import BaseChatModel

from tools.collection import Collection
from tools.config import Settings
from tools.model_spec import parse_model_spec
from tools.models import Role, chat_model, embeddings
from tools.resilient import ResilientEmbeddings
from tools.vector_store import StaleStoreError

T = TypeVar("T")
STALE_ATTEMPTS = 3
STALE_BACKOFF_S = 0.1

_collections: dict[tuple[Settings, str], Collection] = {}
_collections_lock = threading.Lock()


def collection(settings: Settings, name: str, *, reopen: bool = False) -> Collection:
    """The process's handle on a collection, opened again when it is outdated: a
    ``rag ingest`` (or ``--rebuild``) in another process while this one serves.

    A replaced handle is left to runs still using it (garbage collection closes it)."""
    with _collections_lock:
        current = _collections.get((settings, name))
        if current is None or reopen or current.outdated():
            current = Collection(settings, name, fresh_store=current is not None)
            _collections[(settings, name)] = current
        return current


@lru_cache(maxsize=8)
def embedder(settings: Settings) -> Embeddings:
    """Question-time embeddings: a remote provider retries with backoff and fails as a
    typed ModelError, so an outage is the answer's ``error.stage = retrieve``, not a crash
    (ingestion has its own retry around whole batches: one layer on each path)."""
    model = embeddings(settings)
    if parse_model_spec(settings.embedding_model, kind="embedding").provider == "local":
        return model
    return ResilientEmbeddings(model, settings.llm_max_retries)


@lru_cache(maxsize=16)
def llm(settings: Settings, role: Role) -> BaseChatModel:
    return chat_model(settings, role)


def read_collection(settings: Settings, name: str, read: Callable[[Collection], T]) -> T:
    """``read(collection)``, repeated on a reopened collection when another Chroma system
    deleted vectors during the read (a commit by another process between our check and
    our search)."""
    for attempt in range(STALE_ATTEMPTS):
        try:
            return read(collection(settings, name, reopen=attempt > 0))
        except StaleStoreError as exc:
            if attempt + 1 == STALE_ATTEMPTS:
                raise StaleStoreError(
                    f"{exc}; another process kept changing the collection while "
                    f"{STALE_ATTEMPTS} reads ran: ask again when its ingestion is done"
                ) from exc
            time.sleep(STALE_BACKOFF_S * 2**attempt)  # let the other process finish a commit
    raise AssertionError("unreachable")
