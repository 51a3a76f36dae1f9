"""Hybrid retrieval: dense (Chroma) + BM25, fused across queries, thresholded, deduplicated.

Why each step:
- Hybrid with min-max score fusion: on CACM it beats either method alone and
  reciprocal-rank fusion (field notes, whole documents: nDCG@10 0.569 vs 0.484 BM25,
  0.442 dense, 0.540 RRF). Every candidate gets *both* scores (its vector's cosine and
  its BM25 score), not 0 from the index whose top fetch_k it missed: that raised this
  service's CACM nDCG@10 from 0.531 to 0.550 at the same depth (`rag eval retrieval`).
- The distance threshold is applied to *every* candidate, keyword hits included, by
  measuring its cosine distance to the closest query: it then means what it says
  ("nothing farther than d from what was asked"), whichever index found the chunk.
- Deduplication removes the same chunk found by several queries or methods, derived
  documents that return the same text, and near-identical overlapping windows.
- The window strategy merges a hit with its neighbours into one passage so the
  generator sees the context around a match (the seeds' "window retrieval").
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np
from langchain_core.embeddings import Embeddings

from tools.config import Settings
from tools.documents import Chunk
from tools.store.protocol import ChunkReader
from tools.text import tokenize


@dataclass
class Passage:
    """What the generator reads and a citation points to: one chunk or a merged window."""

    text: str
    source: str
    chunk_ids: list[str]
    score: float
    distance: float
    doc_id: str = ""
    page: int | None = None
    start_line: int | None = None
    end_line: int | None = None
    heading: str = ""
    kind: str = "chunk"

    @classmethod
    def from_chunk(cls, chunk: Chunk, score: float, distance: float) -> Passage:
        return cls(
            chunk.text,
            chunk.source,
            [chunk.id],
            score,
            distance,
            chunk.doc_id,
            chunk.page,
            chunk.start_line,
            chunk.end_line,
            chunk.heading,
            chunk.kind,
        )

    def location(self) -> str:
        parts = [self.source]
        if self.page:
            parts.append(f"page {self.page}")
        if self.start_line:
            parts.append(f"lines {self.start_line}-{self.end_line}")
        return ", ".join(parts)


@dataclass
class RetrievalReport:
    """What retrieval did, for the answer object and traces: nothing is dropped silently."""

    candidates: int = 0
    over_threshold: int = 0
    duplicates: int = 0
    threshold: float = 0.0
    closest_distance: float | None = None
    # committed candidates whose vector was not readable: an ingestion changed the
    # collection under this read (stable_read repeats it)
    missing_vectors: int = 0
    # candidates cut before generation, as ``cut`` makes them: which chunk, where, its
    # scores, the stage that cut it (threshold, duplicate; the graph adds top_k, rerank)
    # and why, so a user tuning settings sees what nearly made it
    dropped: list[dict] = field(default_factory=list)


def cut(passage: Passage, stage: str, reason: str) -> dict:
    """One entry of ``RetrievalReport.dropped``: a candidate that will not reach the generator."""
    return {
        "chunk_id": passage.chunk_ids[0],
        "source": passage.source,
        "location": passage.location(),
        "stage": stage,
        "reason": reason,
        "score": round(passage.score, 4),
        "distance": round(passage.distance, 4),
        "snippet": passage.text[:200],
    }


def _unit(rows: np.ndarray) -> np.ndarray:
    """Rows scaled to length 1: remote embedders do not all return unit vectors."""
    norms = np.linalg.norm(rows, axis=-1, keepdims=True)
    return rows / np.where(norms == 0, 1.0, norms)


def _minmax(scores: dict[str, float]) -> dict[str, float]:
    if not scores:
        return {}
    low, high = min(scores.values()), max(scores.values())
    span = high - low
    return {k: (v - low) / span if span > 0 else 1.0 for k, v in scores.items()}


def _jaccard_matrix(token_sets: Sequence[set[str]]) -> np.ndarray:
    """Jaccard similarity of every pair of token sets (two empty sets: 1), at once."""
    vocabulary: dict[str, int] = {}
    members = [[vocabulary.setdefault(t, len(vocabulary)) for t in ts] for ts in token_sets]
    matrix = np.zeros((len(token_sets), max(1, len(vocabulary))), np.float32)
    for row, columns in enumerate(members):
        matrix[row, columns] = 1.0
    shared = matrix @ matrix.T
    sizes = matrix.sum(axis=1)
    union = sizes[:, None] + sizes[None, :] - shared
    return np.where(union > 0, shared / np.maximum(union, 1), 1.0)


class HybridRetriever:
    """Candidates from both indexes, ranked by ``hybrid_weight`` x dense + the rest x BM25."""

    indexes: tuple[str, ...] = ("dense", "keyword")

    def __init__(self, collection: ChunkReader, embedder: Embeddings, settings: Settings) -> None:
        self.collection = collection
        self.embedder = embedder
        self.settings = settings

    @property
    def weight(self) -> float:
        """The dense score's share of the fused score."""
        return self.settings.hybrid_weight

    def retrieve(self, queries: Sequence[str]) -> tuple[list[Passage], RetrievalReport]:
        """All passages within the threshold, best first; the caller keeps as many as it needs."""
        s = self.settings
        report = RetrievalReport(threshold=s.distance_threshold)
        qvecs = np.array(self.embedder.embed_documents(list(queries)), dtype=np.float32)
        fused: dict[str, float] = {}
        chunks: dict[str, Chunk] = {}
        found: list[list[str]] = []
        for query, qvec in zip(queries, qvecs, strict=True):
            hits = []
            if "dense" in self.indexes:
                hits += self.collection.dense_search(qvec.tolist(), s.fetch_k)
            if "keyword" in self.indexes:
                hits += self.collection.keyword_search(query, s.fetch_k)
            chunks.update((chunk.id, chunk) for chunk, _ in hits)
            found.append(list(dict.fromkeys(chunk.id for chunk, _ in hits)))
        # cosine similarity of every candidate to every query, from its stored vector
        sims = self._similarities(list(chunks), qvecs)
        report.missing_vectors = len(set(chunks) - set(sims))
        weight = self.weight
        for i, (query, ids) in enumerate(zip(queries, found, strict=True)):
            # every candidate gets both scores, so one just outside a method's fetch_k
            # keeps its real score there instead of 0
            d_scores = _minmax({c: float(sims[c][i]) for c in ids if c in sims})
            k_scores = _minmax(self.collection.keyword_scores(query, ids))
            for cid in ids:
                score = weight * d_scores.get(cid, 0.0) + (1 - weight) * k_scores.get(cid, 0.0)
                fused[cid] = max(fused.get(cid, 0.0), score)
        report.candidates = len(fused)
        # distance to the closest query: what the threshold is measured against
        distances = {cid: 1.0 - float(sims[cid].max()) for cid in fused if cid in sims}
        if distances:
            report.closest_distance = round(min(distances.values()), 4)
        ranked = sorted(fused, key=lambda cid: (-fused[cid], cid))
        passages = []
        for cid in ranked:
            dist = distances.get(cid, 2.0)
            passage = Passage.from_chunk(chunks[cid], fused[cid], dist)
            if dist > s.distance_threshold:
                report.over_threshold += 1
                reason = f"distance {dist:.3f} > threshold {s.distance_threshold}"
                report.dropped.append(cut(passage, "threshold", reason))
                continue
            passages.append(passage)
        passages = self._deduplicate(passages, report)
        if s.retrieval_strategy == "window":
            passages = self._windows(passages)
        return passages, report

    def _similarities(self, ids: list[str], qvecs: np.ndarray) -> dict[str, np.ndarray]:
        """Per candidate, its cosine similarity to each query (one stored-vector fetch)."""
        vectors = self.collection.vectors_for_ids(ids)
        if not vectors:
            return {}
        keys = list(vectors)
        matrix = _unit(np.array([vectors[k] for k in keys], dtype=np.float32))
        sims = matrix @ _unit(qvecs).T
        return {k: sims[i] for i, k in enumerate(keys)}

    def _deduplicate(self, passages: list[Passage], report: RetrievalReport) -> list[Passage]:
        # a plain chunk's stored BM25 tokens are its text's: stemming them again cost more
        # than the rest of retrieval together at 100k chunks (bench/bench_scale.py)
        stored = self.collection.chunk_tokens(
            [p.chunk_ids[0] for p in passages if p.kind == "chunk"]
        )
        token_sets = [set(stored.get(p.chunk_ids[0]) or tokenize(p.text)) for p in passages]
        similar = _jaccard_matrix(token_sets) >= self.settings.dedup_similarity
        first_with_text: dict[str, int] = {}
        kept: list[int] = []
        for i, passage in enumerate(passages):
            twins = np.flatnonzero(similar[kept, i]) if kept else ()
            twin = kept[twins[0]] if len(twins) else first_with_text.get(passage.text)
            if twin is not None:
                report.duplicates += 1
                report.dropped.append(
                    cut(passage, "duplicate", f"duplicate of {passages[twin].chunk_ids[0]}")
                )
                continue
            kept.append(i)
            first_with_text[passage.text] = i
        return [passages[i] for i in kept]

    def _windows(self, passages: list[Passage]) -> list[Passage]:
        """Replace each plain-chunk hit by its neighbourhood, merging hits that touch."""
        out: list[Passage] = []
        covered: dict[str, Passage] = {}  # chunk id -> the window passage holding it
        for passage in passages:
            if passage.kind != "chunk" or passage.chunk_ids[0] in covered:
                if passage.kind != "chunk":
                    out.append(passage)
                continue
            hit = self.collection.chunks_by_id([passage.chunk_ids[0]])[passage.chunk_ids[0]]
            window = self.collection.neighbours(hit, self.settings.window, self.settings.window)
            merged = _merge(window, passage.score, passage.distance)
            for cid in merged.chunk_ids:
                covered[cid] = merged
            out.append(merged)
        return out


