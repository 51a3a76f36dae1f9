"""A named collection: the manifest (what is committed, with its BM25 index), and its
vectors, on whichever backend ``settings.store`` names (tools/store/backends.py): the
backend opens both, and everything here is the same on every backend.

Ingestion writes through this class; retrieval reads through it. Reads only ever
return chunks the manifest lists, which is what makes an interrupted ingestion
invisible: its vectors exist in the vector store but are not committed.

Opening a collection checks it (``check``): a damaged manifest, a manifest or BM25
tokenisation from another version, or committed chunks without vectors would
otherwise give wrong answers silently, so each is an error that says how to repair:
``rag ingest PATH --collection NAME --rebuild``.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, TypeVar

from tools.config import COLLECTION_NAME, ConfigError, Settings, section_key
from tools.documents import Chunk
from tools.store.backends import backend
from tools.store.manifest import VERSIONS, ManifestBase
from tools.store.protocol import ChunkVectors, CollectionError, rebuild_hint

_NAME = re.compile(COLLECTION_NAME)
CHECK_ATTEMPTS = 3  # a concurrent ingestion can commit between the two reads of a check
# reads that straddled a commit wait a little longer each time: an ingestion commits file
# by file, so a short pause usually finds the gap between two commits (3 quick retries
# were not enough when 12 back-to-back ingestions of a small corpus ran beside 4 readers)
READ_ATTEMPTS = 8
READ_BACKOFF_S = 0.01
# committed ids an open checks for a vector: a sample, so that opening costs the same at
# a million chunks as at ten (Chroma's count alone took 0.5 s at 100k; an ingestion
# compares every id when it removes orphans)
CHECK_SAMPLE = 64
MAX_OVERFETCH = 64  # dense search asks the store for at most this many times k
T = TypeVar("T")


def check_name(name: str) -> str:
    """Collection names become file names: no separators, no '..', nothing outside
    ``<data_dir>/collections``."""
    if not _NAME.fullmatch(name) or ".." in name:
        raise ConfigError(
            f"invalid collection name {name!r}: use 3-64 letters, digits, '.', '_' "
            "or '-', starting and ending with a letter or digit"
        )
    return name


def handle_key(settings: Settings, name: str) -> tuple[Any, ...]:
    """What an open ``Collection`` depends on: its name and the store section (where it
    is, how it is searched, which version is read), so a setting added there is in it."""
    return (name, section_key(settings, "store"))


def list_collections(settings: Settings) -> list[str]:
    return backend(settings).names(settings)


def check_collections(settings: Settings) -> None:
    """Open every collection once, so a server fails at start, naming a damaged one and its
    repair, rather than on its first request."""
    for name in list_collections(settings):
        Collection(settings, name).close()


class Collection:
    """One collection on either backend (``settings.store``): its manifest and its vectors,
    the same contract on both (tests/contract)."""

    manifest: ManifestBase
    vectors: ChunkVectors

    def __init__(
        self,
        settings: Settings,
        name: str | None = None,
        *,
        create: bool = False,
        fresh_store: bool = False,
    ):
        self.name = check_name(name or settings.collection)
        self.as_of = settings.as_of
        if self.as_of and create:
            raise ConfigError(
                f"as_of={self.as_of} reads a past version of {self.name!r}; ingestion writes "
                "the current one: unset as_of (RAG_AS_OF, --as-of) to ingest"
            )
        self._settings = settings
        store = backend(settings)  # the backend's parts: manifest and vectors
        self.manifest = store.open_manifest(settings, self.name, create=create)
        self._seen = self.manifest.generation()  # before the vectors: they show at least this
        self._private = not store.sees_every_commit(settings)
        self.vectors = store.open_vectors(settings, self.name, self.manifest, fresh=fresh_store)
        if self.as_of:  # the same vectors, and the manifest as it was after that version
            self._refuse_unrestorable()  # before any copy
            self.manifest.close()
            self.manifest = store.past_manifest(settings, self.name, self.as_of, self.vectors)
            self._seen = self.manifest.generation()
        self._identity = self.manifest.identity()
        self.check()

    def _refuse_unrestorable(self) -> None:
        assert self.as_of
        if problem := _restorable_problem(self.manifest, self.as_of):
            self.manifest.close()
            raise ConfigError(problem)

    def close(self) -> None:
        self.manifest.close()
        self.vectors.close()

    def outdated(self) -> bool:
        """Whether this handle no longer shows the collection on disk, so a long-lived
        process (the server) must open it again, with a fresh Chroma system: it was rebuilt
        or deleted (the manifest is another file), or another process committed chunks
        whose vectors this process's embedded Chroma system cannot see."""
        if self.manifest.identity() != self._identity:  # rebuilt or deleted under us
            return True
        if not self._private:
            return False  # the store shows every process's writes
        now = self.manifest.generation()
        if self.manifest.committed_elsewhere(self._seen, now):
            return True
        self._seen = now  # only this process's commits: its own system shows them
        return False

    # --- guards ----------------------------------------------------------------------------
    def check(self) -> None:
        """Refuse a collection that would answer wrongly: another format, or committed
        chunks whose vectors are gone (a damaged or replaced Chroma directory)."""
        meta = self.manifest.meta()
        for key, current in VERSIONS.items():
            stored = meta.get(key, current)  # collections made before versions were recorded
            if stored != current:
                raise CollectionError(
                    f"collection {self.name!r} has {key} {stored}, this version of rag reads "
                    f"{current}; " + rebuild_hint(self.name)
                )
        for _ in range(CHECK_ATTEMPTS):
            generation = self.manifest.generation()
            sample = self.manifest.sample_ids(CHECK_SAMPLE)
            missing = set(sample) - set(self.vectors.vectors_for_ids(sample))
            if not missing or self.manifest.generation() == generation:
                break
        if missing:
            raise CollectionError(
                f"collection {self.name!r}: {len(missing)} committed chunks have no vector in "
                f"the Chroma store ({len(sample)} checked; it was damaged, replaced or "
                "deleted); " + rebuild_hint(self.name)
            )

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
    def stable_read(
        self, read: Callable[[], T], consistent: Callable[[T], bool] = lambda _: True
    ) -> T:
        """Run ``read`` again if an ingestion committed while it ran.

        A commit swaps a file's chunks in the manifest, so a search whose dense and
        keyword halves straddle it can see neither version of the file. Repeating
        it until the generation holds gives the old or the new data, never a gap
        (bounded: under a continuous stream of commits the last read is returned).
        ``consistent`` rejects a result that shows the change itself (a committed chunk
        whose vector is not readable yet: the generation alone missed that, 1 run in 3).
        """
        for attempt in range(READ_ATTEMPTS):
            before = self.manifest.generation()
            result = read()
            if self.manifest.generation() == before and consistent(result):
                break
            if attempt + 1 < READ_ATTEMPTS:  # no pause before giving up
                time.sleep(min(READ_BACKOFF_S * 2**attempt, 0.5))
        return result

    def dense_search(
        self, vector: Sequence[float], k: int, where: dict[str, Any] | None = None
    ) -> list[tuple[Chunk, float]]:
        """Nearest committed chunks with their cosine distance (0 = same direction).

        The store also holds vectors of chunks kept for rollback (and, briefly, of an
        ingestion not committed yet); while they crowd committed ones out of the top
        ``k``, more are fetched."""
        fetch = k
        while True:
            hits = self.vectors.search(vector, fetch, where)
            committed = self.manifest.committed(chunk.id for chunk, _ in hits)
            kept = [(chunk, dist) for chunk, dist in hits if chunk.id in committed]
            if len(kept) >= k or len(hits) < fetch or fetch >= k * MAX_OVERFETCH:
                return kept[:k]
            fetch *= 4

    def keyword_search(self, query: str, k: int) -> list[tuple[Chunk, float]]:
        hits = self.manifest.keywords.search(query, k)
        chunks = self.manifest.chunks(cid for cid, _ in hits)
        return [(chunks[cid], score) for cid, score in hits if cid in chunks]

    def keyword_scores(self, query: str, ids: Sequence[str]) -> dict[str, float]:
        """BM25 score of each of ``ids`` (0 for an unknown id), however low it ranks."""
        rows = self.manifest.tokens_of(ids)
        return dict.fromkeys(ids, 0.0) | self.manifest.keywords.score(query, rows)

    def chunk_tokens(self, ids: Sequence[str]) -> dict[str, list[str]]:
        """The stored BM25 tokens of those of ``ids`` that are committed."""
        return {cid: tokens.split() for cid, tokens in self.manifest.tokens_of(ids)}

    def vectors_for_ids(self, ids: Sequence[str]) -> dict[str, list[float]]:
        """The stored vector of each of ``ids`` the store holds."""
        return self.vectors.vectors_for_ids(list(ids))

    def chunks_by_id(self, ids: Sequence[str]) -> dict[str, Chunk]:
        """The committed chunks among ``ids``."""
        return self.manifest.chunks(ids)

    def neighbours(self, chunk: Chunk, before: int, after: int) -> list[Chunk]:
        return self.manifest.neighbours(
            chunk.doc_id, max(0, chunk.chunk_index - before), chunk.chunk_index + after
        )

    @property
    def version(self) -> int | None:
        """The version this handle answers from: ``as_of``, or the latest."""
        return self.as_of or self.manifest.version()

    def stats(self) -> dict[str, Any]:
        return {
            "name": self.name,
            **self.manifest.stats(),
            "version": self.version,
            "vectors": self.vectors.count(),
            **self.manifest.meta(),
        }

    # --- maintenance -------------------------------------------------------------------------
    def remove_orphans(self) -> int:
        """Delete vectors no committed chunk owns (left by an interrupted ingestion); the
        vectors of chunks kept for rollback stay."""
        orphans = self.vectors.ids() - self.manifest.vector_owners()
        self.vectors.delete(orphans)
        return len(orphans)

    def rollback(self, version: int) -> tuple[int | None, int]:
        """Answer as the collection did after ``version``, as a new version; nothing is
        re-embedded. Returns the new version (None: it already held that) and how many
        chunks came back."""
        new, restored = self.manifest.rollback(version, self.vectors.held)
        return new, len(restored)

    def gc(self, keep: int) -> dict[str, int]:
        """Keep rollback possible to the last ``keep`` versions only: the chunks and
        vectors only older versions used are deleted, and version snapshots (``as_of``)
        are made again when next asked for."""
        if self.as_of:
            raise ConfigError("gc changes the current version: unset as_of")
        size = self.manifest.size_bytes()
        retired, unused = self.manifest.reclaim(keep)
        self.vectors.delete(unused)
        backend(self._settings).drop_snapshots(self._settings, self.name)
        return {
            "retired_chunks_deleted": retired,
            "vectors_deleted": len(unused),
            "manifest_bytes_freed": size - self.manifest.size_bytes(),
            "restorable_from": self.manifest.restorable_from(),
        }


def as_of_problem(settings: Settings) -> str | None:
    """Why ``settings.as_of`` names no readable version of its collection, or None: for
    checks that must refuse a request before any snapshot is made (the server's)."""
    if not settings.as_of:
        return None
    manifest = backend(settings).manifest(settings, settings.collection)
    try:
        return _restorable_problem(manifest, settings.as_of)
    finally:
        manifest.close()


def _restorable_problem(manifest: ManifestBase, version: int) -> str | None:
    try:
        manifest.check_restorable(version)
    except ValueError as exc:
        return f"as_of={version}: {exc}"
    return None


@contextmanager
def exclusive(settings: Settings, name: str) -> Iterator[None]:
    """One writer per collection: an ingestion, a rollback, a gc or a drop holds this lock
    while it writes (orphan removal must not race another run's uploads): a lock file on
    one machine, an advisory lock in the database for store = postgres."""
    with backend(settings).writer_lock(settings, name):
        yield


def drop_collection(settings: Settings, name: str) -> None:
    """Remove a collection even when it cannot be opened (damaged or another version),
    under the writer lock, so it never races a running ingestion."""
    backend(settings).drop(settings, check_name(name))
