"""The seam between the stores and their users: what retrieval reads (``ChunkReader``),
what a collection keeps its vectors in (``ChunkVectors``), and what a store backend
answers (``Backend``: collections, locks, conversations, flags, the doctor's line).
``Collection`` implements the first on every backend; Chroma (``chroma_vectors``) and
pgvector (``pg_vectors``) implement the second; each backend module (``embedded``,
``pg_backend``) the third. tests/contract runs each through the same tests.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from tools.config import ConfigError, Settings
from tools.documents import Chunk

if TYPE_CHECKING:
    from langgraph.checkpoint.base import BaseCheckpointSaver

    from tools.store.manifest import ManifestBase


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


class CollectionError(ConfigError):
    """A collection's files are damaged or from another version; the message says how
    to rebuild it."""


def rebuild_hint(name: str) -> str:
    return f"rebuild it with `rag ingest PATH... --collection {name} --rebuild`"


def unknown_collection(store: Backend, settings: Settings, name: str) -> ConfigError:
    """What opening a collection the store does not hold raises."""
    known = ", ".join(store.names(settings)) or "none yet"
    return ConfigError(
        f"unknown collection {name!r} in {store.where(settings)} (known: {known}); "
        "create it with `rag ingest PATH --collection NAME`"
    )


class CollectionBusy(ConfigError):
    """Another process is writing the collection (an ingestion, a rollback, a gc)."""


class Workers(Protocol):
    """What an ingestion holds while it writes (``Backend.ingestion``): claims on files,
    and whether it is the only writer."""

    files_per_round: int | None  # changed files claimed at a time (None: all)

    def claim(self, source: str) -> bool: ...

    def release(self, source: str) -> None: ...

    def alone(self) -> AbstractContextManager[bool]: ...


class SoleWriter:
    """The ``Workers`` of a store that takes one writing process per collection (the
    embedded store: Chroma's files take one): every file is its own, and it is always
    alone."""

    files_per_round: int | None = None  # every changed file in one round

    def claim(self, source: str) -> bool:
        return True

    def release(self, source: str) -> None:
        pass

    @contextmanager
    def alone(self) -> Iterator[bool]:
        yield True


class FlagLog(Protocol):
    """Where a store keeps the chat page's flagged answers (rag_ui/flags.py checks them
    first): rows of ``FLAG_COLUMNS``, numbered from 1 in the order they were added."""

    where: str  # for messages (no secret)

    def append(self, row: dict[str, Any]) -> int:
        """Store one row (``FLAG_COLUMNS`` but ``id``); returns its id."""
        ...

    def rows(self, limit: int | None = None) -> list[dict[str, Any]]:
        """The last ``limit`` rows (all with None), oldest first; creates nothing."""
        ...


class SessionLog(Protocol):
    """Where a store keeps the chat page's conversations (rag_ui/sessions.py), so another
    `rag ui` process on the same store continues one: the newest ``MAX_SAVED`` are kept."""

    def write(self, session_id: str, exchanges: list[dict[str, Any]]) -> None: ...

    def read(self, session_id: str) -> list[dict[str, Any]] | None:
        """The saved exchanges, or None when there are none or they cannot be read back
        (the page then starts a new conversation). A store it cannot reach is an error
        in ``tools.store.UNREACHABLE``, not None."""
        ...


FLAG_COLUMNS = ("id", "created_at", "trace_id", "question", "comment", "exchange")
MAX_SAVED = 1000  # conversations a SessionLog keeps; the least recently used go first


class Backend(Protocol):
    """What a store backend answers: one object per backend module, registered by name in
    ``tools.store.backends.BACKENDS`` (docs_corpus/architecture.md, "Adding a store
    backend"). Nothing outside its module knows how it keeps anything."""

    name: str

    def where(self, settings: Settings) -> str:
        """Where collections live, for messages (no secret)."""
        ...

    def names(self, settings: Settings) -> list[str]: ...

    def manifest(self, settings: Settings, name: str) -> ManifestBase:
        """The current manifest of a collection, opened for reading, with no check."""
        ...

    def open_manifest(self, settings: Settings, name: str, *, create: bool) -> ManifestBase:
        """The collection's current manifest; raises ``unknown_collection`` unless it
        exists or ``create``, and records ``VERSIONS`` when it creates it."""
        ...

    def open_vectors(
        self, settings: Settings, name: str, manifest: ManifestBase, *, fresh: bool
    ) -> ChunkVectors:
        """The collection's vectors (``fresh``: a client that sees every commit so far)."""
        ...

    def past_manifest(
        self, settings: Settings, name: str, version: int, vectors: ChunkVectors
    ) -> ManifestBase:
        """The manifest as it was after ``version`` (``as_of``), readable with ``vectors``."""
        ...

    def sees_every_commit(self, settings: Settings) -> bool:
        """Whether an open collection's vectors show other processes' commits at once; if
        not, ``Collection.outdated`` has it opened again after one."""
        ...

    def writer_lock(self, settings: Settings, name: str) -> AbstractContextManager[None]:
        """Held while one writer changes the collection; raises ``CollectionBusy`` at once
        when another holds it."""
        ...

    def ingestion(self, settings: Settings, name: str) -> AbstractContextManager[Workers]:
        """The ``Workers`` of one ingestion run; raises ``CollectionBusy`` when a writer
        that excludes it holds the collection."""
        ...

    def drop(self, settings: Settings, name: str) -> None:
        """Remove the collection, its vectors and its snapshots (under the writer lock)."""
        ...

    def drop_snapshots(self, settings: Settings, name: str) -> None: ...

    def checkpointer(self, settings: Settings) -> AbstractContextManager[BaseCheckpointSaver]:
        """The LangGraph checkpointer of CLI conversations (``rag chat --thread``)."""
        ...

    def flag_log(self, settings: Settings) -> FlagLog: ...

    def session_log(self, settings: Settings) -> SessionLog: ...

    def check(self, settings: Settings) -> dict[str, Any]:
        """``rag doctor``'s line: store, where, error (None when it answers), detail."""
        ...

    def address(self, settings: Settings) -> tuple[str, str] | None:
        """The outside address data goes to and what goes there, if any
        (tools/outbound.py)."""
        ...

    def thread_files(self, settings: Settings) -> Path | None:
        """Where versions before the checkpointer kept CLI conversations, if anywhere."""
        ...
