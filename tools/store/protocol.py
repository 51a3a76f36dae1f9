"""The seam between the stores and their users: what retrieval reads (``ChunkReader``)
and what a collection keeps its vectors in (``ChunkVectors``). ``Collection``
implements the first on every backend; Chroma (``chroma_vectors``) and pgvector
(``pg_vectors``) implement the second; tests/contract runs each through the same tests.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Protocol

from tools.documents import Chunk


class StaleStoreError(RuntimeError):
    """A read met a store another process changed under it (Chroma says "Error finding
    id" for vectors it deleted): open the collection again and read once more. Any
    backend raises this one error, so the graph knows no backend by name."""

    kind = "store_changing"  # as an answer's error type


class ChunkReader(Protocol):
    """What retrieval reads from a store: both indexes, stored vectors and tokens, chunks
    by id and their neighbours; retrievers know nothing else of a store."""

    def dense_search(
        self, vector: Sequence[float], k: int, where: dict | None = None
    ) -> list[tuple[Chunk, float]]: ...

    def keyword_search(self, query: str, k: int) -> list[tuple[Chunk, float]]: ...

    def keyword_scores(self, query: str, ids: Sequence[str]) -> dict[str, float]: ...

    def chunk_tokens(self, ids: Sequence[str]) -> dict[str, list[str]]: ...

    def vectors_for_ids(self, ids: Sequence[str]) -> dict[str, list[float]]: ...

    def chunks_by_id(self, ids: Sequence[str]) -> dict[str, Chunk]: ...

    def neighbours(self, chunk: Chunk, before: int, after: int) -> list[Chunk]: ...


class ChunkVectors(Protocol):
    """A collection's vectors, written before its manifest commit and deleted after it;
    search returns cosine distances (0 = same direction)."""

    def upsert(self, chunks: Sequence[Chunk], vectors: Sequence[Sequence[float]]) -> None: ...

    def delete(self, ids: Iterable[str]) -> None: ...

    def ids(self) -> set[str]: ...

    def count(self) -> int: ...

    def held(self, ids: Iterable[str]) -> set[str]: ...

    def vectors_for_ids(self, ids: Sequence[str]) -> dict[str, Sequence[float]]: ...

    def vectors_for_text_hashes(self, hashes: Iterable[str]) -> dict[str, list[float]]: ...

    def search(
        self, vector: Sequence[float], k: int, where: dict[str, Any] | None = None
    ) -> list[tuple[Chunk, float]]: ...

    def close(self) -> None: ...
