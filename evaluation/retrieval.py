"""Retrieval evaluation: the service's own ingestion and retriever against qrels.

Nothing here re-implements retrieval: the corpus goes through the real ingestion pipeline
(same splitter, chunk sizes and embedding model as the settings say) and every query
through the configured retriever (``make_retriever``), threshold, deduplication and window
strategy included. Only two things differ from answering, and the report says so:

- Depth: Recall@100 needs 100 documents per query, so ``fetch_k`` is raised to the depth
  (default max(100, k)). Min-max fusion normalises over the candidates and a document
  outside one index's ``fetch_k`` gets 0 from it, so @10 figures depend on ``fetch_k``
  (CACM, hybrid nDCG@10: 0.507 at 30, 0.531 at 100); ``depth = fetch_k`` gives the
  service's exact ranking (without Recall@100 when that is below 100).
- Single-index modes: ``bm25`` and ``dense`` are the service's ``keyword`` and ``dense``
  retrievers, the hybrid one with one index, so the three rows of one run differ only
  in the index used.

The corpus is ingested once into a collection named after the corpus file's hash and the
ingestion settings; runs that only change retrieval settings reuse it without re-embedding.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from langchain_core.embeddings import Embeddings
from tqdm import tqdm

from evaluation.datasets import Dataset, read_corpus
from evaluation.metrics import latency_summary, mean_metrics, query_metrics
from evaluation.splits import Split, provenance, side_of
from ingest.extract import ExtractOptions
from ingest.partition import PartitionOptions
from ingest.pipeline import IngestError, IngestOptions, Ingestor
from tools.config import ConfigError, Settings, load_settings
from tools.documents import short_hash
from tools.retrieval.hybrid import Retriever, make_retriever
from tools.store.collection import Collection

# each mode is the service's retriever of that name (tools/retrieval/hybrid.py RETRIEVERS)
RETRIEVER_OF = {"hybrid": "hybrid", "bm25": "keyword", "dense": "dense"}
MODES = tuple(RETRIEVER_OF)
# retrieval settings a sweep may vary; ingestion settings would need another collection
SWEEPABLE = (
    "distance_threshold",
    "hybrid_weight",
    "fetch_k",
    "dedup_similarity",
    "retrieval_strategy",
    "window",
)
REPORTED_SETTINGS = (
    "retriever",
    "embedding_model",
    "splitter",
    "chunk_size",
    "chunk_overlap",
    "k",
    "fetch_k",
    "distance_threshold",
    "hybrid_weight",
    "retrieval_strategy",
    "window",
    "dedup_similarity",
    "hnsw_ef_search",
)
SHARD_DOCS = 1000  # records per ingested file: bounded files, and progress kept if interrupted


class EvalError(ValueError):
    """The evaluation cannot run as asked; the message says what to change."""


def check_supported(settings: Settings) -> None:
    """Multi-query and reranking need the query LLM, which lives in the graph: not here yet."""
    if settings.multi_query > 1:
        raise EvalError(
            f"multi_query={settings.multi_query} is not supported in retrieval eval yet "
            "(it needs the query model); set multi_query=1"
        )
    if settings.rerank != "none":
        raise EvalError(
            f"rerank={settings.rerank!r} is not supported in retrieval eval yet; set rerank=none"
        )


# --- the collection --------------------------------------------------------------------------


def _file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def ingest_options(settings: Settings) -> IngestOptions:
    try:
        partition = PartitionOptions(settings.splitter, settings.chunk_size, settings.chunk_overlap)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    return IngestOptions(
        partition=partition,
        extract=ExtractOptions(max_file_bytes=settings.max_file_bytes),
        strict=True,
    )


def _write_shards(dataset: Dataset, folder: Path) -> int:
    """The corpus as JSONL shards with ``id`` and ``text`` (title, blank line, text: what
    BEIR's own baselines index). Records with neither title nor text are left out."""
    folder.mkdir(parents=True, exist_ok=True)
    for old in folder.glob("corpus-*.jsonl"):
        old.unlink()
    records = (
        {"id": doc_id, "text": f"{title}\n\n{text}" if title and text else title or text}
        for doc_id, title, text in read_corpus(dataset.corpus)
    )
    kept = (r for r in records if r["text"].strip())
    written = 0
    while batch := list(itertools.islice(kept, SHARD_DOCS)):
        shard = folder / f"corpus-{written // SHARD_DOCS:04d}.jsonl"
        shard.write_text("".join(json.dumps(r) + "\n" for r in batch), encoding="utf-8")
        written += len(batch)
    if not written:
        raise EvalError(f"{dataset.corpus}: no document with text")
    return written


def prepare_collection(
    settings: Settings, dataset: Dataset, embedder: Embeddings, *, progress: bool
) -> tuple[Collection, dict[str, Any]]:
    """The evaluation collection for this corpus and these ingestion settings, ingested if new.

    Named ``eval-<hash>`` and kept under the data directory, so the next run with the same
    corpus file and ingestion settings (splitter, sizes, embedding model) embeds nothing.
    """
    started = time.perf_counter()
    corpus_sha = _file_sha256(dataset.corpus)
    options = ingest_options(settings)
    name = "eval-" + short_hash(
        corpus_sha, options.config_hash(settings.embedding_model), length=16
    )
    collection = Collection(settings, name, create=True)
    meta = collection.manifest.meta()
    info: dict[str, Any] = {"name": name, "corpus_sha256": corpus_sha}
    if meta.get("eval_corpus_sha256") == corpus_sha:
        info |= {"reused": True, "documents": meta["eval_documents"]}
    else:
        folder = settings.data_dir / "eval" / name
        documents = _write_shards(dataset, folder)
        try:
            report = Ingestor(settings, collection, embedder, options, progress=progress).run(
                [folder]
            )
        except IngestError:
            collection.close()
            raise
        collection.manifest.set_meta(
            {"eval_corpus_sha256": corpus_sha, "eval_documents": documents}
        )
        info |= {"reused": False, "documents": documents, "chunks_embedded": report.chunks_embedded}
    info |= {
        "chunks": collection.manifest.stats()["chunks"],
        "seconds": round(time.perf_counter() - started, 2),
    }
    return collection, info


def corpus_id(chunk_source: str) -> str:
    """``eval-<hash>/corpus-0003.jsonl#<id>`` -> ``<id>`` (neither part before '#' has one)."""
    return chunk_source.partition("#")[2]


# --- runs ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RunSpec:
    label: str
    mode: str
    settings: Settings


def parse_sweep(items: Sequence[str]) -> dict[str, list[str]]:
    """``["hybrid_weight=0.3,0.5", ...]`` -> ``{"hybrid_weight": ["0.3", "0.5"]}``."""
    sweep: dict[str, list[str]] = {}
    for item in items:
        key, sep, values = (part.strip() for part in item.partition("="))
        if not sep or key not in SWEEPABLE or not values:
            raise EvalError(
                f"--sweep expects KEY=V1,V2,... with KEY one of {', '.join(SWEEPABLE)}; "
                f"got {item!r}"
            )
        sweep[key] = [v.strip() for v in values.split(",") if v.strip()]
    return sweep


def run_specs(
    settings: Settings, modes: Sequence[str], sweep: Mapping[str, Sequence[str]], depth: int
) -> list[RunSpec]:
    """One run per mode and combination of swept values, all at ``fetch_k >= depth``."""
    specs: dict[str, RunSpec] = {}
    for mode in modes:
        # the weight means nothing with one index
        keys = [k for k in sweep if mode == "hybrid" or k != "hybrid_weight"]
        for values in itertools.product(*(sweep[k] for k in keys)):
            combo = dict(zip(keys, values, strict=True))
            label = " ".join([mode, *(f"{k}={v}" for k, v in combo.items())])
            run_settings = load_settings(
                {**combo, "retriever": RETRIEVER_OF[mode]}, base=settings, source="command line"
            )
            deep = max(run_settings.fetch_k, depth)
            run_settings = load_settings(
                {"fetch_k": deep}, base=run_settings, source="command line"
            )
            specs.setdefault(label, RunSpec(label, mode, run_settings))
    return list(specs.values())


def _rank(retriever: Retriever, query: str, depth: int) -> tuple[list[str], dict[str, Any], float]:
    started = time.perf_counter()
    passages, report = retriever.retrieve([query])
    seconds = time.perf_counter() - started
    ranking = list(dict.fromkeys(corpus_id(p.source) for p in passages))[:depth]
    info = {"candidates": report.candidates, "over_threshold": report.over_threshold}
    return ranking, info, seconds


def run_one(
    spec: RunSpec,
    collection: Collection,
    embedder: Embeddings,
    queries: Sequence[tuple[str, str]],
    qrels: Mapping[str, Mapping[str, int]],
    depth: int,
    *,
    progress: bool,
) -> dict[str, Any]:
    retriever = make_retriever(collection, embedder, spec.settings)
    rows = []
    for query_id, text in tqdm(queries, desc=spec.label, unit="query", disable=not progress):
        ranking, info, seconds = _rank(retriever, text, depth)
        rows.append(
            {
                "id": query_id,
                "metrics": query_metrics(ranking, qrels[query_id], depth),
                "results": len(ranking),
                **info,
                "seconds": round(seconds, 4),
                "top": ranking[:10],
            }
        )
    short = [r for r in rows if r["results"] < 10]
    return {
        "label": spec.label,
        "mode": spec.mode,
        "settings": {k: _plain(getattr(spec.settings, k)) for k in REPORTED_SETTINGS},
        "metrics": mean_metrics([r["metrics"] for r in rows]),
        "latency": latency_summary([r["seconds"] for r in rows]),
        "under_10_results": len(short),
        "under_10_by_threshold": sum(1 for r in short if r["over_threshold"]),
        "under_depth_results": sum(1 for r in rows if r["results"] < depth),
        "queries": rows,
    }


def _plain(value: Any) -> Any:
    return str(value) if isinstance(value, Path) else value


def judged_queries(
    dataset: Dataset, limit: int | None, topics: Split | None = None
) -> tuple[list[tuple[str, str]], dict]:
    """The queries with a relevant document; ``topics``: only that half of the frozen
    CACM topic split (lab/data/splits/cacm.json)."""
    """Queries with at least one relevant document, in file order; and what was left out."""
    judged = [
        (qid, text)
        for qid, text in dataset.queries.items()
        if any(g > 0 for g in dataset.qrels.get(qid, {}).values())
        and (topics is None or side_of("cacm", qid) == topics)
    ]
    counts = {
        "queries": len(dataset.queries),
        "judged_queries": len(judged),
        "unjudged_skipped": len(dataset.queries) - len(judged),
        "qrels_without_query": sum(1 for q in dataset.qrels if q not in dataset.queries),
    }
    if not judged:
        raise EvalError("no query has a relevant document in the qrels (do the ids match?)")
    selected = judged[:limit] if limit else judged
    return selected, counts | {"evaluated": len(selected)}


def evaluate_retrieval(
    dataset: Dataset,
    settings: Settings,
    embedder: Embeddings,
    *,
    modes: Sequence[str] = ("hybrid",),
    sweep: Mapping[str, Sequence[str]] | None = None,
    depth: int | None = None,
    limit: int | None = None,
    topics: Split | None = None,
    progress: bool = True,
    on_run: Callable[[dict[str, Any]], None] | None = None,
) -> dict[str, Any]:
    """Ingest (or reuse) the corpus, rank every judged query per run, score; one report.
    A sweep chooses settings: it refuses the test topics."""
    if sweep and topics == "test":
        raise EvalError("--sweep chooses settings: run it on --topics dev, never test")
    check_supported(settings)
    depth = depth or max(100, settings.k)
    specs = run_specs(settings, modes, sweep or {}, depth)  # validates before any ingestion
    queries, counts = judged_queries(dataset, limit, topics)
    collection, info = prepare_collection(settings, dataset, embedder, progress=progress)
    try:
        collection.require_embedding(settings.embedding_model)
        runs = []
        for spec in specs:
            runs.append(
                run_one(
                    spec, collection, embedder, queries, dataset.qrels, depth, progress=progress
                )
            )
            if on_run:
                on_run(runs[-1])
    finally:
        collection.close()
    notes = [
        f"Ranked {depth} documents deep per query, so fetch_k was raised to at least {depth} "
        f"candidates per index (the service's fetch_k is {settings.fetch_k}; @10 figures "
        "depend on it); the distance threshold still applies."
    ]
    if depth < 100:
        notes.append(f"Recall@100 is left out: the ranking is only {depth} deep.")
    return {
        "kind": "retrieval",
        "created": datetime.now(UTC).isoformat(timespec="seconds"),
        "dataset": {"name": dataset.name, "corpus": str(dataset.corpus), **counts},
        "topics": topics or "all",
        "provenance": provenance("cacm") if topics else provenance(),
        "depth": depth,
        "notes": notes,
        "collection": info,
        "queries": dict(queries),
        "runs": runs,
    }
