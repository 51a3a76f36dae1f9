"""Extract -> partition -> embed -> persist, incremental and safe to interrupt.

Per file, the order is: upsert vectors, then commit the manifest. Superseded
chunks and their vectors are kept for rollback (until `rag collections gc`). The
manifest commit is the only step readers trust, so a run killed at any point
leaves each file either as it was or as it is now; the next run removes the
orphaned vectors and finishes the job. Unchanged files are recognised from
size and mtime (then content hash) and cost nothing; unchanged texts inside
changed or renamed files reuse their stored vectors instead of being re-embedded.

Each changed file is claimed before it is read (``Backend.ingestion``): on the embedded
store the run is the collection's only writer and every claim is its own; with
``store = postgres`` several workers share a collection, claiming a few files at a
time, and a file another worker holds is waited for until that worker commits it or
dies (its claims end with its connection), so each file is committed exactly once.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path

from langchain_core.embeddings import Embeddings
from langchain_core.language_models import BaseChatModel
from tqdm import tqdm

from ingest.derive import derived_chunks
from ingest.extract import (
    EXTRACTOR_VERSION,
    ExtractError,
    ExtractOptions,
    discover,
    extract_file,
    source_root,
)
from ingest.partition import PartitionOptions, partition
from tools import tracing
from tools.config import Settings
from tools.documents import Chunk, ExtractedDocument, short_hash
from tools.errors import ModelError
from tools.resilient import with_retries
from tools.store.backends import CollectionBusy, Workers, backend
from tools.store.collection import Collection
from tools.store.manifest import DocumentEntry, FileRecord
from tools.text import tokenize

log = logging.getLogger(__name__)
CLAIM_POLL_S = 0.5  # how often a worker looks again at files other workers hold


@dataclass(frozen=True)
class Batching:
    """How ingestion groups its work. None of it changes a chunk or a vector, so it is
    not part of the hash that decides what is re-embedded (``config_hash``)."""

    # Files are committed in groups so embedding batches span files (throughput) while
    # memory and the work lost to an interruption stay bounded.
    group_chunks: int = 512
    # Texts per embed_documents call (the model still batches by embedding_batch_size
    # inside): few calls, but a progress update and a bounded retry now and then.
    embed_call_texts: int = 512
    embed_backoff_s: float = 1.0  # first retry delay for a failed call; doubles each time
    # A group whose embedding is estimated to take longer than this is announced, with
    # its estimate, after its first embedding call has measured the rate.
    announce_after_s: float = 120.0


class IngestError(RuntimeError):
    """Ingestion stopped (``--strict`` and a bad file); the collection is as before it."""


@dataclass(frozen=True)
class IngestOptions:
    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    partition: PartitionOptions = field(default_factory=PartitionOptions)
    extract: ExtractOptions = field(default_factory=ExtractOptions)
    derive: bool = False
    prune: bool = False
    strict: bool = False
    batching: Batching = field(default_factory=Batching)

    def config_hash(self, embedding_model: str) -> str:
        """Anything that changes the chunks or vectors of an unchanged file."""
        return short_hash(
            json.dumps(asdict(self.partition), sort_keys=True, default=str),
            json.dumps(asdict(self.extract), sort_keys=True),
            f"extractor-{EXTRACTOR_VERSION}",
            str(self.derive),
            embedding_model,
            length=16,
        )


@dataclass
class IngestReport:
    collection: str
    files_seen: int = 0
    files_indexed: int = 0
    files_unchanged: int = 0
    files_removed: int = 0
    skipped: list[dict[str, str]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    chunks_added: int = 0
    chunks_deleted: int = 0
    chunks_embedded: int = 0
    vectors_reused: int = 0
    orphans_removed: int = 0
    files_by_other_workers: int = 0  # changed files another worker committed meanwhile
    seconds: float = 0.0
    trace_id: str | None = None
    version: int | None = None  # the collection version this run made (None: no change)

    @property
    def chunks_per_s(self) -> float:
        return self.chunks_added / self.seconds if self.seconds else 0.0

    def as_dict(self) -> dict:
        return {**asdict(self), "chunks_per_s": round(self.chunks_per_s, 1)}


@dataclass
class _Pending:
    record: FileRecord
    documents: list[tuple[ExtractedDocument, list[Chunk]]]

    @property
    def chunks(self) -> list[Chunk]:
        return [c for _, chunks in self.documents for c in chunks]


def _embed_with_retry(
    embedder: Embeddings, texts: list[str], attempts: int, backoff_s: float
) -> list[list[float]]:
    """Remote providers fail transiently; back off 1 s, 2 s, 4 s... before giving up.
    Nothing of the failing group is committed, so the collection stays as it was."""
    try:
        return with_retries(
            lambda: embedder.embed_documents(texts),
            retries=attempts,
            what=f"embedding {len(texts)} chunks",
            backoff_s=backoff_s,
            retry_timeouts=True,
        )
    except ModelError as exc:
        raise type(exc)(f"{exc} (files committed so far are kept; re-run to finish)") from exc


class Ingestor:
    def __init__(
        self,
        settings: Settings,
        collection: Collection,
        embedder: Embeddings,
        options: IngestOptions,
        *,
        progress: bool = True,
        llm_factory: Callable[[], BaseChatModel] | None = None,
    ) -> None:
        self.settings = settings
        self.collection = collection
        self.embedder = embedder
        self.options = options
        self.progress = progress
        self.llm_factory = llm_factory
        self.config_hash = options.config_hash(settings.embedding_model)
        self._llm: BaseChatModel | None = None
        self._version: int | None = None  # the run's version of the collection
        self._documents = 0  # documents read this run (max_ingest_documents)
        self._bound = False  # the embedding model checked against the collection's

    def run(self, paths: Sequence[str | Path]) -> IngestReport:
        started = time.perf_counter()
        report = IngestReport(self.collection.name)
        self._version = None  # each run (watch mode makes many) has its own
        self._documents, self._bound = 0, False
        files = discover(paths, self.options.include, self.options.exclude, report.skipped)
        report.files_seen = len(files)
        self._check_count(len(files), "files")
        inputs = {"paths": [str(p) for p in paths], "collection": self.collection.name}
        with (
            tracing.span(self.settings, "ingest", root=True, input=inputs) as trace,
            self._writers() as workers,
        ):
            with workers.alone() as alone:  # another worker's uploads would look orphaned
                if alone:
                    report.orphans_removed = self.collection.remove_orphans()
            todo, held, rescan = files, [], False
            while todo:  # rounds of changed files: all of them with one writer
                with tracing.span(self.settings, "extract_partition") as stage:
                    pending, todo, elsewhere = self._changed(todo, report, workers, rescan)
                    held += elsewhere
                    stage.update(
                        output={
                            "changed_files": len(pending),
                            "unchanged": report.files_unchanged,
                            "skipped": len(report.skipped),
                            "held_by_other_workers": len(held),
                        }
                    )
                self._embed_and_commit(pending, report, workers)
                if not todo and held:  # another worker's: it commits them, or dies and frees them
                    time.sleep(CLAIM_POLL_S)
                    todo, held, rescan = held, [], True
            with workers.alone() as alone:
                if alone:
                    self.collection.manifest.drop_pending_vectors()  # every group is committed
                if self.options.prune and alone:
                    with tracing.span(self.settings, "prune") as stage:
                        self._prune(paths, {source for _, source in files}, report)
                        stage.update(output={"files_removed": report.files_removed})
                elif self.options.prune:
                    report.warnings.append(
                        "not pruned: other workers are still ingesting into this collection "
                        "(the last one to finish prunes when asked to)"
                    )
            if self._version is not None:  # a run that changed nothing makes no version
                self.collection.manifest.finish_version(self._version)
                report.version = self._version
            report.seconds = time.perf_counter() - started
            report.trace_id = getattr(trace, "trace_id", None)
            trace.update(output=report.as_dict())
        return report

    @contextmanager
    def _writers(self) -> Iterator[Workers]:
        try:
            with backend(self.settings).ingestion(self.settings, self.collection.name) as workers:
                yield workers
        except CollectionBusy as exc:
            raise IngestError(str(exc)) from None

    def _embed_and_commit(
        self, pending: list[_Pending], report: IngestReport, workers: Workers
    ) -> None:
        if not pending:
            return
        if not self._bound:  # an unchanged collection never even loads the embedding model
            self._bind_embedding()
            self._bound = True
        with (
            tracing.span(self.settings, "embed_persist") as stage,
            tqdm(
                total=sum(len(item.chunks) for item in pending),
                desc=f"embed and commit {len(pending)} files",
                unit="chunk",
                disable=not self.progress,
            ) as bar,
        ):  # one bar per round: chunks done, rate and ETA, files committed
            committed = report.files_indexed
            for group in self._groups(pending):
                self._persist(group, report, bar, workers)
                done = report.files_indexed - committed
                bar.set_postfix(committed=f"{done}/{len(pending)} files")
            stage.update(
                output={
                    "chunks_added": report.chunks_added,
                    "chunks_embedded": report.chunks_embedded,
                    "vectors_reused": report.vectors_reused,
                }
            )

    def _check_count(self, count: int, what: str) -> None:
        """Checked before anything is written: a runaway input fails whole, not half-done."""
        limit = self.settings.max_ingest_documents
        if count > limit:
            raise IngestError(
                f"{count} {what} to ingest, over max_ingest_documents={limit}; ingest in "
                "parts or raise the limit (nothing was changed)"
            )

    def _bind_embedding(self) -> None:
        try:
            probe = self.embedder.embed_query("dimension probe")
        except Exception as exc:
            raise ModelError(
                f"embedding model {self.settings.embedding_model!r} failed: "
                f"{type(exc).__name__}: {exc} (nothing was changed)"
            ) from exc
        self.collection.bind_embedding(self.settings.embedding_model, len(probe))

    def _changed(
        self,
        files: list[tuple[Path, str]],
        report: IngestReport,
        workers: Workers,
        rescan: bool,
    ) -> tuple[list[_Pending], list[tuple[Path, str]], list[tuple[Path, str]]]:
        """Extract and partition new or changed files, each claimed first (another
        worker's claim defers the file); unchanged ones are only counted. Stops after
        ``workers.files_per_round`` changed files. Returns those, the files not yet
        looked at, and the files other workers hold. On a ``rescan`` of those, a file
        found unchanged was committed by its worker."""
        manifest = self.collection.manifest
        pending: list[_Pending] = []
        elsewhere: list[tuple[Path, str]] = []
        limit = workers.files_per_round
        bar = tqdm(files, desc="extract", unit="file", disable=not self.progress)
        for at, (path, source) in enumerate(bar):
            if limit is not None and len(pending) >= limit:
                bar.close()
                return pending, files[at:], elsewhere
            try:
                try:
                    stat = path.stat()
                except OSError as exc:  # e.g. a broken symlink, or deleted since discovery
                    raise ExtractError(f"cannot read file: {exc.strerror or exc}") from exc
                record = FileRecord(source, stat.st_size, stat.st_mtime_ns, self.config_hash)
                if not workers.claim(source):
                    elsewhere.append((path, source))
                    continue
                stored = manifest.file_record(source)  # read under the claim: exactly once
                if stored == record:
                    workers.release(source)
                    if rescan:
                        report.files_by_other_workers += 1
                    else:
                        report.files_unchanged += 1
                    continue
                docs = extract_file(path, source, self.options.extract)
            except ExtractError as exc:
                workers.release(source)
                if self.options.strict:
                    raise IngestError(f"{source}: {exc} (--strict; nothing was changed)") from exc
                report.skipped.append({"path": source, "reason": str(exc)})
                continue
            self._documents += len(docs)
            self._check_count(self._documents, "documents")
            known = manifest.document_hashes(source)
            same_config = stored is not None and stored.config_hash == self.config_hash
            if same_config and known == {d.source: d.content_hash for d in docs}:
                manifest.touch_file(record)  # touched or re-saved, same content and settings
                workers.release(source)
                report.files_unchanged += 1
                continue
            pending.append(_Pending(record, [(d, self._chunks(d, report)) for d in docs]))
        return pending, [], elsewhere

    def _chunks(self, doc: ExtractedDocument, report: IngestReport) -> list[Chunk]:
        chunks = partition(doc, self.options.partition)
        if not self.options.derive:
            return chunks
        if self._llm is None and self.llm_factory is not None and doc.kind != "csv":
            self._llm = self.llm_factory()
        try:
            return chunks + derived_chunks(doc, self._llm)
        except ModelError as exc:  # the plain chunks are still worth indexing
            report.warnings.append(f"{doc.source}: no derived documents ({exc})")
            return chunks

    def _groups(self, pending: list[_Pending]) -> Iterator[list[_Pending]]:
        group: list[_Pending] = []
        size = 0
        for item in pending:
            group.append(item)
            size += len(item.chunks)
            if size >= self.options.batching.group_chunks:
                yield group
                group, size = [], 0
        if group:
            yield group

    def _vectors(
        self, chunks: list[Chunk], report: IngestReport, bar: tqdm, label: str
    ) -> list[list[float]]:
        texts = [c.embed_text or c.text for c in chunks]
        hashes = [c.text_hash for c in chunks]
        hash_of = dict(zip(texts, hashes, strict=True))  # one-to-one: the hash is of this text
        store = self.collection.vectors
        manifest = self.collection.manifest
        model = self.settings.embedding_model
        reused = store.vectors_for_text_hashes(hashes) if store.count() else {}
        resumed = manifest.pending_vectors(model, (h for h in hashes if h not in reused))
        known = reused | resumed
        # longest first: each model batch holds texts of similar length, so little padding
        # (sentence-transformers only sorts within one call); also an honest early ETA
        unseen = dict.fromkeys(t for t, h in zip(texts, hashes, strict=True) if h not in known)
        missing = sorted(unseen, key=len, reverse=True)  # stable: a deterministic order
        fresh: dict[str, list[float]] = {}
        step = max(self.options.batching.embed_call_texts, self.settings.embedding_batch_size)
        bar.update(len(chunks) - len(missing))  # reused vectors and repeated texts: done
        for start in range(0, len(missing), step):
            part = missing[start : start + step]
            began = time.perf_counter()
            vectors = _embed_with_retry(
                self.embedder,
                part,
                self.settings.llm_max_retries,
                self.options.batching.embed_backoff_s,
            )
            got = dict(zip(part, vectors, strict=True))
            manifest.keep_pending_vectors(model, {hash_of[t]: v for t, v in got.items()})
            fresh.update(got)
            bar.update(len(part))
            left = len(missing) - start - len(part)
            if start == 0 and left:
                self._announce(label, left, len(part) / (time.perf_counter() - began), bar)
        report.chunks_embedded += len(missing)
        report.vectors_reused += sum(1 for h in hashes if h in known)
        return [known.get(h) or fresh[t] for t, h in zip(texts, hashes, strict=True)]

    def _announce(self, label: str, left: int, rate: float, bar: tqdm) -> None:
        """Say early when embedding will take long, and that stopping loses nothing."""
        seconds = left / rate
        if seconds > self.options.batching.announce_after_s:
            message = (
                f"{label}: {left} more chunks to embed, about {seconds / 60:.0f} min at "
                f"{rate:.1f} chunks/s. Interrupting keeps what is embedded; a re-run resumes."
            )
            if self.progress:
                bar.write(message)
            else:
                log.info(message)

    def _persist(
        self, group: list[_Pending], report: IngestReport, bar: tqdm, workers: Workers
    ) -> None:
        manifest = self.collection.manifest
        chunks = [c for item in group for c in item.chunks]
        biggest = max(group, key=lambda item: len(item.chunks)).record.file
        label = biggest if len(group) == 1 else f"{biggest} and {len(group) - 1} more files"
        self.collection.vectors.upsert(chunks, self._vectors(chunks, report, bar, label))
        for item in group:
            old_ids = manifest.chunk_ids_of_file(item.record.file)
            entries = [
                DocumentEntry(
                    d.source,
                    d.doc_id,
                    d.content_hash,
                    d.kind,
                    d.title,
                    [(c, tokenize(c.embed_text or c.text)) for c in cs],
                )
                for d, cs in item.documents
            ]
            manifest.replace_file(item.record, entries, self._run_version())  # the commit point
            workers.release(item.record.file)
            # the old vectors stay: the version keeps the chunks it replaced for rollback,
            # until `rag collections gc`
            new_ids = {c.id for c in item.chunks}
            report.files_indexed += 1
            report.chunks_added += len(new_ids - old_ids)
            report.chunks_deleted += len(old_ids - new_ids)

    def _run_version(self) -> int:
        """The run's version, begun at its first change."""
        if self._version is None:
            self._version = self.collection.manifest.begin_version()
        return self._version

    def _prune(self, paths: Sequence[str | Path], seen: set[str], report: IngestReport) -> None:
        """Remove files under ``paths`` that were not found this time; others are untouched."""
        manifest = self.collection.manifest
        roots = [source_root(p) for p in paths]
        for file in manifest.files():
            if file in seen or not any(file == r or file.startswith(r + "/") for r in roots):
                continue
            old_ids = manifest.chunk_ids_of_file(file)
            manifest.remove_file(file, self._run_version())  # kept for rollback, as above
            report.files_removed += 1
            report.chunks_deleted += len(old_ids)