def _merge(chunks: list[Chunk], score: float, distance: float) -> Passage:
    """Join consecutive chunks of one document, dropping the overlap between them."""
    text, end = "", None
    for chunk in chunks:
        if end is not None and chunk.start_char < end:
            text += chunk.text[end - chunk.start_char :]
        else:
            text += ("\n" if text else "") + chunk.text
        end = chunk.end_char
    first, last = chunks[0], chunks[-1]
    return Passage(
        text=text,
        source=first.source,
        chunk_ids=[c.id for c in chunks],
        score=score,
        distance=distance,
        doc_id=first.doc_id,
        page=first.page,
        start_line=first.start_line,
        end_line=last.end_line,
        heading=first.heading,
    )


class Retriever(Protocol):
    """Finds the passages for a question's queries, best first, within the threshold.

    A new retriever is a class with this method, an entry in ``RETRIEVERS`` and its name
    among the ``retriever`` setting's choices (tests check the two agree)."""

    def retrieve(self, queries: Sequence[str]) -> tuple[list[Passage], RetrievalReport]: ...


class DenseRetriever(HybridRetriever):
    """Nearest vectors only: the baseline hybrid retrieval is measured against (threshold,
    deduplication and windows unchanged, so rows of a comparison differ in the index)."""

    indexes = ("dense",)
    weight = 1.0


class KeywordRetriever(HybridRetriever):
    """BM25 only, the other baseline; the distance threshold still applies (measured
    from the candidates' stored vectors, as in hybrid)."""

    indexes = ("keyword",)
    weight = 0.0


RETRIEVERS: dict[str, Callable[[ChunkReader, Embeddings, Settings], Retriever]] = {
    "hybrid": HybridRetriever,
    "dense": DenseRetriever,
    "keyword": KeywordRetriever,
}


def make_retriever(collection: ChunkReader, embedder: Embeddings, settings: Settings) -> Retriever:
    """The retriever the ``retriever`` setting names, over ``collection``."""
    return RETRIEVERS[settings.retriever](collection, embedder, settings)
