"""A named collection: the manifest (what is committed), Chroma vectors, and BM25.

Ingestion writes through this class; retrieval reads through it. Reads only ever
return chunks the manifest lists, which is what makes an interrupted ingestion
invisible: its vectors exist in Chroma but are not committed.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tools.config import ConfigError, Settings
from tools.documents import Chunk
from tools.keyword_index import KeywordIndex
from tools.manifest import Manifest
from tools.vector_store import ChromaChunkStore, chroma_client

# the same rule as Settings.collection (Chroma's own name rule, kept short for file names)
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{1,62}[A-Za-z0-9]")


def manifest_path(settings: Settings, name: str) -> Path:
    return settings.data_dir / "collections" / f"{name}.sqlite"


def list_collections(settings: Settings) -> list[str]:
    folder = settings.data_dir / "collections"
    return sorted(p.stem for p in folder.glob("*.sqlite")) if folder.is_dir() else []


class Collection:
    def __init__(self, settings: Settings, name: str | None = None, *, create: bool = False):
        self.name = name or settings.collection
        if not _NAME.fullmatch(self.name) or ".." in self.name:
            raise ConfigError(
                f"invalid collection name {self.name!r}: use 3-64 letters, digits, '.', '_' "
                "or '-', starting and ending with a letter or digit"
            )
        path = manifest_path(settings, self.name)
        if not create and not path.exists():
            known = ", ".join(list_collections(settings)) or "none yet"
            raise ConfigError(
                f"unknown collection {self.name!r} in {settings.data_dir} (known: {known}); "
                "create it with `rag ingest PATH --collection NAME`"
            )
        self.manifest = Manifest(path)
        self.vectors = ChromaChunkStore(chroma_client(settings), self.name, settings.hnsw_ef_search)
        self._cache_lock = threading.Lock()
        self._cache: tuple[int, set[str], KeywordIndex] | None = None

    def close(self) -> None:
        self.manifest.close()

    # --- guards ----------------------------------------------------------------------------
    def bind_embedding(self, spec: str, dimension: int) -> None:
        """Refuse to mix vectors from two embedding models in one collection."""
        meta = self.manifest.meta()
        if "embedding_model" not in meta:
            self.manifest.set_meta({"embedding_model": spec, "embedding_dimension": dimension})
        elif (meta["embedding_model"], meta["embedding_dimension"]) != (spec, dimension):
            raise ConfigError(
                f"collection {self.name!r} was embedded with {meta['embedding_model']!r} "
                f"({meta['embedding_dimension']}-d), not {spec!r} ({dimension}-d). Set "
                f"RAG_EMBEDDING_MODEL={meta['embedding_model']} or ingest into a new collection."
            )

    def require_embedding(self, spec: str) -> None:
        """Queries must be embedded by the model the collection was built with."""
        built_with = self.manifest.meta().get("embedding_model")
        if built_with is not None and built_with != spec:
            raise ConfigError(
                f"collection {self.name!r} was embedded with {built_with!r}, but "
                f"embedding_model is {spec!r}; set RAG_EMBEDDING_MODEL={built_with} to query it"
            )

    # --- read side -------------------------------------------------------------------------
    def _snapshot(self) -> tuple[set[str], KeywordIndex]:
        generation = self.manifest.generation()
        with self._cache_lock:
            if self._cache is None or self._cache[0] != generation:
                ids, tokens = self.manifest.tokens()
                self._cache = (generation, set(ids), KeywordIndex(ids, tokens))
            return self._cache[1], self._cache[2]

    def committed_ids(self) -> set[str]:
        return self._snapshot()[0]

    def dense_search(
        self, vector: Sequence[float], k: int, where: dict[str, Any] | None = None
    ) -> list[tuple[Chunk, float]]:
        """Nearest committed chunks with their cosine distance (0 = same direction)."""
        committed = self.committed_ids()
        hits = self.vectors.search(vector, k, where)
        return [(chunk, dist) for chunk, dist in hits if chunk.id in committed]

    def keyword_search(self, query: str, k: int) -> list[tuple[Chunk, float]]:
        hits = self._snapshot()[1].search(query, k)
        chunks = self.manifest.chunks(cid for cid, _ in hits)
        return [(chunks[cid], score) for cid, score in hits if cid in chunks]

    def neighbours(self, chunk: Chunk, before: int, after: int) -> list[Chunk]:
        return self.manifest.neighbours(
            chunk.doc_id, max(0, chunk.chunk_index - before), chunk.chunk_index + after
        )

    def stats(self) -> dict[str, Any]:
        return {
            "name": self.name,
            **self.manifest.stats(),
            "vectors": self.vectors.count(),
            **self.manifest.meta(),
        }

    # --- maintenance -------------------------------------------------------------------------
    def remove_orphans(self) -> int:
        """Delete vectors no committed chunk owns (left by an interrupted ingestion)."""
        orphans = self.vectors.ids() - self.manifest.chunk_ids()
        self.vectors.delete(orphans)
        return len(orphans)
