"""Chunk vectors in Chroma, embedded on disk or on a Chroma server, via langchain-chroma.

Collections are created in cosine space with an explicit ``ef_search`` (Chroma's
default L2 space makes LangChain's relevance scores negative, and a low ef makes
HNSW search very approximate); writes are split below the server's maximum batch.
"""

from __future__ import annotations

import shutil
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import chromadb
from chromadb.api.shared_system_client import SharedSystemClient
from chromadb.config import Settings as ChromaSettings
from chromadb.errors import ChromaError
from langchain_chroma import Chroma

from tools.config import ConfigError, Settings
from tools.documents import Chunk
from tools.store.protocol import StaleStoreError


class StorageError(OSError):
    """A vector-store write failed (a full disk, a read-only directory). An ``OSError``,
    like the same fault in the manifest, so callers handle storage faults in one place."""


# Embedded Chroma shares one "system" per directory in a process, and a system loads a
# collection's index once: it sees the vectors on disk when it started and those written
# through it, never those another process writes later. When this process's system for a
# directory started (see Collection, which opens a fresh one when it would miss commits):
_store_started: dict[str, float] = {}
_store_lock = threading.Lock()


def store_started(settings: Settings) -> float | None:
    """When this process's embedded Chroma system for the data directory started."""
    return _store_started.get(str(settings.data_dir / "chroma"))


def chroma_client(settings: Settings, *, fresh: bool = False) -> chromadb.ClientAPI:
    """An embedded persistent client under the data directory, or a server client.

    ``fresh`` starts a new embedded system that reads the files as they are now; handles
    opened before keep working on their old one."""
    client_settings = ChromaSettings(anonymized_telemetry=False, allow_reset=False)
    if settings.chroma_host:
        host, _, port = settings.chroma_host.partition(":")
        try:
            return chromadb.HttpClient(host=host, port=int(port or 8000), settings=client_settings)
        except Exception as exc:
            raise ConfigError(
                f"cannot reach the Chroma server at chroma_host={settings.chroma_host!r}: {exc}"
            ) from exc
    path = settings.data_dir / "chroma"
    path.mkdir(parents=True, exist_ok=True)
    try:
        with _store_lock:
            if fresh:
                SharedSystemClient.clear_system_cache()
            if fresh or str(path) not in _store_started:
                _store_started[str(path)] = time.time()
            return chromadb.PersistentClient(path=str(path), settings=client_settings)
    except Exception as exc:  # chromadb raises assorted types for a full disk or damage
        free_mb = shutil.disk_usage(path).free / 1e6
        raise ConfigError(
            f"the Chroma store {path} cannot be opened ({type(exc).__name__}: {exc}). Chroma "
            f"replays its write log on opening and needs free space for it ({free_mb:.0f} MB "
            "free now): free space and retry first. If it still fails, the store is damaged: "
            "move it away, then rebuild each collection with `rag ingest PATH... --collection "
            "NAME --rebuild`"
        ) from exc


def drop_vectors(client: chromadb.ClientAPI, name: str) -> None:
    """Delete a collection's vectors; a collection Chroma does not have is already gone."""
    if name in {c.name for c in client.list_collections()}:
        client.delete_collection(name)


class ChromaChunkStore:
    """The vector half of a collection. Search returns cosine *distances* (0 = identical)."""

    def __init__(
        self, client: chromadb.ClientAPI, name: str, ef_search: int, max_batch: int | None = None
    ) -> None:
        """``max_batch``: records per upsert or delete call, at most (and by default)
        the server's maximum."""
        self.name = name
        self._store = Chroma(
            client=client,
            collection_name=name,
            collection_configuration={"hnsw": {"space": "cosine", "ef_search": ef_search}},
        )
        self._collection = self._store._collection
        server_max = client.get_max_batch_size()
        self._max_batch = min(max_batch or server_max, server_max)

    def close(self) -> None:
        """Nothing to release: the Chroma client is shared by the process."""

    def upsert(self, chunks: Sequence[Chunk], vectors: Sequence[Sequence[float]]) -> None:
        for start in range(0, len(chunks), self._max_batch):
            part = chunks[start : start + self._max_batch]
            try:
                self._collection.upsert(
                    ids=[c.id for c in part],
                    embeddings=[list(v) for v in vectors[start : start + self._max_batch]],
                    documents=[c.text for c in part],
                    metadatas=[c.to_metadata() for c in part],
                )
            except ChromaError as exc:
                raise StorageError(f"writing vectors to Chroma failed: {exc}") from exc

    def delete(self, ids: Iterable[str]) -> None:
        ids = list(ids)
        for start in range(0, len(ids), self._max_batch):
            try:
                self._collection.delete(ids=ids[start : start + self._max_batch])
            except ChromaError as exc:
                raise StorageError(f"deleting vectors from Chroma failed: {exc}") from exc

    def ids(self) -> set[str]:
        return set(self._collection.get(include=[])["ids"])

    def count(self) -> int:
        return self._collection.count()

    def vectors_for_text_hashes(self, hashes: Iterable[str]) -> dict[str, list[float]]:
        """Stored vectors of identical texts, so unchanged text is never embedded twice."""
        wanted = list(dict.fromkeys(hashes))
        found: dict[str, list[float]] = {}
        for start in range(0, len(wanted), 1000):
            got = self._collection.get(
                where={"text_hash": {"$in": wanted[start : start + 1000]}},
                include=["embeddings", "metadatas"],
            )
            for meta, vector in zip(got["metadatas"], got["embeddings"], strict=True):
                found[str(meta["text_hash"])] = list(vector)
        return found

    @contextmanager
    def _stale_guard(self) -> Iterator[None]:
        try:
            yield
        except ChromaError as exc:
            if "Error finding id" in str(exc):
                raise StaleStoreError(f"collection {self.name!r}: {exc}") from exc
            raise

    def search(
        self, vector: Sequence[float], k: int, where: dict[str, Any] | None = None
    ) -> list[tuple[Chunk, float]]:
        if k <= 0:  # an empty collection returns no hits
            return []
        with self._stale_guard():
            hits = self._store.similarity_search_by_vector_with_relevance_scores(
                list(vector), k=k, filter=where
            )
        return [(Chunk.from_metadata(doc.page_content, doc.metadata), dist) for doc, dist in hits]

    def held(self, ids: Iterable[str]) -> set[str]:
        """Which of ``ids`` have a vector here."""
        ids = list(ids)
        found: set[str] = set()
        for start in range(0, len(ids), 5000):
            with self._stale_guard():
                found.update(self._collection.get(ids=ids[start : start + 5000], include=[])["ids"])
        return found

    def vectors_for_ids(self, ids: Sequence[str]) -> dict[str, Sequence[float]]:
        """Stored vectors as Chroma returns them (arrays: a list per vector cost more than
        the search at 100k chunks)."""
        if not ids:
            return {}
        with self._stale_guard():
            got = self._collection.get(ids=list(ids), include=["embeddings"])
        return dict(zip(got["ids"], got["embeddings"], strict=True))
